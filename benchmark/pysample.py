"""Shim: ``python benchmark/pysample.py`` = ``python -m benchmark.pysample`` = ``python -m benchmark.tools.pysample``
(the scheduler sampler's call tree). See script_shim.py."""

if __name__ == "__main__":
    if __package__:  # python -m benchmark.pysample
        from benchmark.script_shim import run_module
    else:  # python benchmark/pysample.py: this folder is sys.path[0]
        from script_shim import run_module
    run_module("benchmark.tools.pysample")
