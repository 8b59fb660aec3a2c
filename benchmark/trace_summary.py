"""Shim: ``python benchmark/trace_summary.py`` = ``python -m benchmark.trace_summary`` = ``python -m benchmark.tools.trace_summary``
(GPU time by kernel category in torch-profiler traces). See script_shim.py."""

if __name__ == "__main__":
    if __package__:  # python -m benchmark.trace_summary
        from benchmark.script_shim import run_module
    else:  # python benchmark/trace_summary.py: this folder is sys.path[0]
        from script_shim import run_module
    run_module("benchmark.tools.trace_summary")
