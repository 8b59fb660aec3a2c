"""W4A16 (INT4, group 32) MoE for small token counts: layout, reference, Triton kernel.

``layout``: the packed expert layout and the load-time conversions into it (pure torch).
``reference``: the layer in float64 torch, the correctness oracle.
``w4a16_small_m``: the Triton kernels and ``fused_moe_w4a16`` (imports Triton).
"""
