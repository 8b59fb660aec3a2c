"""Shim: ``python benchmark/rank_skew.py`` = ``python -m benchmark.rank_skew`` = ``python -m benchmark.tools.rank_skew``
(transfer vs waiting in collectives across TP ranks). See script_shim.py."""

if __name__ == "__main__":
    if __package__:  # python -m benchmark.rank_skew
        from benchmark.script_shim import run_module
    else:  # python benchmark/rank_skew.py: this folder is sys.path[0]
        from script_shim import run_module
    run_module("benchmark.tools.rank_skew")
