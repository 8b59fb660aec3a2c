"""A W4A16 MoE layer (INT4 experts, group 32, symmetric) for small token counts, in Triton.

For M·top_k up to about 64 (decode, EAGLE verify) a MoE layer is bound by reading the touched
experts' weights once. This path does that with no ``moe_align`` padding and no tensor cores:

1. ``_prepare``: the activations ``x [M, K]`` to fp32 ``[M, 8, K/8]``, "nibble-major": row ``s``
   holds ``x[8j + s]`` for every word ``j``, pre-multiplied by ``2**-off(s)`` (below), so every
   later activation load is contiguous. It also zeroes what later kernels add into atomically.
2. ``_gate_up``: one program per (expert run, BLOCK_N rows of gate and of up, K split). A run is
   one (token, expert) pair, or with ``grouped`` all pairs of one expert: the pairs are sorted by
   expert, the first slot of a run does the work and the other slots exit, and the run's tokens
   are done one after another, so the expert's tiles come from DRAM once (then L1/L2). Writes the
   gate and up sums in fp32 to ``h [M·top_k, 2, 8, I/8]``, nibble-major in the intermediate index;
   with split-K they are added with fp32 atomics.
3. Down: SiLU(gate)·up is applied as ``h`` is loaded, times the routing weight.
   ``down_by_token``: one program per (token, BLOCK_N rows of the hidden size) loops over the
   token's top-k experts and stores the sum in the output dtype (no atomics, no extra kernel).
   Otherwise one program per expert run adds into an fp32 ``[M, hidden]`` with atomics, then one
   cast. Expert ids of -1 (not on this rank) contribute zero.

Dequantisation: word ``w`` holds nibble ``s`` in bits ``4s``. ``(w & (15 << 4s)) | 0x4B000000``
read as fp32 is ``2**23 + q·2**(4s)``, exact, so subtracting ``2**23 + 8·2**(4s)`` gives
``(q - 8)·2**(4s)`` with one logic op (and/or fuse into one LOP3) and one fp32 add: no
integer-to-float conversion and, for s < 5, no shift. Nibbles 5-7 come from ``w >> 12`` (one
shift per word) so they stay inside the 23-bit mantissa. The activations' pre-scaling by
``2**-off(s)`` (off = 0, 4, 8, 12, 16, 8, 12, 16) undoes the ``2**(4s)``. Per word (8 values, one
group-32 scale) that is 8 FMAs with the activations and one with the scale; the sums over K are
reduced across lanes once per program.

Weight layout: ``layout.W4Weights`` (compressed-tensors ``pack-quantized``, stacked over experts).
Shapes are compile-time constants; M and the K split are not (one compile serves every M).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from fastpath_kernels.moe.layout import GROUP, PACK, W4Weights


@triton.jit
def _dequant(w, w12, S: tl.constexpr):
    """``(nibble S - 8) * 2**off(S)`` of each int32 word as exact fp32 (module docstring)."""
    if S < 5:
        bits = (w & (15 << (4 * S))) | 0x4B000000
        val = bits.to(tl.float32, bitcast=True) - (8388608.0 + 8.0 * (1 << (4 * S)))
    else:
        bits = (w12 & (15 << (4 * S - 12))) | 0x4B000000
        val = bits.to(tl.float32, bitcast=True) - (8388608.0 + 8.0 * (1 << (4 * S - 12)))
    return val


@triton.jit
def _x_scale(S: tl.constexpr):
    """``2**-off(S)``, the activation factor that undoes ``_dequant``'s ``2**off(S)``."""
    if S < 5:
        f = 1.0 / (1 << (4 * S))
    else:
        f = 1.0 / (1 << (4 * S - 12))
    return f


@triton.jit
def _zero_span(ptr, n, part, parts, BLOCK: tl.constexpr):
    """Zero this program's ``part``-th of ``parts`` equal spans of ``ptr[0:n]`` (fp32)."""
    span = tl.cdiv(n, parts)
    lo = part * span
    hi = tl.minimum(lo + span, n)
    for start in range(lo, hi, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        tl.store(ptr + offs, tl.zeros([BLOCK], dtype=tl.float32), mask=offs < hi)


@triton.jit
def _prepare(x_ptr, xp_ptr, h_ptr, o_ptr, K: tl.constexpr, H_ROW: tl.constexpr, ZERO_H: tl.constexpr,
             ZERO_OUT: tl.constexpr, BLOCK_W: tl.constexpr):
    """``xp[t, s, j] = x[t, 8j + s] * 2**-off(s)`` in fp32; zeroes token t's rows of the split-K
    gate/up sums ``h`` and of the fp32 output when those are added to with atomics."""
    t = tl.program_id(0)
    part = tl.program_id(1)
    parts = tl.num_programs(1)
    offs = part * BLOCK_W + tl.arange(0, BLOCK_W)
    kw = K // 8
    ok = offs < kw
    for s in tl.static_range(8):
        v = tl.load(x_ptr + t * K + offs * 8 + s, mask=ok, other=0.0).to(tl.float32)
        tl.store(xp_ptr + t * K + s * kw + offs, v * _x_scale(s), mask=ok)
    if ZERO_H:
        _zero_span(h_ptr + t * H_ROW, H_ROW, part, parts, 1024)
    if ZERO_OUT:
        _zero_span(o_ptr + t * K, K, part, parts, 1024)


@triton.jit
def _run_of(ids_ptr, p, P, GROUPED: tl.constexpr, RUN_MAX: tl.constexpr):
    """(expert, pairs in its run, whether this program does the run) for slot ``p``."""
    e = tl.load(ids_ptr + p).to(tl.int32)
    if GROUPED:
        prev = tl.load(ids_ptr + p - 1, mask=p > 0, other=-1).to(tl.int32)
        offs = p + tl.arange(0, RUN_MAX)
        run = tl.sum((tl.load(ids_ptr + offs, mask=offs < P, other=-1).to(tl.int32) == e).to(tl.int32))
        active = (e >= 0) & (prev != e)
    else:
        run = 1
        active = e >= 0
    return e, run, active


@triton.jit
def _pair_of(order_ptr, p, c, GROUPED: tl.constexpr):
    """The (token, expert) pair index of the ``c``-th member of the run starting at slot ``p``."""
    if GROUPED:
        pair = tl.load(order_ptr + p + c).to(tl.int32)
    else:
        pair = p + c
    return pair


@triton.jit
def _x_row(x_ptrs, mask, rw, S: tl.constexpr, FROM_H: tl.constexpr, ROW: tl.constexpr, INTER: tl.constexpr):
    """Activations for nibble row ``S`` of a tile: from ``xp`` (gate/up), or from ``h`` as
    ``silu(gate) * up * routing weight * 2**-off(S)`` (down)."""
    if FROM_H:
        g = tl.load(x_ptrs + S * ROW, mask=mask, other=0.0)
        u = tl.load(x_ptrs + INTER + S * ROW, mask=mask, other=0.0)
        x = g * tl.sigmoid(g) * u * (rw * _x_scale(S))
    else:
        x = tl.load(x_ptrs + S * ROW)
    return x


@triton.jit
def _word_sums(w, x_ptrs, mask, rw, FROM_H: tl.constexpr, ROW: tl.constexpr, INTER: tl.constexpr):
    """``sum_i (nibble i of w[n, j] - 8) * x[8j + i]`` for an int32 tile ``w [BLOCK_N, J]``; the
    activations of row ``i`` start at ``x_ptrs + i * ROW`` (``[J]``, nibble-major)."""
    w12 = w >> 12
    acc = _dequant(w, w12, 0) * _x_row(x_ptrs, mask, rw, 0, FROM_H, ROW, INTER)[None, :]
    for s in tl.static_range(1, 8):
        acc += _dequant(w, w12, s) * _x_row(x_ptrs, mask, rw, s, FROM_H, ROW, INTER)[None, :]
    return acc


@triton.jit
def _k_span(split_k, K_TILES: tl.constexpr):
    """The K tiles ``[lo, hi)`` of this program's split (``program_id(2)`` of ``split_k``)."""
    per_split = tl.cdiv(K_TILES, split_k)
    lo = tl.program_id(2) * per_split
    return lo, tl.minimum(lo + per_split, K_TILES)


@triton.jit
def _expert_tiles(w_ptr, s_ptr, e, offs_n, offs_j, ROWS: tl.constexpr, KW: tl.constexpr, KG: tl.constexpr):
    """Pointers to the first K tile of rows ``offs_n`` of expert ``e`` (``ROWS`` rows an expert):
    the int32 words ``[BLOCK_N, J]`` and, for each word, its group's scale (one per 4 words)."""
    e64 = e.to(tl.int64)
    w_ptrs = w_ptr + e64 * (ROWS * KW) + offs_n[:, None] * KW + offs_j[None, :]
    s_ptrs = s_ptr + e64 * (ROWS * KG) + offs_n[:, None] * KG + offs_j[None, :] // 4
    return w_ptrs, s_ptrs


@triton.jit(do_not_specialize=["P", "split_k"])  # one compile for every M and split
def _gate_up(
    xp_ptr, w_ptr, s_ptr, h_ptr, ids_ptr, order_ptr, P, K: tl.constexpr, INTER: tl.constexpr,
    TOP_K: tl.constexpr, GROUPED: tl.constexpr, RUN_MAX: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, split_k, ATOMIC: tl.constexpr, NUM_STAGES: tl.constexpr,
):
    """Gate and up sums of one expert run for BLOCK_N intermediate rows over one K split."""
    J: tl.constexpr = BLOCK_K // 8
    KW: tl.constexpr = K // 8
    KG: tl.constexpr = K // 32
    K_TILES: tl.constexpr = K // BLOCK_K
    p = tl.program_id(0)
    nt = tl.program_id(1)
    k_lo, k_hi = _k_span(split_k, K_TILES)
    e, run, active = _run_of(ids_ptr, p, P, GROUPED, RUN_MAX)
    if active:
        offs_n = nt * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_j = tl.arange(0, J)
        wg_ptrs, sg_ptrs = _expert_tiles(w_ptr, s_ptr, e, offs_n, offs_j, 2 * INTER, KW, KG)
        h_cols = (offs_n % 8) * (INTER // 8) + offs_n // 8
        for c in range(run):
            pair = _pair_of(order_ptr, p, c, GROUPED)
            x_ptrs = xp_ptr + (pair // TOP_K) * K + offs_j
            acc_g = tl.zeros([BLOCK_N, J], dtype=tl.float32)
            acc_u = tl.zeros([BLOCK_N, J], dtype=tl.float32)
            for kt in tl.range(k_lo, k_hi, num_stages=NUM_STAGES):
                wg = tl.load(wg_ptrs + kt * J)
                wu = tl.load(wg_ptrs + INTER * KW + kt * J)
                sg = tl.load(sg_ptrs + kt * (J // 4)).to(tl.float32)
                su = tl.load(sg_ptrs + INTER * KG + kt * (J // 4)).to(tl.float32)
                acc_g += _word_sums(wg, x_ptrs + kt * J, None, 1.0, False, KW, INTER) * sg
                acc_u += _word_sums(wu, x_ptrs + kt * J, None, 1.0, False, KW, INTER) * su
            h_ptrs = h_ptr + pair * (2 * INTER) + h_cols
            if not ATOMIC:
                tl.store(h_ptrs, tl.sum(acc_g, axis=1))
                tl.store(h_ptrs + INTER, tl.sum(acc_u, axis=1))
            else:
                tl.atomic_add(h_ptrs, tl.sum(acc_g, axis=1), sem="relaxed")
                tl.atomic_add(h_ptrs + INTER, tl.sum(acc_u, axis=1), sem="relaxed")


@triton.jit(do_not_specialize=["split_k"])
def _down_by_token(
    h_ptr, w_ptr, s_ptr, out_ptr, ids_ptr, rw_ptr, HIDDEN: tl.constexpr, INTER: tl.constexpr,
    TOP_K: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, split_k, ATOMIC: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):
    """One token, BLOCK_N output rows: the routing-weighted sum over its top-k experts."""
    J: tl.constexpr = BLOCK_K // 8
    KW: tl.constexpr = INTER // 8
    KG: tl.constexpr = INTER // 32
    K_TILES: tl.constexpr = INTER // BLOCK_K
    t = tl.program_id(0)
    nt = tl.program_id(1)
    k_lo, k_hi = _k_span(split_k, K_TILES)
    offs_n = nt * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_j = tl.arange(0, J)
    acc = tl.zeros([BLOCK_N, J], dtype=tl.float32)
    for slot in range(TOP_K):  # not unrolled: one K loop at a time either way, and a quicker compile
        pair = t * TOP_K + slot
        e = tl.load(ids_ptr + pair).to(tl.int32)
        rw = tl.load(rw_ptr + pair).to(tl.float32)
        w_ptrs, s_ptrs = _expert_tiles(w_ptr, s_ptr, tl.maximum(e, 0), offs_n, offs_j, HIDDEN, KW, KG)
        h_ptrs = h_ptr + pair * (2 * INTER) + offs_j
        w_ok = (offs_n[:, None] * 0 + e) >= 0  # e >= 0 as tensors (the interpreter needs them)
        h_ok = (offs_j * 0 + e) >= 0
        for kt in tl.range(k_lo, k_hi, num_stages=NUM_STAGES):
            w = tl.load(w_ptrs + kt * J, mask=w_ok, other=0)
            sc = tl.load(s_ptrs + kt * (J // 4), mask=w_ok, other=0.0).to(tl.float32)
            acc += _word_sums(w, h_ptrs + kt * J, h_ok, rw, True, KW, INTER) * sc
    y = tl.sum(acc, axis=1)
    if not ATOMIC:
        tl.store(out_ptr + t * HIDDEN + offs_n, y.to(out_ptr.dtype.element_ty))
    else:
        tl.atomic_add(out_ptr + t * HIDDEN + offs_n, y, sem="relaxed")


@triton.jit(do_not_specialize=["P", "split_k"])
def _down_by_expert(
    h_ptr, w_ptr, s_ptr, out_ptr, ids_ptr, order_ptr, rw_ptr, P, HIDDEN: tl.constexpr,
    INTER: tl.constexpr, TOP_K: tl.constexpr, GROUPED: tl.constexpr, RUN_MAX: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, split_k, ATOMIC: tl.constexpr, NUM_STAGES: tl.constexpr,
):
    """One expert run, BLOCK_N output rows: adds each pair's weighted down output into fp32 out."""
    J: tl.constexpr = BLOCK_K // 8
    KW: tl.constexpr = INTER // 8
    KG: tl.constexpr = INTER // 32
    K_TILES: tl.constexpr = INTER // BLOCK_K
    p = tl.program_id(0)
    nt = tl.program_id(1)
    k_lo, k_hi = _k_span(split_k, K_TILES)
    e, run, active = _run_of(ids_ptr, p, P, GROUPED, RUN_MAX)
    if active:
        offs_n = nt * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_j = tl.arange(0, J)
        w_ptrs, s_ptrs = _expert_tiles(w_ptr, s_ptr, e, offs_n, offs_j, HIDDEN, KW, KG)
        h_ok = offs_j >= 0
        for c in range(run):
            pair = _pair_of(order_ptr, p, c, GROUPED)
            rw = tl.load(rw_ptr + pair).to(tl.float32)
            h_ptrs = h_ptr + pair * (2 * INTER) + offs_j
            acc = tl.zeros([BLOCK_N, J], dtype=tl.float32)
            for kt in tl.range(k_lo, k_hi, num_stages=NUM_STAGES):
                w = tl.load(w_ptrs + kt * J)
                sc = tl.load(s_ptrs + kt * (J // 4)).to(tl.float32)
                acc += _word_sums(w, h_ptrs + kt * J, h_ok, rw, True, KW, INTER) * sc
            tl.atomic_add(out_ptr + (pair // TOP_K) * HIDDEN + offs_n, tl.sum(acc, axis=1), sem="relaxed")


@dataclass(frozen=True)
class GemmTile:
    """Tiling of one of the two GEMMs: rows per program, K per loop step, K splits, warps."""

    block_n: int = 16
    block_k: int = 256
    split_k: int = 1
    num_warps: int = 4
    stages: int = 1  # >1: Triton pipelines the K loop's loads (cp.async) this many stages deep

    def label(self) -> str:
        piped = f"p{self.stages}" if self.stages > 1 else ""
        return f"n{self.block_n}k{self.block_k}s{self.split_k}w{self.num_warps}{piped}"


@dataclass(frozen=True)
class SmallMConfig:
    """How one MoE layer call runs (module docstring)."""

    gate_up: GemmTile = GemmTile(16, 256, 4, 4)
    down: GemmTile = GemmTile(16, 256, 1, 4)
    grouped: bool = False  # sort pairs by expert so each expert streams once (costs a sort)
    down_by_token: bool = True  # down: per token over its top-k (no atomics) vs per expert run

    def label(self) -> str:
        mode = ("grouped" if self.grouped else "pairs") + ("-token" if self.down_by_token else "-expert")
        return f"{mode} up:{self.gate_up.label()} down:{self.down.label()}"


def check_config(cfg: SmallMConfig, hidden: int, inter: int) -> None:
    """Raise ValueError if ``cfg`` cannot run these shapes (tiles must divide them exactly)."""
    for name, tile, n, k in (("gate_up", cfg.gate_up, inter, hidden), ("down", cfg.down, hidden, inter)):
        if tile.block_k < GROUP or tile.block_k & (tile.block_k - 1) or k % tile.block_k:
            raise ValueError(f"{name}: block_k={tile.block_k} must be a power of two >= {GROUP} dividing K={k}")
        if tile.block_n & (tile.block_n - 1) or n % tile.block_n or tile.block_n < 1:
            raise ValueError(f"{name}: block_n={tile.block_n} must be a power of two dividing N={n}")
        if tile.split_k < 1 or tile.split_k > k // tile.block_k:
            raise ValueError(f"{name}: split_k={tile.split_k} must be in 1..{k // tile.block_k}")
        if tile.stages < 1:
            raise ValueError(f"{name}: stages={tile.stages} must be >= 1")
    if inter % PACK:
        raise ValueError(f"intermediate size {inter} is not a multiple of {PACK}")


def default_config(m: int, top_k: int, hidden: int, inter: int) -> SmallMConfig:
    """The H200 winners of the first measured run (benchmark/results/20261130-2024-h200-moe-small-m),
    at Kimi's TP=2 and TP=8 shapes, as a rule: gate/up BLOCK_N 8, BLOCK_K 512, split 2 while at
    most 2048 programs would run, else 1; down BLOCK_N 32 by expert run up to 64 pairs, by token
    beyond; no grouping (it never won). Shapes the rule does not divide fall back to the largest
    tiles that do."""
    pairs = m * top_k
    bk_up = max(b for b in (32, 64, 128, 256, 512) if hidden % b == 0)
    bk_down = max(b for b in (32, 64, 128, 256) if inter % b == 0)
    bn_up = max(b for b in (1, 2, 4, 8) if inter % b == 0)
    bn_down = max(b for b in (1, 2, 4, 8, 16, 32) if hidden % b == 0)
    split = 2 if pairs * (inter // bn_up) <= 2048 and hidden // bk_up >= 2 else 1
    return SmallMConfig(GemmTile(bn_up, bk_up, split, 4), GemmTile(bn_down, bk_down, 1, 4),
                        grouped=False, down_by_token=pairs > 64)


def fused_moe_w4a16(x: torch.Tensor, w13: W4Weights, w2: W4Weights, topk_weights: torch.Tensor,
                    topk_ids: torch.Tensor, config: SmallMConfig | None = None) -> torch.Tensor:
    """One MoE layer: ``out[t] = sum_j topk_weights[t, j] * down_e(silu(gate_e(x_t)) * up_e(x_t))``.

    ``x [M, hidden]`` fp16/bf16, ``w13`` gate/up ``[E, 2I, hidden]``, ``w2`` down ``[E, hidden, I]``
    (``W4Weights``), ``topk_weights [M, top_k]``, ``topk_ids [M, top_k]`` (int32/int64; -1 = not on
    this rank; a token's experts distinct). Returns ``[M, hidden]`` in ``x.dtype``.
    """
    m, hidden = x.shape
    top_k = topk_ids.shape[1]
    inter = w13.n // 2
    if w13.k != hidden or w2.k != inter or w2.n != hidden or w13.n != 2 * inter:
        raise ValueError(f"shapes: x {tuple(x.shape)}, w13 [{w13.n}, {w13.k}], w2 [{w2.n}, {w2.k}]")
    cfg = config or default_config(m, top_k, hidden, inter)
    check_config(cfg, hidden, inter)
    pairs = m * top_k
    dev = x.device
    x = x.contiguous()
    ids = topk_ids.reshape(-1).contiguous()
    rw = topk_weights.reshape(-1).contiguous()
    up, dn = cfg.gate_up, cfg.down
    direct_out = cfg.down_by_token and dn.split_k == 1  # else fp32 atomics, then one cast
    xp = torch.empty(m, hidden, dtype=torch.float32, device=dev)
    h = torch.empty(pairs, 2 * inter, dtype=torch.float32, device=dev)
    out = torch.empty(m, hidden, dtype=x.dtype if direct_out else torch.float32, device=dev)
    block_w = 128
    _prepare[(m, triton.cdiv(hidden // PACK, block_w))](
        x, xp, h, out, K=hidden, H_ROW=top_k * 2 * inter, ZERO_H=up.split_k > 1, ZERO_OUT=not direct_out,
        BLOCK_W=block_w)
    if cfg.grouped:
        ids_sorted, order = torch.sort(ids)
    else:
        ids_sorted, order = ids, ids
    run_max = triton.next_power_of_2(m) if cfg.grouped else 1  # a constexpr: keep it fixed when unused
    _gate_up[(pairs, inter // up.block_n, up.split_k)](
        xp, w13.packed, w13.scale, h, ids_sorted, order, pairs, K=hidden, INTER=inter,
        TOP_K=top_k, GROUPED=cfg.grouped, RUN_MAX=run_max,
        BLOCK_N=up.block_n, BLOCK_K=up.block_k, split_k=up.split_k, ATOMIC=up.split_k > 1,
        NUM_STAGES=up.stages, num_warps=up.num_warps)
    if cfg.down_by_token:
        _down_by_token[(m, hidden // dn.block_n, dn.split_k)](
            h, w2.packed, w2.scale, out, ids, rw, HIDDEN=hidden, INTER=inter,
            TOP_K=top_k, BLOCK_N=dn.block_n, BLOCK_K=dn.block_k, split_k=dn.split_k, ATOMIC=dn.split_k > 1,
            NUM_STAGES=dn.stages, num_warps=dn.num_warps)
    else:
        _down_by_expert[(pairs, hidden // dn.block_n, dn.split_k)](
            h, w2.packed, w2.scale, out, ids_sorted, order, rw, pairs, HIDDEN=hidden, INTER=inter,
            TOP_K=top_k, GROUPED=cfg.grouped, RUN_MAX=run_max,
            BLOCK_N=dn.block_n, BLOCK_K=dn.block_k, split_k=dn.split_k, ATOMIC=True,
            NUM_STAGES=dn.stages, num_warps=dn.num_warps)
    return out if out.dtype == x.dtype else out.to(x.dtype)


__all__ = ["GemmTile", "SmallMConfig", "check_config", "default_config", "fused_moe_w4a16"]
