"""The warp-specialized Gluon MLA verify attention prototype (``sgl-kernel/fastpath_kernels/attention_ws``) on CPU.

Gluon kernels cannot run under TRITON_INTERPRET, so on CPU: the kernel cross-compiled for sm_90a with the installed
Triton (Gluon Hopper API: skipped with the reason when it has none) must be warp-specialized (``ttg.warp_specialize``
in the TTGIR, ``setmaxnreg`` up for the consumers and down to the producer's hint in the PTX, 12 warps), load by TMA
(9 ``cp.async.bulk.tensor`` a tile: 8 latent boxes of 64 columns + the rope box), compute by wgmma, fit sm_90's
227 KB and not spill; the same with the GPU hosts' Triton 3.6.0 when its venv is here (``$FASTPATH_TRITON36_PYTHON``,
default /tmp/t36/bin/python; skipped otherwise); the host side without a GPU: the plan (heads a program, splits,
shared memory), the split rule's Python mirror (every prefix token in exactly one full tile or partial tile, full
tiles on BLOCK_N boundaries), the stage-1 output layout 0007's merge reads, and the calls it refuses (False, ``o``
untouched, the reason in the log). Marked ``gpu``: the kernel + 0007's merge against a float64 reference (chain and
tree masks, partial pages, 1 / several / empty splits, eager and in a CUDA graph).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from fastpath_fixtures import installed_gpu_module, replay_in_cuda_graph, script_env
from test_verify_attention_tma import _problem, _reference


REPO = Path(__file__).resolve().parents[1]
T36 = Path(os.environ.get("FASTPATH_TRITON36_PYTHON", "/tmp/t36/bin/python"))


@pytest.fixture(scope="module")
def ws():
    from fastpath_kernels.attention_ws import kernel

    return kernel


def _check_compiled(r: dict, tile: str) -> None:
    assert "error" not in r, r
    assert r["warp_specialize_op"], f"{tile}: no ttg.warp_specialize in the TTGIR: {r}"
    assert 240 in r["setmaxnreg_inc"] and 24 in r["setmaxnreg_dec"], f"{tile}: register reallocation: {r}"
    assert r["total_warps"] == 12 and r["registers"] <= r["maxnreg"] == 168, r
    assert r["tma"] and r["tma_copies"] == 9 and r["wgmma"] and "m64n256k16" in r["wgmma_shapes"], r
    assert r["mbarrier_waits"] >= 2, r  # the producer's empty wait, the consumers' ready wait
    assert r["spill_bytes"] == 0, r
    assert r["shared_planned"] <= r["shared"] <= 232448, r
    # The ring's mbarrier protocol as compiled: 2 x NUM_BUF barriers of one arrival each; the producer's one
    # expect_tx per tile equals the bytes its TMA copies deliver (else the consumers' ready wait hangs, or passes
    # before the tile has landed); the consumers' single release of a slot is one predicated arrival after a
    # barrier over the 8 consumer warps that follows wgmma.wait_group 0 (both warpgroups done reading the slot).
    assert r["mbarrier_init_counts"] == [1] * (2 * r["tile"]["num_buffers"]), r
    assert r["expect_tx_bytes"] == [r["tma_bytes"]] == [r["tile"]["block_n"] * 576 * 2], r
    assert r["release_arrives"] == 1 and r["release_after_barrier"], r


@pytest.mark.parametrize("tile,heads", [("n32b4", 8), ("n32b4", 32), ("n64b2", 8)])
def test_sm90_cross_compile_is_warp_specialized(monkeypatch, tile: str, heads: int):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    from fastpath_kernels.attention_ws import xcompile

    missing = xcompile.gluon_hopper_missing()
    if missing:
        pytest.skip(missing)

    r = xcompile.compile_stage1(90, 4, heads, 16, **xcompile.TILES[tile])
    _check_compiled(r, tile)


@pytest.mark.skipif(not T36.exists(), reason=f"no Triton 3.6.0 venv at {T36} (set FASTPATH_TRITON36_PYTHON)")
def test_sm90_cross_compile_with_the_gpu_hosts_triton_36():
    """Triton 3.6.0, the GPU hosts': both ring shapes, H 8 and 32, the split store, then the direct store with the
    tree mask."""
    def run(*extra: str) -> list[dict]:
        done = subprocess.run([str(T36), "-m", "fastpath_kernels.attention_ws.xcompile", "--tiles", "n32b4,n64b2",
                               *extra], env=script_env(TRITON_INTERPRET="0"), cwd=REPO, capture_output=True,
                              text=True, timeout=300, check=False)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]

    rows = run("--heads", "8,32") + run("--heads", "8", "--max-splits", "1", "--tree")
    assert len(rows) == 6
    for r in rows:
        assert r["triton"] == "3.6.0", r
        _check_compiled(r, r["name"])


def test_split_rule_covers_every_prefix_token_once(ws):
    for block_n in (32, 64):
        for kv_len in (1, 31, 63, 64, 65, 130, 700, 2048, 8192, 32768 + 5):
            for max_splits in (1, 2, 4, 16, 128):
                splits = ws.split_tiles(kv_len, max_splits, 2 * block_n, block_n)
                seen = []
                for s in splits:
                    for t in s["tiles"]:
                        assert t % block_n == 0, (kv_len, s)  # a full tile lies on one 64-token page
                        seen += range(t, t + block_n)
                    if s["partial"]:
                        assert s["split"] == len(splits) - 1 or not any(x["n_full"] for x in splits[s["split"] + 1:])
                        seen += range(*s["partial"])
                assert sorted(seen) == list(range(kv_len)), (block_n, kv_len, max_splits)
                assert [s["draft"] for s in splits] == [True] + [False] * (len(splits) - 1)
                assert len(splits) <= max_splits


def test_plan_at_kimi_shapes(ws):
    cpu = None
    p = ws.verify_mla_ws_plan(4, 8, 8, cpu, num_sms=132)
    assert (p["block_h"], p["head_blocks"], p["max_kv_splits"], p["grid"]) == (8, 1, 16, (1, 16, 8))
    assert p["block_m"] == 64 and p["num_warps"] == 8 and p["min_split_len"] == 2 * p["block_n"] == 128
    assert (p["block_n"], p["num_buffers"]) == (64, 2)  # the tile that ran fastest on an H200 from 8k (session 36)
    p = ws.verify_mla_ws_plan(4, 8, 32, cpu, num_sms=132)
    assert (p["block_h"], p["head_blocks"], p["max_kv_splits"]) == (16, 2, 8)
    p = ws.verify_mla_ws_plan(4, 1, 8, cpu, num_sms=132)
    assert p["max_kv_splits"] == 128
    p = ws.verify_mla_ws_plan(8, 1, 32, cpu, num_sms=132, block_n=32, num_buffers=4)
    assert (p["block_h"], p["head_blocks"], p["min_split_len"]) == (8, 4, 64)
    p = ws.verify_mla_ws_plan(3, 2, 8, cpu, max_kv_splits=1, min_split_len=32)
    assert p["max_kv_splits"] == 1 and p["min_split_len"] == 32 and p["block_h"] == 8


def test_planned_shared_memory(ws):
    from fastpath_kernels.attention_ws.xcompile import TILES

    assert ws.shared_bytes({"block_n": 32, "num_buffers": 4}) == (64 * 576 + 4 * 32 * 576 + 64 * 32) * 2 + 64
    assert ws.shared_bytes({"block_n": 64, "num_buffers": 2}) == (64 * 576 + 2 * 64 * 576 + 64 * 64) * 2 + 32
    for name, tile in TILES.items():
        assert set(tile) <= set(ws.DEFAULT_TILE), name
        assert ws.verify_mla_ws_plan(4, 1, 8, None, 16, **tile)["shared_planned"] <= ws.SHARED_LIMIT, name


@pytest.mark.parametrize("bad", [{"block_n": 128}, {"num_buffers": 1}, {"producer_regs": 20}, {"ring": 3}])
def test_plan_rejects_bad_tiles(ws, bad: dict):
    with pytest.raises(AssertionError):
        ws.verify_mla_ws_plan(4, 1, 8, None, 16, **bad)


def test_stage1_outputs_are_0032s_layout(ws):
    import torch

    partial, lse = ws.stage1_outputs(12, 8, 16, torch.device("cpu"))
    assert partial.shape == (12, 8, 16, 512) and partial.dtype == torch.float32 and partial.is_contiguous()
    assert lse.shape == (12, 8, 16) and lse.dtype == torch.float32 and lse.is_contiguous()


def test_kv_rows_views(ws):
    import torch

    flat = torch.zeros(256, 1, 576, dtype=torch.bfloat16)
    assert ws.kv_rows(flat).shape == (256, 576)
    assert ws.kv_rows(flat.view(4, 64, 1, 576)).data_ptr() == flat.data_ptr()
    assert ws.kv_rows(torch.zeros(256, 1, 512)) is None
    assert ws.kv_rows(torch.zeros(256, 2, 576)) is None


def _inputs(torch, k=4, heads=8, lens=(100, 64), dtype=None):
    dtype = dtype or torch.bfloat16
    n = sum(-(-x // 64) for x in lens) * 64
    kv = torch.randn(n, 1, 576).to(dtype)
    q = torch.randn(len(lens) * k, heads, 576).to(dtype)
    k_ext = torch.randn(len(lens) * k, 1, 576).to(dtype)
    indptr = torch.tensor([0, *lens]).cumsum(0).to(torch.int32)
    slots, page = [], 0
    for x in lens:
        slots.append(torch.arange(x) + page * 64)
        page += -(-x // 64)
    return {"q": q, "k_ext": k_ext, "kv": kv, "kv_indptr": indptr, "kv_indices": torch.cat(slots).long()}


REFUSED = [
    ("logit-cap", "a logit cap", {"logit_cap": 30.0}),
    ("page-32-block-64", "page size 32", {"page_size": 32, "block_n": 64}),
    ("fp32-cache", "torch.float32 cache", {"kv_dtype": "float32"}),
    ("int32-indices", "torch.int32 kv_indices", {"index_dtype": "int32"}),
    ("nine-draft-tokens", "9 draft tokens", {"k": 9}),
    ("draft-v-two-heads", "draft K/V with more than one head", {"v_heads": 2}),
]


@pytest.mark.parametrize("name,reason,change", REFUSED, ids=[r[0] for r in REFUSED])
def test_refuses_calls_it_cannot_serve(ws, caplog, name: str, reason: str, change: dict):
    import torch

    k = change.get("k", 4)
    x = _inputs(torch, k=k)
    o = torch.full((x["q"].shape[0], 8, 512), float("nan"), dtype=torch.bfloat16)
    kv = x["kv"].to(getattr(torch, change.get("kv_dtype", "bfloat16")))
    idx = x["kv_indices"].to(getattr(torch, change.get("index_dtype", "int64")))
    v_ext = x["k_ext"][..., :512].expand(-1, change.get("v_heads", 1), -1)
    tile = {"block_n": change["block_n"]} if "block_n" in change else {}
    ws._fall_back_once.cache_clear()
    with caplog.at_level(logging.WARNING, logger=ws.logger.name):
        ran = ws.verify_mla_ws_fwd(x["q"], x["k_ext"], v_ext, o, kv, x["kv_indptr"], idx, k, 576 ** -0.5,
                                   logit_cap=change.get("logit_cap", 0.0), page_size=change.get("page_size", 64),
                                   max_kv_splits=4, **tile)
    assert ran is False and o.isnan().all(), name
    assert any(reason in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_a_servable_call_passes_the_checks(ws):
    import torch

    x = _inputs(torch)
    o = torch.empty(x["q"].shape[0], 8, 512, dtype=torch.bfloat16)
    plan = ws.verify_mla_ws_plan(4, 2, 8, None, 4)
    assert ws.unsupported(x["q"], x["k_ext"], x["k_ext"][..., :512], o, x["kv"], x["kv_indices"], 4, 64, 0.0,
                          plan) is None


class _Launch:
    """Stands in for a JIT kernel: records ``kernel[grid](*args, **kwargs)``."""

    def __init__(self):
        self.calls = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.calls.append((grid, args, kwargs))


@pytest.mark.parametrize("splits", [4, 1])
def test_host_wrapper_launches_stage1_then_the_merge(ws, monkeypatch, splits: int):
    """verify_mla_ws_fwd on CPU tensors with the kernels replaced by recorders: every kernel argument given once,
    the grid, the host descriptors' boxes, the partial buffers (or ``o`` itself with one split) and 0007's merge
    over them (not launched with one split)."""
    import torch
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    names = ws._verify_mla_ws_stage1.arg_names
    stage1, merge = _Launch(), _Launch()
    monkeypatch.setattr(ws, "_verify_mla_ws_stage1", stage1)
    monkeypatch.setattr(ws, "_merge_kernel", lambda: merge)
    x = _inputs(torch, k=4, heads=8, lens=(100, 64))
    o = torch.empty(8, 8, 512, dtype=torch.bfloat16)
    assert ws.verify_mla_ws_fwd(x["q"], x["k_ext"], x["k_ext"][..., :512], o, x["kv"], x["kv_indptr"],
                                x["kv_indices"], 4, 576 ** -0.5, max_kv_splits=splits) is True
    (grid, args, kwargs), = stage1.calls
    assert grid == (1, splits, 2)
    assert len(args) + len(set(kwargs) - {"num_warps", "maxnreg"}) == len(names)
    assert set(kwargs) - {"num_warps", "maxnreg"} == set(names[len(args):])
    assert kwargs["num_warps"] == 8 and kwargs["maxnreg"] == 168 and kwargs["BLOCK_H"] == 8
    bound = dict(zip(names, args))
    lat, pe = bound["desc_lat"], bound["desc_pe"]
    assert isinstance(lat, TensorDescriptor) and lat.block_shape == [64, 512] and pe.block_shape == [64, 64]
    assert list(lat.shape) == [x["kv"].shape[0], 576] and lat.layout.swizzle_byte_width == 128
    assert kwargs["DIRECT_OUT"] is (splits == 1)
    if splits == 1:
        assert bound["Out"] is o and not merge.calls
        return
    out, lse = bound["Out"], bound["Lse"]
    assert out.shape == (8, 8, splits, 512) and out.dtype == torch.float32 and lse.shape == (8, 8, splits)
    assert (bound["stride_ot"], bound["stride_oh"], bound["stride_os"]) == out.stride()[:3]
    (mgrid, margs, mkwargs), = merge.calls
    assert mgrid == (8, 8) and margs[0] is out and margs[1] is lse and margs[2] is o
    assert mkwargs["NUM_TOKENS"] == 4 and mkwargs["SPLITS_PAD"] == splits


def test_what_the_server_checks_at_start_up(ws, monkeypatch):
    """``verify_mla_ws_unsupported``, read once by the Triton backend under SGLANG_ENABLE_TRITON_WS_VERIFY: the reason
    it logs for not using the kernel (None: it does)."""
    import torch

    cuda = torch.device("cuda", 0)
    assert "page-size 16" in ws.verify_mla_ws_unsupported(16, cuda)
    assert "no CUDA device" in ws.verify_mla_ws_unsupported(64, torch.device("cpu"))
    for capability, ok in (((9, 0), True), ((8, 0), False), ((10, 0), False), ((12, 0), False)):
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device, c=capability: c)
        grouped = types.ModuleType("sglang.kernels.ops.attention.verify_grouped_attention")
        grouped._max_shared_memory = lambda index: 232448
        monkeypatch.setitem(sys.modules, grouped.__name__, grouped)
        assert (ws.verify_mla_ws_unsupported(128, cuda) is None) is ok, capability
    grouped._max_shared_memory = lambda index: 101376  # sm_120's 99 KB
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device: (9, 0))
    assert "shared memory" in ws.verify_mla_ws_unsupported(64, cuda)


def test_bench_variants_are_tiles():
    from fastpath_kernels.attention_ws import bench
    from fastpath_kernels.attention_ws.kernel import DEFAULT_TILE
    from fastpath_kernels.attention_ws.xcompile import TILES

    assert {k for t in TILES.values() for k in t} <= set(DEFAULT_TILE)
    assert all(TILES["n64b2"][k] == DEFAULT_TILE[k] for k in TILES["n64b2"])
    assert callable(bench.main) and callable(bench.ws_calls)


# ------------------------------------------------------------------------------------------------------------ GPU


# name, prefix lengths, K, H, max_kv_splits, min_split_len, tile, tree
GPU_CASES = [
    ("k4-h8-chain-split4", [200, 192], 4, 8, 4, 64, {}, False),
    ("k1-h8-one-page-direct", [64], 1, 8, 1, 64, {}, False),
    ("k8-h16-partial-split2-n64", [130, 70, 5], 8, 16, 2, 128, {"block_n": 64, "num_buffers": 2}, False),
    ("k3-h32-bs3-direct", [100, 257, 64], 3, 32, 1, 64, {}, False),
    ("k5-h8-16-splits-empty", [700], 5, 8, 16, 32, {}, False),
    ("k6-h8-tree-split2", [90, 128], 6, 8, 2, 64, {}, True),
    ("k2-h16-short-prefixes", [1, 63], 2, 16, 2, 64, {}, False),
    ("k4-h32-long-default-splits", [8192, 4096], 4, 32, None, None, {}, False),
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=[c[0] for c in GPU_CASES])
def test_gpu_matches_float64_reference(case):
    """Stage 1 (this kernel) + 0007's merge from the installed fork, bf16, against float64 on the rounded inputs;
    then captured in a CUDA graph (descriptors by value) and replayed."""
    import torch

    installed_gpu_module("sglang.kernels.ops.attention.verify_grouped_attention", "the fork with patch 0007")
    from fastpath_kernels.attention_ws import kernel as ws

    name, lens, k, heads, splits, msl, tile, tree = case
    x = {key: (v.to(torch.bfloat16) if isinstance(v, torch.Tensor) and v.is_floating_point() else v)
         for key, v in _problem(torch, list(lens), k, heads, tree, seed=len(name)).items()}
    ref = _reference(torch, x, lens, k, 576 ** -0.5)
    dev = {key: v.to("cuda") for key, v in x.items() if isinstance(v, torch.Tensor)}
    extra = {"custom_mask": dev["custom_mask"], "mask_indptr": dev["mask_indptr"]} if tree else {}

    def call(o):
        ran = ws.verify_mla_ws_fwd(dev["q"], dev["k_ext"], dev["k_ext"][..., :512], o, dev["kv"], dev["kv_indptr"],
                                   dev["kv_indices"], k, 576 ** -0.5, page_size=64, max_kv_splits=splits,
                                   min_split_len=msl, **extra, **tile)
        assert ran is True, f"{name}: refused"

    def check(o, what):
        out = o.double().cpu()
        assert not out.isnan().any(), f"{name} {what}: NaN in the output (unwritten, or a poisoned row read)"
        rel = float((out - ref).abs().max() / ref.abs().max())
        assert rel < 1e-2, f"{name} {what}: rel. err. {rel}"

    o = torch.full((len(lens) * k, heads, 512), float("nan"), device="cuda", dtype=torch.bfloat16)
    call(o)
    torch.cuda.synchronize()
    check(o, "eager")
    replay_in_cuda_graph(call, o)
    check(o, "graph replay")


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
