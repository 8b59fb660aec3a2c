"""The MoE layer the kernel computes, in plain torch (float64 by default): the correctness oracle."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fastpath_kernels.moe.layout import W4Weights, dequantize


def moe_reference(x: torch.Tensor, w13: W4Weights, w2: W4Weights, topk_weights: torch.Tensor,
                  topk_ids: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``out[t] = sum_j w[t, j] * down_e(silu(gate_e(x_t)) * up_e(x_t))`` with ``e = ids[t, j]``;
    ids of -1 (experts not on this rank) add nothing. Returns ``[M, hidden]`` in ``dtype``.
    Dequantizes one used expert at a time (all of Kimi's would not fit in float64)."""
    inter = w13.n // 2
    xs = x.to(dtype)
    out = torch.zeros(x.shape[0], w2.n, dtype=dtype, device=x.device)
    ids = topk_ids.to(torch.int64)
    for e in sorted({int(v) for v in ids.flatten().tolist() if v >= 0}):
        tokens, slots = (ids == e).nonzero(as_tuple=True)
        h = xs[tokens] @ dequantize(w13, e, dtype).T
        y = (F.silu(h[:, :inter]) * h[:, inter:]) @ dequantize(w2, e, dtype).T
        out.index_add_(0, tokens, topk_weights[tokens, slots].to(dtype)[:, None] * y)
    return out
