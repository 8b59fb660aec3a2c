"""Shim: ``python benchmark/project_tp.py`` = ``python -m benchmark.project_tp`` = ``python -m benchmark.tools.project_tp``
(the verify all-reduce time and memory floor projected to TP=N). See script_shim.py."""

if __name__ == "__main__":
    if __package__:  # python -m benchmark.project_tp
        from benchmark.script_shim import run_module
    else:  # python benchmark/project_tp.py: this folder is sys.path[0]
        from script_shim import run_module
    run_module("benchmark.tools.project_tp")
