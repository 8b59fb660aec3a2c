"""Shim: ``python benchmark/collective_cost.py`` = ``python -m benchmark.collective_cost`` = ``python -m benchmark.tools.collective_cost``
(one all-reduce's cost per method and message size). See script_shim.py."""

if __name__ == "__main__":
    if __package__:  # python -m benchmark.collective_cost
        from benchmark.script_shim import run_module
    else:  # python benchmark/collective_cost.py: this folder is sys.path[0]
        from script_shim import run_module
    run_module("benchmark.tools.collective_cost")
