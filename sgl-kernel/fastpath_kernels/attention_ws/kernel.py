"""Warp-specialized MLA verify attention, stage 1 (split-KV partials), in Gluon for sm_90 (prototype, issue 18).

The same attention and the same stage-1 contract as patch 0032's ``_verify_mla_tma_stage1``
(``sglang.kernels.ops.attention.verify_mla_tma``): MLA absorbed form, one latent KV head, q rows = K draft
tokens x H heads (row r of a program: draft token r // BLOCK_H of head head_block * BLOCK_H + r % BLOCK_H), keys
576 wide (512 latent + 64 rope), the value the first 512 columns of the same cache row, 64-token pages (a tile of
BLOCK_N prefix tokens starting at a multiple of BLOCK_N is one rectangle of the ``[rows, 576]`` buffer whose first
row is ``kv_indices[kv_start + start]``), the prefix split over programs as 0007/0032 split it (device-side split
count from ``kv_indptr``, splits aligned to BLOCK_N), fp32 partial outputs ``[T, H, max_splits, 512]`` and base-2
LSE ``[T, H, max_splits]`` (0007's ``_verify_grouped_merge`` combines them), or the output itself in q's dtype
when there is one split (DIRECT_OUT), the draft tokens' own K/V in split 0 under the chain mask (draft token i
sees draft tokens 0..i) or the tree mask.

What differs from 0032 is the schedule, written by hand with Gluon's warp specialization (``gl.warp_specialize``):

- **producer** (a worker partition of 1 warp, ``PRODUCER_REGS`` registers after ``setmaxnreg``): for each full
  tile of its split, waits for ring slot ``i % NUM_BUF`` to be empty, reads the tile's first row (one iteration
  ahead: the load for tile i + 1 is issued before the wait for tile i's slot), and issues two TMA copies into the
  slot (latent [BLOCK_N, 512], rope [BLOCK_N, 64]) that complete on the slot's ``ready`` barrier
  (``expect`` = BLOCK_N * 576 * 2 bytes).
- **consumers** (the default partition: 8 warps, two warpgroups; the accumulator's wgmma layout has
  warps_per_cta [4, 2], so warpgroup 0 owns value columns 0-255 and warpgroup 1 columns 256-511, a [64, 256]
  fp32 accumulator = 128 registers a thread each): load q once into shared memory (pointer loads; rows of one
  program are not a rectangle when BLOCK_H < H), then per tile: wait ``ready``, S = q_lat K_lat^T + q_pe K_pe^T
  (wgmma from shared memory; each warpgroup computes half of S's columns), online softmax in base 2 (row max and
  sum across the two warpgroups), P to shared memory (bf16), O = O * alpha + P V (wgmma; V = the latent columns of
  the same slot), wait for the wgmma, a barrier over the 8 consumer warps, then one ``arrive`` on the slot's
  ``empty`` barrier.
- The last partial tile of a prefix (rows past the request's end on that page must not be read: they may hold
  anything, NaN included) and the draft tokens (split 0) are staged by the consumers with masked pointer loads
  into ring slots 0 (keys) and 1 (draft values) once every TMA tile of the split is consumed, then folded in with
  the same tile step under a column mask.

Phases: slot s is used by tiles s, s + NUM_BUF, ...; tile i waits on ``ready[s]`` with parity (i // NUM_BUF) & 1
(consumer) and on ``empty[s]`` with parity ((i // NUM_BUF) & 1) ^ 1 (producer: a fresh mbarrier counts as having
completed the phase before phase 0, so the first NUM_BUF waits pass at once). Both barriers have an arrival count
of 1: ``expect`` is the producer's arrival on ``ready`` (the TMA bytes complete it), the consumers' one
``arrive`` (one thread, after a barrier over the 8 consumer warps) completes ``empty``.

Host side: Gluon host ``TensorDescriptor``s (``triton.experimental.gluon.nvidia.hopper``) over the cache rows,
built once per KV buffer and cached (as 0032 does), passed by value: the launch can be captured in a CUDA graph.
The kernel needs ``maxnreg`` at launch (12 warps: 8 consumers + the producer warp rounded up to a warpgroup; 168 x
384 threads <= 64K registers), which ``verify_mla_ws_stage1`` passes.

Written for Triton 3.6's Gluon (the GPU hosts'); it also compiles with Triton 3.9's. Prototype: never run on a
GPU yet (see README.md).
"""

from __future__ import annotations

import functools
import logging
from collections import OrderedDict
from typing import Optional

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

logger = logging.getLogger(__name__)

# TMA global -> shared: ``tma.async_copy_global_to_shared`` in Triton 3.6, ``tma.async_load`` (same arguments) in 3.9.
_tma_load = tma.async_load if hasattr(tma, "async_load") else tma.async_copy_global_to_shared
# A barrier over the calling partition's warps: ``gl.thread_barrier`` in Triton 3.6, ``gl.barrier`` in 3.9.
_cta_barrier = gl.barrier if hasattr(gl, "barrier") else gl.thread_barrier

LK, LV, DPE = 576, 512, 64
BLOCK_M = 64  # q rows a program: one wgmma M; two warpgroups split the 512 value columns
NUM_WARPS = 8  # the consumer (default) partition
MAX_VERIFY_TOKENS = 8  # 0007's limit (its MAX_VERIFY_TOKENS)
SHARED_LIMIT = 232448  # sm_90's 227 KB of dynamic shared memory a block
# block_n 32, 4 slots: q 73,728 B + 4 x 36,864 B ring + P 4,096 B = 225,280 B; 3 tiles (110 KB) in flight while
# one is consumed. block_n 64, 2 slots: 229,376 B, one 74 KB tile in flight (0032's n64s2 budget).
DEFAULT_TILE = {"block_n": 32, "num_buffers": 4, "producer_regs": 24, "maxnreg": 168}


@gluon.constexpr_function
def _s_layout(block_n):
    # S [64, block_n]: warpgroup w computes columns w * block_n / 2 ...
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 2], instr_shape=[16, block_n // 2, 16])


@gluon.constexpr_function
def _o_layout():
    # O [64, 512]: warpgroup w owns value columns 256 w ... 256 w + 255
    return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 2], instr_shape=[16, 256, 16])


@gluon.constexpr_function
def _wide_layout():
    # pointer loads of [rows, 256] bf16 chunks: 16 B a thread, a warp per 256-column row
    return gl.BlockedLayout([1, 8], [1, 32], [8, 1], [1, 0])


@gluon.constexpr_function
def _pe_layout():
    # pointer loads of [rows, 64] bf16
    return gl.BlockedLayout([1, 8], [4, 8], [8, 1], [1, 0])


@gluon.jit
def _stage_rows(base, row_off, row_ok, lat_dst, pe_dst, ROWS: gl.constexpr, WITH_PE: gl.constexpr):
    """Copy ROWS rows (element offsets ``row_off`` from ``base``; rows not ``row_ok`` as zeros) into shared memory:
    columns 0-511 into ``lat_dst`` [ROWS, 512] and, WITH_PE, columns 512-575 into ``pe_dst`` [ROWS, 64]."""
    wide: gl.constexpr = _wide_layout()
    pe_l: gl.constexpr = _pe_layout()
    cols = gl.arange(0, 256, layout=gl.SliceLayout(0, wide))
    r = gl.convert_layout(row_off, gl.SliceLayout(1, wide))
    ok = gl.convert_layout(row_ok, gl.SliceLayout(1, wide))
    ok2 = ok[:, None] & (cols[None, :] < 256)
    lo = gl.load(base + r[:, None] + cols[None, :], mask=ok2, other=0.0)
    lat_dst.slice(0, 256, dim=1).store(lo)
    hi = gl.load(base + r[:, None] + 256 + cols[None, :], mask=ok2, other=0.0)
    lat_dst.slice(256, 256, dim=1).store(hi)
    if WITH_PE:
        pcols = gl.arange(0, 64, layout=gl.SliceLayout(0, pe_l))
        rp = gl.convert_layout(row_off, gl.SliceLayout(1, pe_l))
        okp = gl.convert_layout(row_ok, gl.SliceLayout(1, pe_l))
        pe = gl.load(base + rp[:, None] + 512 + pcols[None, :], mask=okp[:, None] & (pcols[None, :] < 64), other=0.0)
        pe_dst.store(pe)


@gluon.jit
def _tile_step(q_lat, q_pe, k_lat, k_pe, v, p_smem, acc, m_i, l_i, qk_scale, allowed, HAS_MASK: gl.constexpr,
               BLOCK_N: gl.constexpr):
    """Fold one key tile in: S = q K^T (wgmma from shared memory), base-2 online softmax, O = O alpha + P V.
    Returns with every wgmma of the tile complete (the caller may release the slot after a barrier)."""
    s_layout: gl.constexpr = _s_layout(BLOCK_N)
    o_layout: gl.constexpr = _o_layout()
    s = gl.zeros([64, BLOCK_N], gl.float32, layout=s_layout)
    s = warpgroup_mma(q_lat, k_lat.permute((1, 0)), s, use_acc=False, is_async=True)
    s = warpgroup_mma(q_pe, k_pe.permute((1, 0)), s, is_async=True)
    s = warpgroup_mma_wait(num_outstanding=0, deps=(s, ))
    s = s * qk_scale
    if HAS_MASK:
        s = gl.where(allowed, s, float("-inf"))
    m_new = gl.maximum(m_i, gl.max(s, axis=1))
    m_safe = gl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = gl.exp2(m_i - m_safe)
    p = gl.exp2(s - m_safe[:, None])
    l_i = l_i * alpha + gl.sum(p, axis=1)
    # Both warpgroups' P, stored through the generic proxy, read by wgmma (the async proxy): fence, then a barrier
    # over the consumer warps. The previous tile's PV wgmma of both warpgroups finished before the caller's barrier.
    p_smem.store(p.to(p_smem.dtype))
    fence_async_shared()
    _cta_barrier()
    alpha_o = gl.convert_layout(alpha, gl.SliceLayout(1, o_layout))
    acc = acc * alpha_o[:, None]
    acc = warpgroup_mma(p_smem, v, acc, is_async=True)
    acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
    return acc, m_new, l_i


@gluon.jit
def _producer(desc_lat, desc_pe, kv_indices, idx_base, n_full, lat_bufs, pe_bufs, ready, empty,
              BLOCK_N: gl.constexpr, NUM_BUF: gl.constexpr):
    """1 warp: TMA loads of the split's full tiles into the ring."""
    last = gl.maximum(n_full - 1, 0)
    row = gl.load(kv_indices + idx_base, mask=n_full > 0, other=0).to(gl.int32)
    for i in range(n_full):
        # tile i + 1's first row, loaded before this tile's wait (clamped: the last tile loads its own again)
        row_next = gl.load(kv_indices + idx_base + gl.minimum(i + 1, last) * BLOCK_N).to(gl.int32)
        slot = i % NUM_BUF
        phase = (i // NUM_BUF) & 1
        mbarrier.wait(empty.index(slot), phase ^ 1)
        bar = ready.index(slot)
        mbarrier.expect(bar, BLOCK_N * 576 * 2)
        _tma_load(desc_lat, [row, 0], bar, lat_bufs.index(slot))
        _tma_load(desc_pe, [row, 512], bar, pe_bufs.index(slot))
        row = row_next


@gluon.jit
def _consumer(Q, K_Ext, V_Ext, KV, kv_indices, mask_ptr, mask_indptr, Out, Lse, q_lat, q_pe, lat_bufs, pe_bufs,
              p_smem, ready, empty, qk_scale, stride_qt, stride_qh, stride_ket, stride_vet, stride_kv, stride_ot,
              stride_oh, stride_os, stride_lt, stride_lh, num_heads, head_block, split, cur_req, kv_start, kv_len,
              split_end, full_end, n_full, NUM_TOKENS: gl.constexpr, BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr,
              NUM_BUF: gl.constexpr, USE_CUSTOM_MASK: gl.constexpr, DIRECT_OUT: gl.constexpr):
    """8 warps (two warpgroups): q to shared memory, the ring's tiles, the partial and draft tiles, the store."""
    s_layout: gl.constexpr = _s_layout(BLOCK_N)
    o_layout: gl.constexpr = _o_layout()
    wide: gl.constexpr = _wide_layout()
    s_rows: gl.constexpr = gl.SliceLayout(1, s_layout)
    s_cols: gl.constexpr = gl.SliceLayout(0, s_layout)

    # q: row r = draft token r // BLOCK_H of head head_block * BLOCK_H + r % BLOCK_H (padding rows: zeros).
    offs_m = gl.arange(0, 64, layout=gl.SliceLayout(1, wide))
    token = offs_m // BLOCK_H
    head = head_block * BLOCK_H + offs_m % BLOCK_H
    q_ok = (token < NUM_TOKENS) & (head < num_heads)
    q_off = (cur_req * NUM_TOKENS + token).to(gl.int64) * stride_qt + head.to(gl.int64) * stride_qh
    _stage_rows(Q, q_off, q_ok, q_lat, q_pe, 64, True)
    fence_async_shared()
    _cta_barrier()

    acc = gl.zeros([64, 512], gl.float32, layout=o_layout)
    m_i = gl.full([64], float("-inf"), gl.float32, layout=s_rows)
    l_i = gl.zeros([64], gl.float32, layout=s_rows)

    for i in range(n_full):
        slot = i % NUM_BUF
        mbarrier.wait(ready.index(slot), (i // NUM_BUF) & 1)
        lat = lat_bufs.index(slot)
        acc, m_i, l_i = _tile_step(q_lat, q_pe, lat, pe_bufs.index(slot), lat, p_smem, acc, m_i, l_i, qk_scale, 0,
                                   False, BLOCK_N)
        # both warpgroups' wgmma on the slot are complete: one arrival releases it to the producer
        _cta_barrier()
        mbarrier.arrive(empty.index(slot))

    # Every TMA tile of the split is consumed: slots 0 and 1 are free for the staged tiles.
    offs_n = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, wide))
    cols_s = gl.arange(0, BLOCK_N, layout=s_cols)
    rows_s = gl.arange(0, 64, layout=s_rows)
    token_s = rows_s // BLOCK_H
    if full_end < split_end:
        # The prefix's last, partial tile: masked pointer loads of its rows on the page.
        row0 = gl.load(kv_indices + kv_start + full_end)
        n_ok = full_end + offs_n < split_end
        lat0 = lat_bufs.index(0)
        _stage_rows(KV, (row0 + offs_n.to(gl.int64)) * stride_kv, n_ok, lat0, pe_bufs.index(0), BLOCK_N, True)
        fence_async_shared()
        _cta_barrier()
        allowed = (full_end + cols_s[None, :] < split_end) & (rows_s[:, None] >= 0)
        acc, m_i, l_i = _tile_step(q_lat, q_pe, lat0, pe_bufs.index(0), lat0, p_smem, acc, m_i, l_i, qk_scale,
                                   allowed, True, BLOCK_N)
        _cta_barrier()

    if split == 0:
        # The draft tokens' own K (slot 0) and V (slot 1's latent part), once per request.
        t_ok = offs_n < NUM_TOKENS
        ext_row = (cur_req * NUM_TOKENS + offs_n).to(gl.int64)
        k0 = lat_bufs.index(0)
        v1 = lat_bufs.index(1)
        _stage_rows(K_Ext, ext_row * stride_ket, t_ok, k0, pe_bufs.index(0), BLOCK_N, True)
        _stage_rows(V_Ext, ext_row * stride_vet, t_ok, v1, pe_bufs.index(1), BLOCK_N, False)
        fence_async_shared()
        _cta_barrier()
        t_cols = cols_s[None, :] < NUM_TOKENS
        if USE_CUSTOM_MASK:
            # Row-major [K, kv_len + K] a request; the draft columns last.
            mask_start = gl.load(mask_indptr + cur_req)
            head_s = head_block * BLOCK_H + rows_s % BLOCK_H
            row_ok_s = (token_s < NUM_TOKENS) & (head_s < num_heads)
            m_ok = row_ok_s[:, None] & t_cols
            bits = gl.load(mask_ptr + mask_start + token_s[:, None] * (kv_len + NUM_TOKENS) + kv_len + cols_s[None, :],
                           mask=m_ok, other=0)
            allowed = (bits != 0) & m_ok
        else:
            allowed = (cols_s[None, :] <= token_s[:, None]) & t_cols
        acc, m_i, l_i = _tile_step(q_lat, q_pe, k0, pe_bufs.index(0), v1, p_smem, acc, m_i, l_i, qk_scale, allowed,
                                   True, BLOCK_N)

    # Store: the normalized partial (fp32) and its base-2 LSE, or the output itself (one split).
    o_rows: gl.constexpr = gl.SliceLayout(1, o_layout)
    rows_o = gl.arange(0, 64, layout=o_rows)
    cols_o = gl.arange(0, 512, layout=gl.SliceLayout(0, o_layout))
    token_o = rows_o // BLOCK_H
    head_o = head_block * BLOCK_H + rows_o % BLOCK_H
    ok_o = (token_o < NUM_TOKENS) & (head_o < num_heads)
    q_row_o = cur_req * NUM_TOKENS + token_o
    l_o = gl.convert_layout(l_i, o_rows)
    has_keys = l_o > 0.0
    inv = 1.0 / gl.where(has_keys, l_o, 1.0)
    out = acc * inv[:, None]
    o_off = q_row_o.to(gl.int64) * stride_ot + head_o.to(gl.int64) * stride_oh
    mask2 = ok_o[:, None] & (cols_o[None, :] < 512)
    if DIRECT_OUT:
        gl.store(Out + o_off[:, None] + cols_o[None, :], out.to(Out.dtype.element_ty), mask=mask2)
    else:
        o_off += split * stride_os
        gl.store(Out + o_off[:, None] + cols_o[None, :], out, mask=mask2)
        has_s = l_i > 0.0
        lse = gl.where(has_s, m_i + gl.log2(gl.where(has_s, l_i, 1.0)), float("-inf"))
        head_s = head_block * BLOCK_H + rows_s % BLOCK_H
        ok_s = (token_s < NUM_TOKENS) & (head_s < num_heads)
        q_row_s = cur_req * NUM_TOKENS + token_s
        gl.store(Lse + q_row_s * stride_lt + head_s * stride_lh + split, lse, mask=ok_s)


@gluon.jit
def _verify_mla_ws_stage1(
    Q, K_Ext, V_Ext, KV, desc_lat, desc_pe, kv_indptr, kv_indices, mask_ptr, mask_indptr, Out, Lse, sm_scale,
    stride_qt, stride_qh, stride_ket, stride_vet, stride_kv, stride_ot, stride_oh, stride_os, stride_lt, stride_lh,
    num_heads, max_splits, min_split_len,
    NUM_TOKENS: gl.constexpr, BLOCK_H: gl.constexpr, BLOCK_N: gl.constexpr, NUM_BUF: gl.constexpr,
    PRODUCER_REGS: gl.constexpr, USE_CUSTOM_MASK: gl.constexpr, DIRECT_OUT: gl.constexpr,
):
    gl.static_assert(NUM_BUF >= 2, "the draft tile stages its keys and values in slots 0 and 1")
    gl.static_assert(BLOCK_N >= 16, "the draft tile holds up to 8 (padded to 16) tokens")
    head_block = gl.program_id(0)
    split = gl.program_id(1)
    cur_req = gl.program_id(2)

    kv_start = gl.load(kv_indptr + cur_req)
    kv_len = gl.load(kv_indptr + cur_req + 1) - kv_start
    num_splits = gl.minimum(gl.maximum(gl.cdiv(kv_len, min_split_len), 1), max_splits)
    if split < num_splits:
        split_len = gl.cdiv(gl.cdiv(kv_len, num_splits), BLOCK_N) * BLOCK_N
        split_start = split * split_len
        split_end = gl.minimum(kv_len, split_start + split_len)
        # Where the full tiles end; at least split_start (an empty split runs no tile).
        full_end = gl.maximum(gl.minimum(split_end, kv_len - kv_len % BLOCK_N), split_start)
        n_full = (full_end - split_start) // BLOCK_N

        dtype: gl.constexpr = desc_lat.dtype  # bf16 or fp16: the cache's (= q's) dtype
        lat_layout: gl.constexpr = desc_lat.layout
        pe_layout: gl.constexpr = desc_pe.layout
        q_lat = gl.allocate_shared_memory(dtype, [64, 512], lat_layout)
        q_pe = gl.allocate_shared_memory(dtype, [64, 64], pe_layout)
        lat_bufs = gl.allocate_shared_memory(dtype, [NUM_BUF, BLOCK_N, 512], lat_layout)
        pe_bufs = gl.allocate_shared_memory(dtype, [NUM_BUF, BLOCK_N, 64], pe_layout)
        p_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, BLOCK_N], dtype)
        p_smem = gl.allocate_shared_memory(dtype, [64, BLOCK_N], p_layout)
        ready = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [NUM_BUF, 1], mbarrier.MBarrierLayout())
        for s in gl.static_range(NUM_BUF):
            mbarrier.init(ready.index(s), count=1)
            mbarrier.init(empty.index(s), count=1)
        fence_async_shared()

        qk_scale = sm_scale * 1.4426950408889634
        gl.warp_specialize([
            (_consumer, (Q, K_Ext, V_Ext, KV, kv_indices, mask_ptr, mask_indptr, Out, Lse, q_lat, q_pe, lat_bufs,
                         pe_bufs, p_smem, ready, empty, qk_scale, stride_qt, stride_qh, stride_ket, stride_vet,
                         stride_kv, stride_ot, stride_oh, stride_os, stride_lt, stride_lh, num_heads, head_block,
                         split, cur_req, kv_start, kv_len, split_end, full_end, n_full, NUM_TOKENS, BLOCK_H,
                         BLOCK_N, NUM_BUF, USE_CUSTOM_MASK, DIRECT_OUT)),
            (_producer, (desc_lat, desc_pe, kv_indices, kv_start + split_start, n_full, lat_bufs, pe_bufs, ready,
                         empty, BLOCK_N, NUM_BUF)),
        ], [1], [PRODUCER_REGS])


# --------------------------------------------------------------------------------------------------- host side


def shared_bytes(tile: dict) -> int:
    """Planned dynamic shared memory: q (64 x 576) + the ring (num_buffers x block_n x 576) in bf16, P (64 x
    block_n bf16) and the 2 x num_buffers mbarriers (8 B each); the compiler adds its reduction scratch."""
    bn, nb = tile["block_n"], tile["num_buffers"]
    return (BLOCK_M * LK + nb * bn * LK + BLOCK_M * bn) * 2 + 2 * nb * 8


def verify_mla_ws_plan(num_tokens: int, bs: int, num_heads: int, device, max_kv_splits: Optional[int] = None,
                       min_split_len: Optional[int] = None, num_sms: Optional[int] = None, **tile) -> dict:
    """Launch settings: DEFAULT_TILE with ``tile`` overrides (None: default), block_h (heads a program, the 64 rows
    shared by K tokens padded to a power of two), head_blocks, max_kv_splits (about one program per SM, a power of
    two, at most 128), min_split_len (two tiles), the grid and the planned shared memory. As 0032's
    ``verify_mla_tma_plan``, with block_m fixed at 64 (one wgmma M, two warpgroups)."""
    unknown = set(tile) - set(DEFAULT_TILE)
    assert not unknown, f"unknown tile settings: {sorted(unknown)}"
    plan = {**DEFAULT_TILE, **{k: v for k, v in tile.items() if v is not None}}
    bn, nb = plan["block_n"], plan["num_buffers"]
    assert bn in (16, 32, 64), f"block_n {bn}: 16, 32 or 64 (S's wgmma n is block_n / 2 a warpgroup)"
    assert nb >= 2, f"num_buffers {nb}: the draft tile needs slots 0 and 1"
    assert plan["producer_regs"] % 8 == 0 and 24 <= plan["producer_regs"] <= 256, plan
    assert 1 <= num_tokens <= MAX_VERIFY_TOKENS, num_tokens
    tokens_pad = triton.next_power_of_2(num_tokens)
    block_h = max(1, min(triton.next_power_of_2(num_heads), BLOCK_M // tokens_pad))
    head_blocks = triton.cdiv(num_heads, block_h)
    if max_kv_splits is None:
        if num_sms is None:
            num_sms = (torch.cuda.get_device_properties(device).multi_processor_count
                       if getattr(device, "type", None) == "cuda" else 8)
        programs = max(num_sms // (bs * head_blocks), 1)
        max_kv_splits = min(1 << (programs.bit_length() - 1), 128)
    if min_split_len is None:
        min_split_len = 2 * bn
    return {**plan, "block_m": BLOCK_M, "num_warps": NUM_WARPS, "block_h": block_h, "head_blocks": head_blocks,
            "max_kv_splits": max_kv_splits, "min_split_len": min_split_len, "grid": (head_blocks, max_kv_splits, bs),
            "shared_planned": shared_bytes(plan)}


def split_tiles(kv_len: int, max_splits: int, min_split_len: int, block_n: int) -> list[dict]:
    """The kernel's split rule in Python (a mirror of ``_verify_mla_ws_stage1``'s scalar prologue, for tests and
    reasoning; 0007/0032's rule): per split that runs, its token range, the full tiles the producer loads by TMA
    and the partial tile the consumers stage by pointer loads (None if none)."""
    num_splits = min(max(-(-kv_len // min_split_len), 1), max_splits)
    split_len = -(-(-(-kv_len // num_splits)) // block_n) * block_n
    out = []
    for split in range(num_splits):
        start = split * split_len
        end = min(kv_len, start + split_len)
        full_end = max(min(end, kv_len - kv_len % block_n), start)
        n_full = (full_end - start) // block_n
        out.append({"split": split, "start": start, "end": end, "n_full": n_full,
                    "tiles": [start + i * block_n for i in range(n_full)],
                    "partial": (full_end, end) if full_end < end else None, "draft": split == 0})
    return out


def stage1_outputs(total_tokens: int, num_heads: int, max_kv_splits: int, device) -> tuple:
    """Stage 1's partial outputs as 0032 lays them out: [T, H, max_splits, 512] fp32 and LSE [T, H, max_splits]."""
    partial = torch.empty((total_tokens, num_heads, max_kv_splits, LV), dtype=torch.float32, device=device)
    lse = torch.empty((total_tokens, num_heads, max_kv_splits), dtype=torch.float32, device=device)
    return partial, lse


def kv_rows(kv_buffer: torch.Tensor) -> Optional[torch.Tensor]:
    """The cache as [rows, 576] without a copy ([slots, 1, 576] or paged [pages, page, 1, 576]), or None."""
    if kv_buffer.shape[-1] != LK or kv_buffer.shape[-2] != 1 or kv_buffer.stride(-1) != 1:
        return None
    rows = kv_buffer.reshape(-1, LK)
    if rows.data_ptr() != kv_buffer.data_ptr():
        return None
    if (rows.stride(0) * rows.element_size()) % 16 or rows.data_ptr() % 16:
        return None
    return rows


def tma_layouts(block_n: int, dtype=gl.bfloat16) -> tuple:
    """The NVMMA shared layouts of the latent [block_n, 512] and rope [block_n, 64] boxes (128 B swizzle)."""
    return (gl.NVMMASharedLayout.get_default_for([block_n, LV], dtype),
            gl.NVMMASharedLayout.get_default_for([block_n, DPE], dtype))


_descriptor_cache: "OrderedDict[tuple, tuple]" = OrderedDict()
_DESCRIPTOR_CACHE_SIZE = 256


def descriptors(rows: torch.Tensor, block_n: int) -> tuple:
    """Host TMA descriptors (latent, rope) over the cache rows, cached by (buffer, shape, strides, block_n)."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    shape, strides = list(rows.shape), list(rows.stride())
    key = (rows.data_ptr(), *shape, *strides, rows.dtype, block_n)
    if key in _descriptor_cache:
        _descriptor_cache.move_to_end(key, last=False)
        return _descriptor_cache[key]
    lat_layout, pe_layout = tma_layouts(block_n, gl.float16 if rows.dtype == torch.float16 else gl.bfloat16)
    pair = (TensorDescriptor(rows, shape, strides, [block_n, LV], lat_layout),
            TensorDescriptor(rows, shape, strides, [block_n, DPE], pe_layout))
    _descriptor_cache[key] = pair
    _descriptor_cache.move_to_end(key, last=False)
    while len(_descriptor_cache) > _DESCRIPTOR_CACHE_SIZE:
        _descriptor_cache.popitem()
    return pair


def unsupported(q, k_extend, v_extend, o, kv_buffer, kv_indices, num_tokens: int, page_size: int, logit_cap: float,
                plan: dict) -> Optional[str]:
    """Why the kernel cannot serve this call (None: it can)."""
    if not 1 <= num_tokens <= MAX_VERIFY_TOKENS:
        return f"{num_tokens} draft tokens"
    if q.shape[-1] != LK or o.shape[-1] != LV:
        return f"head dims {q.shape[-1]}/{o.shape[-1]} are not MLA's 576/512"
    if k_extend.shape[-2] != 1 or v_extend.shape[-2] != 1:
        return "draft K/V with more than one head"
    if logit_cap > 0:
        return "a logit cap"
    if page_size % plan["block_n"]:
        return f"page size {page_size}"
    if q.dtype not in (torch.bfloat16, torch.float16) or kv_buffer.dtype != q.dtype:
        return f"a {kv_buffer.dtype} cache under {q.dtype} queries"
    if kv_indices.dtype != torch.int64:
        return f"{kv_indices.dtype} kv_indices"
    if any(t.stride(-1) != 1 for t in (q, k_extend, v_extend, o)):
        return "a strided head dim"
    if kv_rows(kv_buffer) is None:
        return f"a KV buffer of shape {tuple(kv_buffer.shape)}"
    return None


def verify_mla_ws_stage1(q, k_extend, v_extend, kv_buffer, kv_indptr, kv_indices, num_tokens: int, sm_scale: float,
                         plan: dict, partial, lse, custom_mask=None, mask_indptr=None) -> None:
    """Launch stage 1: writes ``partial`` [T, H, max_splits, 512] fp32 and ``lse`` [T, H, max_splits] (base 2) as
    0032's stage 1 does (rows of splits a request does not use are not written), or, when ``plan['max_kv_splits']``
    is 1, the attention output itself into ``partial`` ([T, H, 512] in q's dtype; ``lse`` is then ignored).
    ``plan``: ``verify_mla_ws_plan``'s. No checks here: ``verify_mla_ws_fwd`` refuses the calls it cannot serve."""
    rows = kv_rows(kv_buffer)
    desc_lat, desc_pe = descriptors(rows, plan["block_n"])
    direct = plan["max_kv_splits"] == 1
    if direct:
        stride_ot, stride_oh, stride_os, stride_lt, stride_lh = partial.stride(0), partial.stride(1), 0, 0, 0
    else:
        stride_ot, stride_oh, stride_os = partial.stride()[:3]
        stride_lt, stride_lh = lse.stride(0), lse.stride(1)
    use_mask = custom_mask is not None
    _verify_mla_ws_stage1[plan["grid"]](
        q, k_extend, v_extend, rows, desc_lat, desc_pe, kv_indptr, kv_indices,
        custom_mask if use_mask else kv_indptr, mask_indptr if use_mask else kv_indptr, partial, lse, sm_scale,
        q.stride(0), q.stride(1), k_extend.stride(0), v_extend.stride(0), rows.stride(0), stride_ot, stride_oh,
        stride_os, stride_lt, stride_lh, q.shape[1], plan["max_kv_splits"], plan["min_split_len"],
        NUM_TOKENS=num_tokens, BLOCK_H=plan["block_h"], BLOCK_N=plan["block_n"], NUM_BUF=plan["num_buffers"],
        PRODUCER_REGS=plan["producer_regs"], USE_CUSTOM_MASK=use_mask, DIRECT_OUT=direct,
        num_warps=NUM_WARPS, maxnreg=plan["maxnreg"])


@functools.lru_cache(maxsize=None)
def _fall_back_once(reason: str) -> None:
    logger.warning("warp-specialized MLA verify attention not used for a call (%s)", reason)


def _merge_kernel():
    """Patch 0007's ``_verify_grouped_merge`` from the installed fork."""
    from sglang.kernels.ops.attention.verify_grouped_attention import _verify_grouped_merge

    return _verify_grouped_merge


def verify_mla_ws_fwd(q, k_extend, v_extend, o, kv_buffer, kv_indptr, kv_indices, num_tokens: int, sm_scale: float,
                      custom_mask=None, mask_indptr=None, logit_cap: float = 0.0, page_size: int = 64,
                      max_kv_splits: Optional[int] = None, min_split_len: Optional[int] = None, **tile) -> bool:
    """The whole attention (0032's ``verify_mla_tma_fwd`` contract): stage 1 here, then patch 0007's merge; writes
    ``o`` [bs * K, H, 512] and returns True, or returns False without running (said once in the log)."""
    total_tokens, num_heads, _ = q.shape
    bs = total_tokens // max(num_tokens, 1)
    plan = verify_mla_ws_plan(max(1, min(num_tokens, MAX_VERIFY_TOKENS)), max(bs, 1), num_heads, q.device,
                              max_kv_splits, min_split_len, **tile)
    reason = unsupported(q, k_extend, v_extend, o, kv_buffer, kv_indices, num_tokens, page_size, logit_cap, plan)
    if reason is not None:
        _fall_back_once(reason)
        return False
    assert bs * num_tokens == total_tokens, (total_tokens, num_tokens)
    if plan["max_kv_splits"] == 1:
        verify_mla_ws_stage1(q, k_extend, v_extend, kv_buffer, kv_indptr, kv_indices, num_tokens, sm_scale, plan, o,
                             o, custom_mask, mask_indptr)
        return True
    partial, lse = stage1_outputs(total_tokens, num_heads, plan["max_kv_splits"], q.device)
    verify_mla_ws_stage1(q, k_extend, v_extend, kv_buffer, kv_indptr, kv_indices, num_tokens, sm_scale, plan,
                         partial, lse, custom_mask, mask_indptr)
    splits_pad = triton.next_power_of_2(plan["max_kv_splits"])
    _merge_kernel()[(total_tokens, num_heads)](
        partial, lse, o, kv_indptr, partial.stride(0), partial.stride(1), partial.stride(2), lse.stride(0),
        lse.stride(1), o.stride(0), o.stride(1), plan["max_kv_splits"], plan["min_split_len"],
        NUM_TOKENS=num_tokens, BLOCK_DV=LV, Lv=LV, SPLITS_PAD=splits_pad, SPLIT_BLOCK=min(splits_pad, 8),
        num_warps=4)
    return True
