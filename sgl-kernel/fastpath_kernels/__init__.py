"""sglang-fastpath's own GPU kernels (Triton), importable with ``sgl-kernel`` on ``PYTHONPATH``.

``moe``: a W4A16 (INT4, group 32) MoE for small token counts (EAGLE verify, decode).
"""
