"""Statistics the benchmark's parts share: quantiles, and the GPU-bound ratio of speculation."""

from __future__ import annotations


def quantile(values: list[float], q: float) -> float:
    """Linear-interpolated quantile of ``values`` (0 <= q <= 1)."""
    if not values:
        raise ValueError("quantile of no values")
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def gpu_bound_ratio(decode_busy_ms: float, cycle_busy_ms: float, accept_len: float) -> float:
    """Speed-up of speculation if neither engine left the GPU idle: GPU busy time per token of plain
    decode (one token a step) over an EAGLE-3 cycle's per accepted token."""
    return decode_busy_ms / (cycle_busy_ms / accept_len)
