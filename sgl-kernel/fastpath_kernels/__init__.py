"""sglang-fastpath's own GPU kernels (Triton), importable with ``sgl-kernel`` on ``PYTHONPATH``.

``moe``: a W4A16 (INT4, group 32) MoE for small token counts (EAGLE verify, decode).
``attention_tma``: the GPU bench and sm_90 cross-compile of patch 0032's MLA verify attention over 64-token
pages with TMA loads (the kernel is ``sglang.kernels.ops.attention.verify_mla_tma``, in the patch).
``ptxas``: registers and spills of a kernel's PTX, for the CPU cross-compile checks.
"""
