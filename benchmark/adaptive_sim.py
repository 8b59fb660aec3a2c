"""Shim: ``python benchmark/adaptive_sim.py`` = ``python -m benchmark.adaptive_sim`` = ``python -m benchmark.tools.adaptive_sim``
(adaptive speculation's throughput policy against a simulated server, on CPU). See script_shim.py."""

if __name__ == "__main__":
    if __package__:  # python -m benchmark.adaptive_sim
        from benchmark.script_shim import run_module
    else:  # python benchmark/adaptive_sim.py: this folder is sys.path[0]
        from script_shim import run_module
    run_module("benchmark.tools.adaptive_sim")
