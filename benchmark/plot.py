"""Shim: ``python benchmark/plot.py`` = ``python -m benchmark.plot`` = ``python -m benchmark.driver.plot``
(the step and e2e PNGs of a results.json). See script_shim.py."""

if __name__ == "__main__":
    if __package__:  # python -m benchmark.plot
        from benchmark.script_shim import run_module
    else:  # python benchmark/plot.py: this folder is sys.path[0]
        from script_shim import run_module
    run_module("benchmark.driver.plot")
