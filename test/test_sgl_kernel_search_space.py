"""sgl-kernel/moe_tuning/search_space.py: each filter, the shared-memory estimate, and the candidates
for Kimi-K2.5's INT4 GEMMs at TP=8 on the H200 and on sm_120.
"""

from __future__ import annotations


import pytest

from moe_tuning import search_space as ss
from moe_tuning.shapes import Device, Gemm, device, rank_shapes
from sglang_fastpath.errors import FastpathError

TP8 = rank_shapes(8)
H200 = device("h200")
SM120 = device("rtx-pro-6000-server")
SPACE = ss.SearchSpace()


def cfg(bm=16, bn=64, bk=64, gm=1, warps=4, stages=3) -> ss.KernelConfig:
    return ss.KernelConfig(bm, bn, bk, gm, warps, stages)


def test_kwargs_use_sglangs_key_names_and_round_trip():
    c = cfg(32, 128, 256, 1, 8, 5)
    assert c.kwargs() == {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 128, "BLOCK_SIZE_K": 256, "GROUP_SIZE_M": 1,
                          "num_warps": 8, "num_stages": 5}
    assert ss.KernelConfig.from_kwargs(c.kwargs()) == c


def test_default_space_is_the_wgmma_free_one():
    assert SPACE.block_m == (16, 32) and SPACE.group_m == (1,)
    assert len(SPACE.all_configs()) == 2 * 4 * 5 * 1 * 3 * 4


@pytest.mark.parametrize("bad, what", [
    (cfg(bm=64), "BLOCK_SIZE_M=64 is outside"),
    (cfg(bm=128), "BLOCK_SIZE_M=128 is outside"),
    (cfg(bn=24), "BLOCK_SIZE_N=24 is not a power of two"),
    (cfg(bk=8), "BLOCK_SIZE_K=8 is not a power of two >= 16"),
    (cfg(bm=8), "BLOCK_SIZE_M=8"),
    (cfg(warps=0), "num_warps"),
])
def test_tile_rule_refuses(bad: ss.KernelConfig, what: str):
    reason = ss.tile_rule(bad, SPACE)
    assert reason is not None and what in reason


def test_tile_rule_keeps_both_wgmma_free_block_m():
    assert ss.tile_rule(cfg(bm=16), SPACE) is None and ss.tile_rule(cfg(bm=32), SPACE) is None


def test_group_32_keeps_block_k_above_and_below_the_group():
    """The kernel gathers one scale per element, so BK need not divide (or be divided by) the group."""
    gemm = TP8.gate_up
    assert gemm.group_size == 32
    for bk in (16, 32, 64, 128, 256):
        assert ss.k_rule(cfg(bk=bk), gemm) is None
    for gemm in (TP8.gate_up, TP8.down):
        kept = {c.block_k for c in ss.candidates(gemm, SM120, m=8)}
        assert kept == {16, 32, 64, 128, 256}


def test_upstream_block_k_axis_is_not_emptied_by_the_group():
    """Upstream's tuner axis BK {64,128,256} with its ``group % BK == 0`` rule leaves nothing for group 32
    (moe-triton.md §3 bug 2); ours must keep the whole axis."""
    upstream_axis = ss.SearchSpace(block_k=(64, 128, 256))
    upstream_rule_survivors = [bk for bk in upstream_axis.block_k if TP8.gate_up.group_size % bk == 0]
    assert upstream_rule_survivors == []  # the bug, as documented
    ours = ss.candidates(TP8.gate_up, SM120, m=8, space=upstream_axis)
    assert {c.block_k for c in ours} == {64, 128, 256}


def test_k_rule_refuses_a_block_k_that_leaves_a_k_tail():
    odd = Gemm("odd", n=64, k=96, group_size=32)
    assert ss.k_rule(cfg(bk=32), odd) is None
    reason = ss.k_rule(cfg(bk=64), odd)
    assert reason is not None and "does not divide K=96" in reason
    # Down at TP=8 has K=256: BK 256 fits exactly, BK 512 would not.
    assert ss.k_rule(cfg(bk=256), TP8.down) is None
    assert ss.k_rule(cfg(bk=512), TP8.down) is not None


def test_smem_estimate_formula():
    assert ss.smem_estimate(cfg(bm=16, bn=64, bk=64, stages=3)) == 2 * 16 * 64 * 2 + 64 * 64 * 2
    assert ss.smem_estimate(cfg(bm=32, bn=128, bk=256, stages=5)) == 4 * 32 * 256 * 2 + 256 * 128 * 2
    assert ss.smem_estimate(cfg(bm=16, bn=16, bk=16, stages=1)) == 16 * 16 * 2 + 16 * 16 * 2


def test_smem_rule_separates_sm120_from_h200():
    big = cfg(bm=32, bn=128, bk=256, stages=4)  # 3·16384 + 65536 B
    assert ss.smem_rule(big, H200) is None
    reason = ss.smem_rule(big, SM120)
    assert reason is not None and "114688" in reason and "101376" in reason


def test_smem_rule_boundary_is_inclusive():
    c = cfg(bm=32, bn=64, bk=128, stages=4)
    exact = Device("exact", "Exact GPU", "sm_120", ss.smem_estimate(c))
    short = Device("short", "Short GPU", "sm_120", ss.smem_estimate(c) - 1)
    assert ss.smem_rule(c, exact) is None
    assert ss.smem_rule(c, short) is not None


def test_every_sm120_candidate_fits_and_h200_keeps_more():
    for gemm in (TP8.gate_up, TP8.down):
        sm120 = ss.candidates(gemm, SM120, m=64)
        h200 = ss.candidates(gemm, H200, m=64)
        assert all(ss.smem_estimate(c) <= 101376 for c in sm120)
        assert set(sm120) < set(h200)
        assert all(c.block_m in (16, 32) for c in h200)


def test_m_rule_drops_block_m_32_while_16_holds_every_expert():
    assert {c.block_m for c in ss.candidates(TP8.gate_up, SM120, m=1)} == {16}
    assert {c.block_m for c in ss.candidates(TP8.gate_up, SM120, m=16)} == {16}
    assert {c.block_m for c in ss.candidates(TP8.gate_up, SM120, m=17)} == {16, 32}
    assert ss.m_rule(cfg(bm=32), 4, SPACE) is not None and ss.m_rule(cfg(bm=16), 4, SPACE) is None


def test_rejections_lists_every_reason():
    reasons = ss.rejections(cfg(bm=64, bk=512, bn=128, stages=5), TP8.down, SM120)
    assert len(reasons) == 3  # tile, k, smem


def test_candidates_refuse_m_below_one_and_an_empty_result():
    with pytest.raises(FastpathError, match="M=0"):
        ss.candidates(TP8.gate_up, SM120, m=0)
    with pytest.raises(FastpathError, match="no config of the search space passes"):
        ss.candidates(TP8.down, SM120, m=1, space=ss.SearchSpace(block_k=(512,)))
