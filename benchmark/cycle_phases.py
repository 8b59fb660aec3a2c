"""Shim: ``python benchmark/cycle_phases.py`` = ``python -m benchmark.cycle_phases`` = ``python -m benchmark.tools.cycle_phases``
(a decode step or EAGLE-3 cycle cut into phases from profiler traces). See script_shim.py."""

if __name__ == "__main__":
    if __package__:  # python -m benchmark.cycle_phases
        from benchmark.script_shim import run_module
    else:  # python benchmark/cycle_phases.py: this folder is sys.path[0]
        from script_shim import run_module
    run_module("benchmark.tools.cycle_phases")
