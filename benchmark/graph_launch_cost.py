"""Shim: ``python benchmark/graph_launch_cost.py`` = ``python -m benchmark.graph_launch_cost`` = ``python -m benchmark.tools.graph_launch_cost``
(the host cost of one CUDA graph launch per node, and what changes it). See script_shim.py."""

if __name__ == "__main__":
    if __package__:  # python -m benchmark.graph_launch_cost
        from benchmark.script_shim import run_module
    else:  # python benchmark/graph_launch_cost.py: this folder is sys.path[0]
        from script_shim import run_module
    run_module("benchmark.tools.graph_launch_cost")
