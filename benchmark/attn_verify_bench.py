"""Shim: ``python benchmark/attn_verify_bench.py`` = ``python -m benchmark.attn_verify_bench`` = ``python -m benchmark.tools.attn_verify_bench``
(the verify-attention kernel's check and timing). See script_shim.py."""

if __name__ == "__main__":
    if __package__:  # python -m benchmark.attn_verify_bench
        from benchmark.script_shim import run_module
    else:  # python benchmark/attn_verify_bench.py: this folder is sys.path[0]
        from script_shim import run_module
    run_module("benchmark.tools.attn_verify_bench")
