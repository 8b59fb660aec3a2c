"""sglang-fastpath's own GPU kernels (Triton), importable with ``sgl-kernel`` on ``PYTHONPATH``.

``moe``: a W4A16 (INT4, group 32) MoE for small token counts (EAGLE verify, decode).
``attention_tma``: MLA verify attention over 64-token pages with TMA loads (prototype).
``ptxas``: registers and spills of a kernel's PTX, for the CPU cross-compile checks.
"""
