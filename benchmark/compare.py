"""Shim: ``python benchmark/compare.py`` = ``python -m benchmark.compare`` = ``python -m benchmark.driver.compare``
(the regression guard on results.json files). See script_shim.py."""

if __name__ == "__main__":
    if __package__:  # python -m benchmark.compare
        from benchmark.script_shim import run_module
    else:  # python benchmark/compare.py: this folder is sys.path[0]
        from script_shim import run_module
    run_module("benchmark.driver.compare")
