"""Shim: ``python benchmark/results_index.py`` = ``python -m benchmark.results_index`` = ``python -m benchmark.driver.results_index``
(writes benchmark/results/INDEX.md). See script_shim.py."""

if __name__ == "__main__":
    if __package__:  # python -m benchmark.results_index
        from benchmark.script_shim import run_module
    else:  # python benchmark/results_index.py: this folder is sys.path[0]
        from script_shim import run_module
    run_module("benchmark.driver.results_index")
