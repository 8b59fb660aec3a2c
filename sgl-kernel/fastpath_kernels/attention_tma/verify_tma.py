"""MLA speculative-verify attention over a 64-token paged KV cache, with TMA tile loads (issue 18 prototype).

Same semantics as patch 0007's ``verify_grouped_attention_fwd`` for MLA (q/k 576 = 512 latent + 64 rope,
v = the latent's first 512 columns, one KV head), restricted to what verify on Kimi needs:

- One program owns ``BLOCK_M`` query rows: row r is draft token r // BLOCK_H of head r % BLOCK_H (the
  K draft tokens of one request times a block of heads), so each KV tile is read once for all of them.
- The prefix is split over programs (grid axis 1). Each split writes a float32 partial output and its
  base-2 log-sum-exp; ``_merge`` combines them (patch 0007's merge math). With one split the output is
  stored directly. The split count is computed on the device from ``kv_indptr`` (at most
  ``max_kv_splits``, each at least ``min_split_len`` tokens; split boundaries are multiples of BLOCK_N).
- The prefix lives on pages of PAGE = 64 contiguous, page-aligned token rows, so BLOCK_N (32 or 64, a
  divisor of 64) tokens that start at a multiple of BLOCK_N are ONE rectangle of the buffer
  ``[rows, 576]``: the row of the tile's first token is ``kv_indices[kv_start + start]`` (one index
  read per tile) and the tile is loaded through host-built tensor descriptors (TMA on sm_90:
  ``cp.async.bulk.tensor``) as three boxes, latent columns 0-255 and 256-511 and rope 512-575 (a TMA
  box is at most 256 elements a side). ``tl.range(num_stages=NUM_STAGES)`` multi-buffers them, so
  NUM_STAGES - 1 tiles are in flight while one is consumed; ``WARP_SPECIALIZE`` asks Triton for a
  producer/consumer split of the loop.
- A last partial tile (kv_len not a multiple of BLOCK_N) is loaded with masked pointer loads: the rows
  past kv_len on that page are not this request's and may hold anything (NaN included), so they are
  masked to zero rather than loaded as a box.
- The draft tokens' own K/V (``k_extend``/``v_extend``) come in split 0 with plain loads, under the
  causal chain mask or a tree mask (``custom_mask``, FULL_MASK layout as patch 0007).
- No logit cap, no KV scales, bf16/fp16 cache of q's dtype only.

The descriptors are host-side (``triton.tools.tensor_descriptor.TensorDescriptor``): the CUtensorMap is
encoded at launch on the host and passed as a kernel parameter, so no device-side descriptor creation
and no ``triton.set_allocator`` scratch is needed, and a CUDA graph captures it by value (the KV buffer
must not move between capture and replay, as for any captured kernel). No value is read back to the
host and shapes are static per batch size: the call can be captured.

``use_tma=False`` loads the full tiles with pointer loads instead (same math): the interpreter fallback
and a GPU A/B switch.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

PAGE = 64
LK, LV, DLAT, DPE, DHALF = 576, 512, 512, 64, 256
MAX_VERIFY_TOKENS = 8


@triton.jit
def _online_step(acc0, acc1, row_sum, row_max, qk, v0, v1):
    """One online-softmax step over scores ``qk`` (log2 units, -inf masked) and value halves v0/v1."""
    new_max = tl.maximum(row_max, tl.max(qk, 1))
    safe_max = tl.where(new_max == float("-inf"), 0.0, new_max)
    alpha = tl.exp2(row_max - safe_max)
    p = tl.exp2(qk - safe_max[:, None])
    row_sum = row_sum * alpha + tl.sum(p, 1)
    p = p.to(v0.dtype)
    acc0 = acc0 * alpha[:, None] + tl.dot(p, v0)
    acc1 = acc1 * alpha[:, None] + tl.dot(p, v1)
    return acc0, acc1, row_sum, new_max


@triton.jit
def _masked_tile_scores(Base, rows, ok, offs_h, offs_pe, q0, q1, qpe, DHALF: tl.constexpr):
    """Scores q . k^T of the key rows at ``Base + rows`` (rows where ``ok`` is false read as 0), by pointer
    loads; also the two latent halves, which are the values. The prefix's partial tile and the draft tokens."""
    k0 = tl.load(Base + rows[:, None] + offs_h[None, :], mask=ok[:, None], other=0.0)
    k1 = tl.load(Base + rows[:, None] + DHALF + offs_h[None, :], mask=ok[:, None], other=0.0)
    kpe = tl.load(Base + rows[:, None] + offs_pe[None, :], mask=ok[:, None], other=0.0)
    qk = tl.dot(q0, tl.trans(k0))
    qk = tl.dot(q1, tl.trans(k1), qk)
    qk = tl.dot(qpe, tl.trans(kpe), qk)
    return qk, k0, k1


@triton.jit
def _stage1(
    Q, K_Ext, V_Ext, KV,
    desc_lat, desc_pe,
    kv_indptr, kv_indices, mask_ptr, mask_indptr,
    Out, Lse,
    sm_scale,
    stride_qt, stride_qh, stride_ket, stride_vet, stride_kv,
    stride_ot, stride_oh, stride_os, stride_lt, stride_lh,
    num_heads, max_splits, min_split_len,
    NUM_TOKENS: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_T: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    WARP_SPECIALIZE: tl.constexpr,
    INDEX_AHEAD: tl.constexpr,
    USE_TMA: tl.constexpr,
    USE_CUSTOM_MASK: tl.constexpr,
    DIRECT_OUT: tl.constexpr,
):
    DHALF: tl.constexpr = 256
    DLAT: tl.constexpr = 512
    DPE: tl.constexpr = 64
    head_block = tl.program_id(0)
    split = tl.program_id(1)
    cur_req = tl.program_id(2)

    kv_start = tl.load(kv_indptr + cur_req)
    kv_len = tl.load(kv_indptr + cur_req + 1) - kv_start
    num_splits = tl.minimum(tl.maximum(tl.cdiv(kv_len, min_split_len), 1), max_splits)
    if split >= num_splits:
        return
    split_len = tl.cdiv(tl.cdiv(kv_len, num_splits), BLOCK_N) * BLOCK_N
    split_start = split * split_len
    split_end = tl.minimum(kv_len, split_start + split_len)
    # Where the full tiles end; at least split_start, so that an empty split (split_start >= kv_len: the
    # split count is rounded up) runs no full tile and no tail either.
    full_end = tl.maximum(tl.minimum(split_end, kv_len - kv_len % BLOCK_N), split_start)

    offs_m = tl.arange(0, BLOCK_M)
    token = offs_m // BLOCK_H
    head = head_block * BLOCK_H + offs_m % BLOCK_H
    row_ok = (token < NUM_TOKENS) & (head < num_heads)
    q_row = cur_req * NUM_TOKENS + token
    q_off = q_row[:, None] * stride_qt + head[:, None] * stride_qh
    offs_h = tl.arange(0, DHALF)
    offs_pe = DLAT + tl.arange(0, DPE)
    q0 = tl.load(Q + q_off + offs_h[None, :], mask=row_ok[:, None], other=0.0)
    q1 = tl.load(Q + q_off + DHALF + offs_h[None, :], mask=row_ok[:, None], other=0.0)
    qpe = tl.load(Q + q_off + offs_pe[None, :], mask=row_ok[:, None], other=0.0)
    qk_scale = sm_scale * 1.4426950408889634

    acc0 = tl.zeros([BLOCK_M, DHALF], dtype=tl.float32)
    acc1 = tl.zeros([BLOCK_M, DHALF], dtype=tl.float32)
    row_sum = tl.zeros([BLOCK_M], dtype=tl.float32)
    row_max = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    offs_n = tl.arange(0, BLOCK_N)

    # Full tiles: BLOCK_N contiguous rows of one page, one rectangle each. Their first rows (the TMA
    # coordinates), by INDEX_AHEAD:
    # 0: loaded in the iteration that uses it (the pipeliner then spends a stage on it: fewer KV buffers);
    # 1: the next tile's row loaded one iteration ahead, a loop-carried value (the pipeliner turns it into
    #    a cp.async and waits for it at once in each iteration: one load latency in series per tile);
    # 3: the next tile's row through an opaque ld.global (inline asm, clamped to a valid index): the
    #    pipeliner leaves it alone and the register is waited on only where it is used, one iteration
    #    later (Triton 3.6 on sm_90: NUM_STAGES KV buffers, no cp.async wait). Not for the interpreter.
    #    (Two tiles ahead, a loop-carried chain of distance 2, made Triton 3.6 give up pipelining.)
    row_a = tl.load(kv_indices + kv_start + split_start, mask=split_start < full_end, other=0).to(tl.int32)
    last_full = tl.maximum(full_end - BLOCK_N, split_start)
    for start in tl.range(split_start, full_end, BLOCK_N, num_stages=NUM_STAGES,
                          warp_specialize=WARP_SPECIALIZE):
        if INDEX_AHEAD == 0:
            row = tl.load(kv_indices + kv_start + start).to(tl.int32)
        elif INDEX_AHEAD == 1:
            row = row_a
            row_a = tl.load(kv_indices + kv_start + start + BLOCK_N, mask=start + BLOCK_N < full_end,
                            other=0).to(tl.int32)
        else:
            row = row_a
            ahead = kv_indices + kv_start + tl.minimum(start + BLOCK_N, last_full)
            row_a = tl.inline_asm_elementwise("ld.global.nc.b64 $0, [$1];", "=l,l", [ahead],
                                              dtype=tl.int64, is_pure=True, pack=1).to(tl.int32)
        if USE_TMA:
            k0 = desc_lat.load([row, 0])
            k1 = desc_lat.load([row, DHALF])
            kpe = desc_pe.load([row, DLAT])
        else:
            rows = (row + offs_n).to(tl.int64) * stride_kv
            k0 = tl.load(KV + rows[:, None] + offs_h[None, :])
            k1 = tl.load(KV + rows[:, None] + DHALF + offs_h[None, :])
            kpe = tl.load(KV + rows[:, None] + offs_pe[None, :])
        qk = tl.dot(q0, tl.trans(k0))
        qk = tl.dot(q1, tl.trans(k1), qk)
        qk = tl.dot(qpe, tl.trans(kpe), qk)
        acc0, acc1, row_sum, row_max = _online_step(acc0, acc1, row_sum, row_max, qk * qk_scale, k0, k1)

    # The last, partial tile of the prefix (rows past kv_len are not this request's): masked loads.
    if full_end < split_end:
        row = tl.load(kv_indices + kv_start + full_end).to(tl.int64)
        n_ok = full_end + offs_n < split_end
        rows = (row + offs_n) * stride_kv
        qk, k0, k1 = _masked_tile_scores(KV, rows, n_ok, offs_h, offs_pe, q0, q1, qpe, DHALF)
        qk = tl.where(n_ok[None, :], qk * qk_scale, float("-inf"))
        acc0, acc1, row_sum, row_max = _online_step(acc0, acc1, row_sum, row_max, qk, k0, k1)

    # The draft tokens themselves, once per request (split 0): causal chain or tree mask.
    if split == 0:
        offs_t = tl.arange(0, BLOCK_T)
        t_ok = offs_t < NUM_TOKENS
        ke = (cur_req * NUM_TOKENS + offs_t) * stride_ket
        qk, _, _ = _masked_tile_scores(K_Ext, ke, t_ok, offs_h, offs_pe, q0, q1, qpe, DHALF)
        if USE_CUSTOM_MASK:
            # Row-major [K, kv_len + K] per request; the draft columns follow the prefix.
            mask_start = tl.load(mask_indptr + cur_req)
            allowed = tl.load(
                mask_ptr + mask_start + token[:, None] * (kv_len + NUM_TOKENS) + kv_len + offs_t[None, :],
                mask=row_ok[:, None] & t_ok[None, :], other=0)
            allowed = (allowed != 0) & t_ok[None, :]
        else:
            allowed = (offs_t[None, :] <= token[:, None]) & t_ok[None, :]
        qk = tl.where(allowed, qk * qk_scale, float("-inf"))
        ve = (cur_req * NUM_TOKENS + offs_t) * stride_vet
        v0 = tl.load(V_Ext + ve[:, None] + offs_h[None, :], mask=t_ok[:, None], other=0.0)
        v1 = tl.load(V_Ext + ve[:, None] + DHALF + offs_h[None, :], mask=t_ok[:, None], other=0.0)
        acc0, acc1, row_sum, row_max = _online_step(acc0, acc1, row_sum, row_max, qk, v0, v1)

    has_keys = row_sum > 0.0
    inv = 1.0 / tl.where(has_keys, row_sum, 1.0)
    o_off = q_row[:, None] * stride_ot + head[:, None] * stride_oh + offs_h[None, :]
    if DIRECT_OUT:
        tl.store(Out + o_off, (acc0 * inv[:, None]).to(Out.dtype.element_ty), mask=row_ok[:, None])
        tl.store(Out + o_off + DHALF, (acc1 * inv[:, None]).to(Out.dtype.element_ty), mask=row_ok[:, None])
    else:
        o_off += split * stride_os
        tl.store(Out + o_off, acc0 * inv[:, None], mask=row_ok[:, None])
        tl.store(Out + o_off + DHALF, acc1 * inv[:, None], mask=row_ok[:, None])
        lse = tl.where(has_keys, row_max + tl.log2(tl.where(has_keys, row_sum, 1.0)), float("-inf"))
        tl.store(Lse + q_row * stride_lt + head * stride_lh + split, lse, mask=row_ok)


@triton.jit
def _merge(
    Partial, Lse, O, kv_indptr,
    stride_pt, stride_ph, stride_ps, stride_lt, stride_lh, stride_ot, stride_oh,
    max_splits, min_split_len,
    NUM_TOKENS: tl.constexpr,
    BLOCK_DV: tl.constexpr,
    SPLITS_PAD: tl.constexpr,
    SPLIT_BLOCK: tl.constexpr,
):
    """Patch 0007's merge: every split's lse in one load, then SPLIT_BLOCK partial rows a step."""
    row = tl.program_id(0)
    head = tl.program_id(1)
    cur_req = row // NUM_TOKENS
    kv_len = tl.load(kv_indptr + cur_req + 1) - tl.load(kv_indptr + cur_req)
    num_splits = tl.minimum(tl.maximum(tl.cdiv(kv_len, min_split_len), 1), max_splits)
    lse_row = Lse + row * stride_lt + head * stride_lh
    offs_s = tl.arange(0, SPLITS_PAD)
    top = tl.max(tl.load(lse_row + offs_s, mask=offs_s < num_splits, other=-float("inf")), 0)
    top = tl.where(top == -float("inf"), 0.0, top)
    offs_dv = tl.arange(0, BLOCK_DV)
    offs_b = tl.arange(0, SPLIT_BLOCK)
    acc = tl.zeros([BLOCK_DV], dtype=tl.float32)
    total = tl.zeros([SPLIT_BLOCK], dtype=tl.float32)
    part_row = Partial + row * stride_pt + head * stride_ph
    for first in range(0, num_splits, SPLIT_BLOCK):
        s_ok = first + offs_b < num_splits
        weight = tl.exp2(tl.load(lse_row + first + offs_b, mask=s_ok, other=-float("inf")) - top)
        part = tl.load(part_row + (first + offs_b)[:, None] * stride_ps + offs_dv[None, :],
                       mask=s_ok[:, None], other=0.0)
        acc += tl.sum(weight[:, None] * part, 0)
        total += weight
    tl.store(O + row * stride_ot + head * stride_oh + offs_dv, (acc / tl.sum(total, 0)).to(O.dtype.element_ty))


# ----------------------------------------------------------------------------- host side

# The default: 64 tokens a step, 2 stages, the fastest tile at 9 of 12 points on an H200 (session 23,
# benchmark/results/20261203-1539-h200-attn-verify-tma-p64/), though it spills 80 B on the sm_90 cross-compile.
DEFAULT_TILE = {"block_m": 64, "block_n": 64, "num_warps": 8, "num_stages": 2, "warp_specialize": False,
                "index_ahead": 3}
# Shared memory on sm_90 (Triton 3.6 cross-compile, see README): q (block_m x 576 bf16) + num_stages
# KV tiles (block_n x 576 bf16) must stay under 227 KB.
CANDIDATE_TILES = {
    "n32s4": {"block_n": 32, "num_stages": 4},  # 3 tiles (110 KB) in flight while one is consumed
    "n16s8": {"block_n": 16, "num_stages": 8},  # 7 tiles (129 KB) in flight, more index loads
    "n64s2": {"block_n": 64, "num_stages": 2},  # 1 tile (74 KB) in flight
    "n32s3": {"block_n": 32, "num_stages": 3},
    "n32s4-idx1": {"block_n": 32, "num_stages": 4, "index_ahead": 1},  # index by cp.async, waited at once
    "n32s4-ws": {"block_n": 32, "num_stages": 4, "warp_specialize": True},
}


@functools.lru_cache(maxsize=None)
def _multiprocessor_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def tile_rows(num_tokens: int, num_heads: int, block_m: int) -> tuple[int, int]:
    """(block_h, tokens_pad): heads per program and the padded draft-token axis, block_h * tokens_pad == block_m."""
    tokens_pad = triton.next_power_of_2(num_tokens)
    block_h = max(1, min(triton.next_power_of_2(num_heads), block_m // tokens_pad))
    assert block_h * tokens_pad <= block_m, (num_tokens, block_m)
    return block_h, block_m // block_h


def plan(num_tokens: int, bs: int, num_heads: int, device: torch.device, max_kv_splits: int | None = None,
         min_split_len: int | None = None, **tile) -> dict:
    """Launch settings: DEFAULT_TILE with ``tile`` overrides, block_h, head_blocks, max_kv_splits (about one
    program per SM: a power of two, at most 128) and min_split_len (default 2 * block_n)."""
    unknown = set(tile) - set(DEFAULT_TILE)
    assert not unknown, f"unknown tile settings: {sorted(unknown)}"
    cfg = {**DEFAULT_TILE, **{k: v for k, v in tile.items() if v is not None}}
    assert PAGE % cfg["block_n"] == 0 and cfg["block_n"] >= 16, cfg
    block_h, _ = tile_rows(num_tokens, num_heads, cfg["block_m"])
    head_blocks = triton.cdiv(num_heads, block_h)
    if max_kv_splits is None:
        sms = _multiprocessor_count(device.index or 0) if device.type == "cuda" else 8
        programs = max(sms // (bs * head_blocks), 1)
        max_kv_splits = min(1 << (programs.bit_length() - 1), 128)
    if min_split_len is None:
        min_split_len = 2 * cfg["block_n"]
    return {**cfg, "block_h": block_h, "head_blocks": head_blocks, "max_kv_splits": max_kv_splits,
            "min_split_len": min_split_len}


def kv_rows(kv_buffer: torch.Tensor) -> torch.Tensor:
    """The cache as [rows, 576]: 3-D [slots, 1, 576] or 4-D [pages, 64, 1, 576], rows contiguous per page."""
    assert kv_buffer.shape[-1] == LK and kv_buffer.shape[-2] == 1, kv_buffer.shape
    assert kv_buffer.stride(-1) == 1, kv_buffer.stride()
    flat = kv_buffer.reshape(-1, LK)  # a view for SGLang's buffers (no copy: asserted)
    assert flat.data_ptr() == kv_buffer.data_ptr() and (flat.stride(0) * flat.element_size()) % 16 == 0
    return flat


def make_descriptors(kv2d: torch.Tensor, block_n: int):
    from triton.tools.tensor_descriptor import TensorDescriptor

    shape, strides = list(kv2d.shape), list(kv2d.stride())
    return (TensorDescriptor(kv2d, shape, strides, [block_n, DHALF]),
            TensorDescriptor(kv2d, shape, strides, [block_n, DPE]))


def verify_attention_tma_fwd(
    q: torch.Tensor,
    k_extend: torch.Tensor,
    v_extend: torch.Tensor,
    o: torch.Tensor,
    kv_buffer: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    num_tokens: int,
    sm_scale: float,
    custom_mask: torch.Tensor | None = None,
    mask_indptr: torch.Tensor | None = None,
    max_kv_splits: int | None = None,
    min_split_len: int | None = None,
    use_tma: bool = True,
    page_size: int = PAGE,
    descriptors=None,
    scratch: tuple[torch.Tensor, torch.Tensor] | None = None,
    **tile,
) -> dict:
    """Verify attention for ``num_tokens`` draft tokens per request over 64-token pages; writes ``o``.

    q [bs*K, H, 576]; k_extend [bs*K, 1, 576]; v_extend [bs*K, 1, 512] (may be k_extend[..., :512]);
    o [bs*K, H, 512]; kv_buffer [pages*64, 1, 576] (or [pages, 64, 1, 576]); kv_indptr [bs+1] int32 and
    kv_indices (token slots; each request's prefix is whole 64-token pages, the last one possibly partial,
    every page starting at a slot that is a multiple of 64) cover the prefix only. custom_mask/mask_indptr:
    the tree mask as patch 0007 (None: causal chain). descriptors: ``make_descriptors``' pair, to reuse
    (built here otherwise). scratch: (partial, lse) buffers to reuse. ``tile``: DEFAULT_TILE overrides.
    Returns the plan it ran.
    """
    total_tokens, num_heads, lk = q.shape
    bs = total_tokens // num_tokens
    assert lk == LK and o.shape[-1] == LV and 1 <= num_tokens <= MAX_VERIFY_TOKENS
    assert bs * num_tokens == total_tokens
    assert k_extend.stride(-1) == 1 and v_extend.stride(-1) == 1 and q.stride(-1) == 1 and o.stride(-1) == 1
    p = plan(num_tokens, bs, num_heads, q.device, max_kv_splits, min_split_len, **tile)
    # A tile is BLOCK_N consecutive rows of one page; the cache must be in q's dtype (no fp8 widening here).
    assert page_size % p["block_n"] == 0, (page_size, p["block_n"])
    assert kv_buffer.dtype == q.dtype, (kv_buffer.dtype, q.dtype)
    # INDEX_AHEAD 3 reads the next tile's slot with a 64-bit load: SGLang's kv_indices are int64.
    assert p["index_ahead"] != 3 or kv_indices.dtype == torch.int64, kv_indices.dtype
    kv2d = kv_rows(kv_buffer)
    if descriptors is None:
        descriptors = make_descriptors(kv2d, p["block_n"])
    direct = p["max_kv_splits"] == 1
    if direct:
        partial, lse = o, o
        s_ot, s_oh, s_os, s_lt, s_lh = o.stride(0), o.stride(1), 0, 0, 0
    else:
        if scratch is None:
            scratch = (torch.empty((total_tokens, num_heads, p["max_kv_splits"], LV), dtype=torch.float32,
                                   device=q.device),
                       torch.empty((total_tokens, num_heads, p["max_kv_splits"]), dtype=torch.float32,
                                   device=q.device))
        partial, lse = scratch
        assert partial.shape == (total_tokens, num_heads, p["max_kv_splits"], LV) and partial.stride(-1) == 1
        assert lse.shape == (total_tokens, num_heads, p["max_kv_splits"]) and lse.stride(-1) == 1
        s_ot, s_oh, s_os = partial.stride()[:3]
        s_lt, s_lh = lse.stride(0), lse.stride(1)
    use_mask = custom_mask is not None
    _stage1[(p["head_blocks"], p["max_kv_splits"], bs)](
        q, k_extend, v_extend, kv2d, descriptors[0], descriptors[1],
        kv_indptr, kv_indices,
        custom_mask if use_mask else kv_indptr, mask_indptr if use_mask else kv_indptr,
        partial, lse, sm_scale,
        q.stride(0), q.stride(1), k_extend.stride(0), v_extend.stride(0), kv2d.stride(0),
        s_ot, s_oh, s_os, s_lt, s_lh,
        num_heads, p["max_kv_splits"], p["min_split_len"],
        NUM_TOKENS=num_tokens, BLOCK_H=p["block_h"], BLOCK_M=p["block_m"], BLOCK_N=p["block_n"],
        BLOCK_T=max(16, triton.next_power_of_2(num_tokens)), NUM_STAGES=p["num_stages"],
        WARP_SPECIALIZE=p["warp_specialize"], INDEX_AHEAD=p["index_ahead"], USE_TMA=use_tma, USE_CUSTOM_MASK=use_mask, DIRECT_OUT=direct,
        num_warps=p["num_warps"],
    )
    if not direct:
        splits_pad = triton.next_power_of_2(p["max_kv_splits"])
        _merge[(total_tokens, num_heads)](
            partial, lse, o, kv_indptr,
            partial.stride(0), partial.stride(1), partial.stride(2), lse.stride(0), lse.stride(1),
            o.stride(0), o.stride(1), p["max_kv_splits"], p["min_split_len"],
            NUM_TOKENS=num_tokens, BLOCK_DV=LV, SPLITS_PAD=splits_pad, SPLIT_BLOCK=min(splits_pad, 8),
            num_warps=4,
        )
    return p
