"""Patch 0032's MLA verify attention with TMA tiles on 64-token pages: its GPU bench (``bench``) and sm_90
cross-compile (``xcompile``); the kernel is ``sglang.kernels.ops.attention.verify_mla_tma``, in the patch."""
