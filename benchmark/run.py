"""Shim: ``python benchmark/run.py`` = ``python -m benchmark.run`` = ``python -m benchmark.driver.run``
(the benchmark's CLI: stock and fork side by side, per step and end to end). See script_shim.py."""

if __name__ == "__main__":
    if __package__:  # python -m benchmark.run
        from benchmark.script_shim import run_module
    else:  # python benchmark/run.py: this folder is sys.path[0]
        from script_shim import run_module
    run_module("benchmark.driver.run")
