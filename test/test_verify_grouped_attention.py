"""Patch 0007's verify kernel (``verify_grouped_attention_fwd``) under ``TRITON_INTERPRET=1`` on CPU.

Each case builds a paged KV cache, K draft tokens per request and a prefix of 1..300 tokens, runs
the kernel from the patched tree and compares it with a float64 torch reference and with SGLang
0.5.17's own ``extend_attention_fwd`` (what target verify runs today) on the same inputs. MLA
(576/512, one latent KV head, value = the key's first 512 columns) and GQA (head dim 128), page
sizes 1 and 16, K 1..8, a tree mask, a logit cap, forced split counts (merge path) and one split
(direct store). The output is poisoned with NaN first, with spare rows around it: every row must
be written and nothing outside. fp16 only: the interpreter's bf16 ``tl.dot`` multiplies raw bits.
Kernels run in a child process because Triton picks interpreted vs compiled at first import.

The patched ``TritonAttnBackend.forward_extend`` is run on a fake backend to check which kernel it
calls (grouped, extend, and patch 0032's TMA kernel for MLA target verify on 64-token pages, with
its fallback to the grouped kernel when it refuses a call); ``test_verify_attention_tma.py`` checks
the TMA kernel itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import types
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest
import torch

from benchmark.tools.attn_verify_bench import KERNEL_FILE, file_from_series
from fastpath_fixtures import script_env
from fastpath_kernels.ptxas import ptxas_usage
from sglang_fastpath.paths import patches_dir
from sglang_trees import TreeImporter, load_defs, source, trees  # noqa: F401 (trees: a module-scoped fixture)

VERIFY = "sglang.kernels.ops.attention.verify_grouped_attention"
EXTEND = "sglang.kernels.ops.attention.extend_attention"
DECODE = "sglang.kernels.ops.attention.decode_attention"
SCORE_MOD = "sglang.kernels.ops.attention.score_mod"
TMA = "sglang.kernels.ops.attention.verify_mla_tma"  # patch 0032
MAX_VERIFY_TOKENS = 8  # the module constant the kernel's wrapper checks against
SPARE_ROWS = 2  # poisoned rows before and after the output the kernel may write


@dataclass(frozen=True)
class Case:
    name: str
    mla: bool
    k: int  # draft tokens per request
    prefix: tuple[int, ...]  # cached tokens per request
    heads: int
    kv_heads: int
    page: int
    tree: bool = False
    logit_cap: float = 0.0
    max_splits: int | None = None
    min_split_len: int | None = None
    seed: int = 0
    tile: tuple[tuple[str, int], ...] = ()  # verify_grouped_attention_fwd's tuning keywords


CASES = [
    Case("mla-k4-p1", True, 4, (37, 130), 8, 1, 1, max_splits=4, min_split_len=32),
    Case("mla-k1-p16", True, 1, (300,), 16, 1, 16, max_splits=8, min_split_len=64, seed=1),
    Case("mla-k8-p16-direct", True, 8, (1, 77), 4, 1, 16, max_splits=1, seed=2),
    Case("mla-k3-default-splits", True, 3, (200, 5, 64), 8, 1, 1, seed=3),
    Case("gqa-k2-p1", False, 2, (150, 1), 8, 2, 1, max_splits=4, min_split_len=32, seed=4),
    Case("gqa-k5-p16", False, 5, (290, 33), 8, 2, 16, max_splits=2, min_split_len=64, seed=5),
    Case("gqa-k8-p1-mha", False, 8, (95,), 4, 4, 1, max_splits=4, min_split_len=16, seed=6),
    Case("gqa-k4-tree", False, 4, (60, 140), 8, 2, 16, tree=True, max_splits=4, min_split_len=32, seed=7),
    Case("mla-k6-tree-cap", True, 6, (120,), 8, 1, 1, tree=True, logit_cap=30.0, max_splits=2,
         min_split_len=32, seed=8),
    Case("gqa-k7-groups", False, 7, (17, 250), 16, 2, 1, max_splits=8, min_split_len=32, seed=9),
]
# The tuning settings the GPU sweep runs (benchmark/tools/attn_verify_bench.py's SWEEP_TILES): each
# (block_h, block_n, dv_splits) at least once, with the other paths mixed in. Checked against the float64
# reference only (num_warps and num_stages do not change what the interpreter computes).
TILE_CASES = [
    Case("mla-bn16", True, 4, (37, 130), 8, 1, 1, max_splits=4, min_split_len=32, seed=10, tile=(("block_n", 16),)),
    Case("mla-bn64-p16", True, 3, (150, 9), 8, 1, 16, max_splits=2, min_split_len=64, seed=11,
         tile=(("block_n", 64),)),
    Case("mla-dv2-empty-splits", True, 4, (64, 65), 8, 1, 1, max_splits=8, min_split_len=16, seed=12,
         tile=(("dv_splits", 2),)),
    Case("mla-dv2-bn16-tree-13-splits", True, 6, (200,), 16, 1, 16, tree=True, max_splits=32, min_split_len=16,
         seed=13, tile=(("dv_splits", 2), ("block_n", 16))),
    Case("mla-dv2-bn64-cap", True, 2, (130, 1), 8, 1, 1, logit_cap=30.0, max_splits=2, min_split_len=64, seed=14,
         tile=(("dv_splits", 2), ("block_n", 64))),
    Case("mla-dv4-bn16-direct", True, 5, (1, 77), 4, 1, 16, max_splits=1, seed=15,
         tile=(("dv_splits", 4), ("block_n", 16))),
    Case("mla-dv4-default-splits", True, 4, (100, 33, 2), 8, 1, 1, seed=16, tile=(("dv_splits", 4),)),
    Case("mla-dv4-bn64-k8", True, 8, (140,), 8, 1, 16, max_splits=4, min_split_len=32, seed=17,
         tile=(("dv_splits", 4), ("block_n", 64))),
    Case("mla-rows128-dv2", True, 4, (70,), 32, 1, 1, max_splits=2, min_split_len=32, seed=18,
         tile=(("block_h", 32), ("dv_splits", 2))),
    Case("mla-rows128-dv4-bn16-24-heads-tree", True, 4, (45, 3), 24, 1, 16, tree=True, max_splits=4,
         min_split_len=16, seed=19, tile=(("block_h", 32), ("dv_splits", 4), ("block_n", 16))),
    Case("mla-rows32", True, 4, (120,), 8, 1, 1, max_splits=4, min_split_len=32, seed=20, tile=(("block_h", 8),)),
    Case("mla-rows32-dv2-12-heads-tree", True, 3, (60, 20), 12, 1, 1, tree=True, max_splits=4, min_split_len=16,
         seed=21, tile=(("block_h", 8), ("dv_splits", 2))),
    Case("gqa-dv2-p16", False, 3, (120, 40), 8, 2, 16, max_splits=4, min_split_len=32, seed=22,
         tile=(("dv_splits", 2),)),
]


def tree_mask(k: int, g: torch.Generator) -> torch.Tensor:
    """A random draft tree over k tokens: each token sees itself and its ancestors."""
    parent = [-1] + [int(torch.randint(0, i, (1,), generator=g)) for i in range(1, k)]
    mask = torch.zeros(k, k, dtype=torch.bool)
    for i in range(k):
        j = i
        while j >= 0:
            mask[i, j] = True
            j = parent[j]
    return mask


def make_inputs(case: Case) -> dict:
    """Cache, slots, draft KV and queries, laid out as SGLang's triton backend passes them."""
    g = torch.Generator().manual_seed(case.seed)
    lk, lv = (576, 512) if case.mla else (128, 128)
    bs, k = len(case.prefix), case.k
    pages_per_req = [-(-p // case.page) for p in case.prefix]
    num_pages = sum(pages_per_req) + 3
    order = torch.randperm(num_pages, generator=g).tolist()  # pages scattered over the pool
    slots, indptr = [], [0]
    for b, plen in enumerate(case.prefix):
        pages = [order.pop() for _ in range(pages_per_req[b])]
        slots += [pages[p // case.page] * case.page + p % case.page for p in range(plen)]
        indptr.append(len(slots))
    pool = num_pages * case.page
    key = (torch.randn(pool, case.kv_heads, lk, generator=g) / 2).half()
    draft_k = (torch.randn(bs * k, case.kv_heads, lk, generator=g) / 2).half()
    if case.mla:
        value, draft_v = key[..., :lv], draft_k[..., :lv].contiguous()
    else:
        value = (torch.randn(pool, case.kv_heads, lv, generator=g) / 2).half()
        draft_v = (torch.randn(bs * k, case.kv_heads, lv, generator=g) / 2).half()
    q = (torch.randn(bs * k, case.heads, lk, generator=g) / 2).half()
    masks = [tree_mask(k, g) if case.tree else torch.ones(k, k).tril().bool() for _ in range(bs)]
    full = [torch.cat([torch.ones(k, p, dtype=torch.bool), m], 1).flatten() for p, m in zip(case.prefix, masks)]
    mask_indptr = torch.tensor([0] + [int(x.numel()) for x in full]).cumsum(0)
    return {
        "q": q, "draft_k": draft_k, "draft_v": draft_v, "key": key, "value": value,
        "kv_indptr": torch.tensor(indptr, dtype=torch.int32), "kv_indices": torch.tensor(slots, dtype=torch.int64),
        "qo_indptr": torch.arange(0, (bs + 1) * k, k, dtype=torch.int32),
        "custom_mask": torch.cat(full), "mask_indptr": mask_indptr, "draft_masks": masks,
        "sm_scale": lk ** -0.5, "lv": lv,
    }


def reference(case: Case, x: dict) -> torch.Tensor:
    """float64: softmax over (prefix keys, masked draft keys) per request, head and draft token."""
    k, group = case.k, case.heads // case.kv_heads
    out = torch.zeros(x["q"].shape[0], case.heads, x["lv"], dtype=torch.float64)
    for b in range(len(case.prefix)):
        slots = x["kv_indices"][x["kv_indptr"][b]:x["kv_indptr"][b + 1]]
        rows = slice(b * k, (b + 1) * k)
        keys = torch.cat([x["key"][slots], x["draft_k"][rows]]).double()  # [P+K, Hkv, lk]
        values = torch.cat([x["value"][slots], x["draft_v"][rows]]).double()
        seen = torch.cat([torch.ones(k, len(slots), dtype=torch.bool), x["draft_masks"][b]], 1)
        for h in range(case.heads):
            scores = x["q"][rows, h].double() @ keys[:, h // group].T * x["sm_scale"]
            if case.logit_cap > 0:
                scores = case.logit_cap * torch.tanh(scores / case.logit_cap)
            probs = scores.masked_fill(~seen, float("-inf")).softmax(-1)
            out[rows, h] = probs @ values[:, h // group]
    return out


def paged(buf: torch.Tensor, page: int) -> torch.Tensor:
    """The 4-D [pages, page, heads, dim] view SGLang's paged pools hand the kernels at page > 1."""
    return buf if page == 1 else buf.view(-1, page, *buf.shape[1:])


def poisoned_output(x: dict, heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    rows = x["q"].shape[0]
    spare = torch.full((rows + 2 * SPARE_ROWS, heads, x["lv"]), float("nan"), dtype=torch.float16)
    return spare, spare[SPARE_ROWS:SPARE_ROWS + rows]


def run_verify(fwd, case: Case, x: dict) -> dict:
    spare, o = poisoned_output(x, case.heads)
    fwd(x["q"], x["draft_k"], x["draft_v"], o, paged(x["key"], case.page), paged(x["value"], case.page),
        x["kv_indptr"], x["kv_indices"], case.k, x["sm_scale"],
        custom_mask=x["custom_mask"] if case.tree else None, mask_indptr=x["mask_indptr"] if case.tree else None,
        logit_cap=case.logit_cap, page_size=case.page, max_kv_splits=case.max_splits,
        min_split_len=case.min_split_len, **dict(case.tile))
    return {"out": o.double(), "spare_untouched": bool(torch.isnan(spare[:SPARE_ROWS]).all()
                                                      and torch.isnan(spare[-SPARE_ROWS:]).all())}


def run_extend(fwd, case: Case, x: dict) -> torch.Tensor:
    _, o = poisoned_output(x, case.heads)
    fwd(x["q"], x["draft_k"], x["draft_v"], o, paged(x["key"], case.page), paged(x["value"], case.page),
        x["qo_indptr"], x["kv_indptr"], x["kv_indices"], x["custom_mask"] if case.tree else None, True,
        x["mask_indptr"] if case.tree else None, case.k, 1.0, 1.0, x["sm_scale"], logit_cap=case.logit_cap,
        page_size=case.page)
    return o.double()


def max_rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max())


def load_kernels(tree: Path) -> tuple:
    strides = load_defs(source(tree, DECODE), ["_extract_kv_strides"])["_extract_kv_strides"]
    verify = load_defs(source(tree, VERIFY), ["_scaled_scores", "_accumulate", "_key_tile_scores",
                                              "_verify_grouped_stage1", "_verify_grouped_merge",
                                              "_multiprocessor_count", "_programs_target", "verify_grouped_tile",
                                              "verify_grouped_plan", "verify_grouped_attention_fwd"],
                       {"_extract_kv_strides": strides, "MAX_VERIFY_TOKENS": MAX_VERIFY_TOKENS})
    unpack = load_defs(source(tree, SCORE_MOD), ["unpack_aux_tensors"])["unpack_aux_tensors"]
    extend = load_defs(source(tree, EXTEND), ["tanh", "_fwd_kernel", "_get_block_sizes_for_extend_attention",
                                              "extend_attention_fwd"],
                       {"_extract_kv_strides": strides, "unpack_aux_tensors": unpack, "_is_cuda": False,
                        "_is_hip": False, "_is_gfx95": False})
    assert type(verify["_verify_grouped_stage1"]).__name__ == "InterpretedFunction"
    return verify["verify_grouped_attention_fwd"], extend["extend_attention_fwd"]


BACKEND = "sglang.srt.layers.attention.triton_backend"


class _NoSWAPool:
    """Stands in for SWAKVPool: the fake pool below is not one."""


class FakePool:
    """The KV pool calls forward_extend makes: buffers by layer, set_kv_buffer at out_cache_loc."""

    def __init__(self, key: torch.Tensor, value: torch.Tensor, mla: bool):
        self.key, self.value, self.mla = key, value, mla

    def get_key_buffer(self, layer_id: int) -> torch.Tensor:
        return self.key

    def get_value_buffer(self, layer_id: int) -> torch.Tensor:
        return self.value

    def set_kv_buffer(self, layer, loc, k, v, *scales, **kwargs) -> None:
        self.key[loc] = k  # MLA: the latent+rope row; v is its first 512 columns
        if not self.mla:
            self.value[loc] = v


def run_backend(tree: Path, fwd: dict, case: Case, x: dict, grouped: bool, mode: str = "verify",
                tma: bool = False, ws: bool = False, **layer_overrides) -> dict:
    """TritonAttnBackend.forward_extend (patched) on a target-verify batch, or with ``mode`` "draft_extend"
    a DRAFT_EXTEND_V2 batch (patch 0023; ``grouped`` is then its switch, and the verify one is off); which
    kernel ran, and o. ``tma``: patch 0032's switch (``use_verify_mla_tma``); every call of its kernel is
    recorded as "tma" in ``calls`` and what it returned (True: it ran, False: refused) in ``tma_returned``.
    ``ws``: patch 0044's switch (``verify_mla_ws_fwd`` set): the warp-specialized kernel cannot run under the
    interpreter, so a stand-in with its contract takes its place (it refuses a logit cap, as the kernel does, and
    otherwise computes with 0032's kernel), recorded as "ws" in ``calls`` and in ``ws_returned``.
    The backend's page size is the case's (the fake pool is 3-D, as SGLang's MLA pool is at any page size)."""
    draft_extend = mode == "draft_extend"
    defs = load_defs(source(tree, BACKEND), ["logit_capping_mod", "TritonAttnBackend.forward_extend",
                                              "TritonAttnBackend._set_kv_buffer"],
                     {"KVWriteLoc": lambda loc, swa_loc, full_loc=None: loc, "SWAKVPool": _NoSWAPool,
                      "AttentionType": types.SimpleNamespace(ENCODER_ONLY="encoder_only",
                                                             DECODER_BIDIRECTIONAL="decoder_bidirectional"),
                      "MAX_VERIFY_TOKENS": MAX_VERIFY_TOKENS})
    calls: list[str] = []
    tma_returned: list[bool] = []
    ws_returned: list[bool] = []

    def spy(name: str):
        return lambda *a, **kw: (calls.append(name), fwd[name](*a, **kw))[1]

    def tma_spy(*a, **kw):
        calls.append("tma")
        # INDEX_AHEAD 3 (the default) is inline asm, which the interpreter cannot run: the plain-load mode.
        tma_returned.append(fwd["tma"](*a, index_ahead=1, **kw))
        return tma_returned[-1]

    def ws_stand_in(*a, **kw):
        calls.append("ws")
        ws_returned.append(kw["logit_cap"] <= 0 and fwd["tma"](*a, index_ahead=1, **kw))
        return ws_returned[-1]

    k, bs = case.k, len(case.prefix)
    # The draft tokens' own slots: free slots past the prefixes, written by set_kv_buffer.
    out_cache_loc = torch.arange(bs * k) + x["key"].shape[0]
    pool_k = torch.cat([x["key"], torch.zeros(bs * k, *x["key"].shape[1:], dtype=x["key"].dtype)])
    pool_v = pool_k[..., :x["lv"]] if case.mla else torch.cat([x["value"], torch.zeros_like(x["draft_v"])])
    backend = types.SimpleNamespace(
        token_to_kv_pool=FakePool(pool_k, pool_v, case.mla), _translate_kv_loc=None, dcp_size=1,
        enable_deterministic=False, use_verify_splitkv=False, use_verify_grouped=grouped and not draft_extend,
        use_draft_extend_grouped=grouped and draft_extend, use_mla=case.mla,
        topk=2 if case.tree else 1, page_size=case.page, allow_bidirectional_attention_in_extend=False,
        extend_attention_fwd=spy("extend"), verify_grouped_attention_fwd=spy("verify"), req_to_token_pool=None,
        use_verify_mla_tma=tma, verify_mla_tma_fwd=tma_spy, verify_mla_ws_fwd=ws_stand_in if ws else None,
        forward_metadata=types.SimpleNamespace(
            kv_indptr=x["kv_indptr"], kv_indices=x["kv_indices"], qo_indptr=x["qo_indptr"],
            custom_mask=x["custom_mask"], mask_indptr=x["mask_indptr"], max_extend_len=k,
            # A window wider than any context: the sliding-window fallback must match the reference too.
            window_kv_indptr=x["kv_indptr"], window_kv_indices=x["kv_indices"],
            window_kv_offsets=torch.zeros(bs, dtype=torch.int32), swa_out_cache_loc=None,
            out_cache_loc_full_physical=None))
    backend._set_kv_buffer = types.MethodType(defs["TritonAttnBackend._set_kv_buffer"], backend)
    layer = types.SimpleNamespace(
        tp_q_head_num=case.heads, qk_head_dim=x["q"].shape[-1], v_head_dim=x["lv"], layer_id=0, k_scale=None,
        v_scale=None, logit_capping_method="tanh", logit_cap=case.logit_cap, is_cross_attention=False,
        attn_type="decoder", sliding_window_size=-1, scaling=x["sm_scale"], xai_temperature_len=-1)
    for name, value in layer_overrides.items():
        setattr(layer, name, value)
    batch = types.SimpleNamespace(
        out_cache_loc=out_cache_loc, attn_attend_prefix_cache=None,  # a ForwardBatch's default (patch 0048 reads it)
        forward_mode=types.SimpleNamespace(is_target_verify=lambda: not draft_extend,
                                           is_draft_extend_v2=lambda: draft_extend))
    o = defs["TritonAttnBackend.forward_extend"](
        backend, x["q"].reshape(bs * k, -1), x["draft_k"], x["draft_v"], layer, batch)
    return {"calls": calls, "tma_returned": tma_returned, "ws_returned": ws_returned,
            "out": o.view(bs * k, case.heads, x["lv"]).double()}


# MLA batches on 64-token pages for patch 0032's dispatch rows (the fake pool stays 3-D: SGLang's MLA pool is
# [slots, 1, 576] at every page size; each prefix on whole 64-slot pages, the last one partial).
TMA_CASES = [
    Case("mla-k4-p64", True, 4, (130, 64), 8, 1, 64, seed=23),
    Case("mla-k3-p64-tree", True, 3, (200,), 16, 1, 64, tree=True, seed=24),
    Case("mla-k2-p64-cap", True, 2, (100, 7), 8, 1, 64, logit_cap=30.0, seed=25),
]
DISPATCH = [  # case name, grouped on, layer overrides, the calls that must happen, the batch's mode, 0032 on
    ("mla-k4-p1", True, {}, ["verify"], "verify", False),
    ("gqa-k4-tree", True, {}, ["verify"], "verify", False),
    ("mla-k4-p1", False, {}, ["extend"], "verify", False),
    ("gqa-k2-p1", True, {"sliding_window_size": 4096}, ["extend"], "verify", False),
    ("gqa-k2-p1", True, {"k_scale": 1.0, "v_scale": 1.0, "k_scale_float": 1.0, "v_scale_float": 1.0}, ["extend"],
     "verify", False),
    # Patch 0023: EAGLE's draft extend (a causal window per request) on its own switch.
    ("gqa-k7-groups", True, {}, ["verify"], "draft_extend", False),
    ("gqa-k7-groups", False, {}, ["extend"], "draft_extend", False),
    # Patch 0032: MLA target verify on 64-token pages runs the TMA kernel (chain and tree mask) and nothing else;
    # not for the draft extend; a call it refuses (a logit cap) goes to 0007's kernel after it.
    ("mla-k4-p64", True, {}, ["tma"], "verify", True),
    ("mla-k3-p64-tree", True, {}, ["tma"], "verify", True),
    ("mla-k4-p64", True, {}, ["verify"], "draft_extend", True),
    ("mla-k2-p64-cap", True, {}, ["tma", "verify"], "verify", True),
]
# Patch 0044 (the 7th field: its switch): the warp-specialized kernel is tried first for MLA target verify, with or
# without 0032's; not for the draft extend; a call it refuses goes to 0032's kernel (when on), then to 0007's.
WS_DISPATCH = [
    ("mla-k4-p64", True, {}, ["ws"], "verify", True, True),
    ("mla-k3-p64-tree", True, {}, ["ws"], "verify", False, True),
    ("mla-k4-p64", True, {}, ["verify"], "draft_extend", True, True),
    ("mla-k2-p64-cap", True, {}, ["ws", "tma", "verify"], "verify", True, True),
    ("mla-k2-p64-cap", True, {}, ["ws", "verify"], "verify", False, True),
]


def _child(tree: str) -> list[dict]:
    """In the TRITON_INTERPRET=1 process: every case, results as plain data."""
    verify, extend = load_kernels(Path(tree))
    tma = TreeImporter.module(Path(tree), TMA)  # patch 0032's module, imported from the tree
    assert type(tma._verify_mla_tma_stage1).__name__ == "InterpretedFunction"
    kernels = {"verify": verify, "extend": extend, "tma": tma.verify_mla_tma_fwd}
    results = []
    by_name = {c.name: c for c in CASES + TMA_CASES}
    for name, grouped, overrides, want, mode, use_tma, *use_ws in DISPATCH + WS_DISPATCH:
        case = by_name[name]
        if case.page not in (1, 64):  # page 16 runs as page 1 here (page 64 is patch 0032's)
            case = Case(**{**asdict(case), "page": 1})
        x = make_inputs(case)
        got = run_backend(Path(tree), kernels, case, x, grouped, mode, use_tma, bool(use_ws and use_ws[0]),
                          **overrides)
        results.append({"dispatch": name, "grouped": grouped, "overrides": sorted(overrides), "want": want, "mode": mode,
                        "tma": use_tma, "calls": got["calls"], "tma_returned": got["tma_returned"],
                        "ws_returned": got["ws_returned"],
                        "rel_ref": max_rel(got["out"], reference(case, x))})
    for case in CASES + TILE_CASES:
        x = make_inputs(case)
        ref = reference(case, x)
        got = run_verify(verify, case, x)
        results.append({
            "case": asdict(case), "nan": bool(torch.isnan(got["out"]).any()),
            "spare_untouched": got["spare_untouched"], "rel_ref": max_rel(got["out"], ref),
        })
        if case in CASES:
            ext = run_extend(extend, case, x)
            results[-1].update(rel_extend=max_rel(got["out"], ext), extend_rel_ref=max_rel(ext, ref))
    return results


def interpreted_results(script: str, tree: Path) -> dict[str, dict]:
    """Run ``script`` (a test file whose ``__main__`` prints its ``_child`` results) on ``tree`` under the
    Triton interpreter; its records by case name, the dispatch ones as ``dispatch-<index>``."""
    env = script_env(TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, script, str(tree)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return {r["case"]["name"] if "case" in r else f"dispatch-{i}": r
            for i, r in enumerate(json.loads(done.stdout.splitlines()[-1]))}


@pytest.fixture(scope="module")
def results(trees) -> dict[str, dict]:  # noqa: F811
    return interpreted_results(__file__, trees.patched)


@pytest.mark.slow  # the TRITON_INTERPRET child process (``results``), about 12 s on 2 cores
@pytest.mark.parametrize("index", range(len(DISPATCH) + len(WS_DISPATCH)))
def test_triton_backend_dispatch(results: dict[str, dict], index: int):
    """The patched forward_extend runs the new kernel for target verify (and, on 0023's switch, for the draft
    extend), else extend; with 0032's switch, MLA target verify on 64-token pages runs the TMA kernel, and a
    call that kernel refuses (it returns False) runs the grouped one after it; the output is right."""
    r = results[f"dispatch-{index}"]
    assert r["calls"] == r["want"], r
    # The TMA kernel ran where it was the only call, and refused (returned False, o untouched) where the grouped
    # kernel followed it.
    assert r["tma_returned"] == ([True] if r["calls"] == ["tma"] else [False] * r["calls"].count("tma")), r
    assert r["ws_returned"] == ([True] if r["calls"] == ["ws"] else [False] * r["calls"].count("ws")), r
    assert r["rel_ref"] < 5e-3, r


def test_cases_cover_the_brief():
    assert {c.k for c in CASES} == set(range(1, 9))
    assert {c.page for c in CASES} == {1, 16} and {c.mla for c in CASES} == {True, False}
    assert any(c.tree for c in CASES) and any(c.max_splits == 1 for c in CASES)
    assert min(min(c.prefix) for c in CASES) == 1 and max(max(c.prefix) for c in CASES) >= 290


def test_reference_is_not_trivial():
    """The reference must tell a tree from a chain and the prefix from nothing, or the checks prove little."""
    case = next(c for c in CASES if c.tree)
    x = make_inputs(case)
    chain = Case(**{**asdict(case), "tree": False})
    assert max_rel(reference(case, x), reference(chain, make_inputs(chain))) > 0.05
    assert not all(torch.equal(m, torch.ones_like(m).tril()) for m in x["draft_masks"])


def test_gpu_bench_runs_the_kernel_the_patches_make(trees):  # noqa: F811
    """benchmark/tools/attn_verify_bench.py rebuilds the kernel file from the patches (0007 creates it, 0035 adds
    decode): it must be the patched tree's."""
    assert source(trees.patched, VERIFY) == trees.patched / KERNEL_FILE
    assert file_from_series(KERNEL_FILE, patches_dir()) == (trees.patched / KERNEL_FILE).read_text()


SM120_SHARED, SM90_SHARED = 101376, 232448  # opt-in shared memory per block (RTX PRO 6000, H200)


def xcompile_stage1(tree: Path, arch: int, k: int, heads: int, max_shared: int | None, max_splits: int = 32,
                    min_split_len: int = 256, decode: bool = False, **tile) -> dict:
    """The MLA stage-1 kernel (Kimi shapes: 576/512, one latent KV head, bf16, page 1, chain mask) compiled for
    sm_<arch> on this CPU as a launch specializes it: every int argument of the launch by its value (1: a
    constant, a multiple of 16: marked divisible; without that Triton cannot vectorize nor pipeline the KV
    loads). ``decode``: without extend tokens (patch 0035, k 1). ``tile``: ``verify_grouped_tile`` overrides.
    Returns shared bytes, registers, spill bytes, MMA."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    defs = load_defs(source(tree, VERIFY), ["_scaled_scores", "_accumulate", "_key_tile_scores",
                                            "_verify_grouped_stage1", "verify_grouped_tile"],
                     {"_extract_kv_strides": None, "MAX_VERIFY_TOKENS": MAX_VERIFY_TOKENS})
    kernel, cfg = defs["_verify_grouped_stage1"], defs["verify_grouped_tile"](576, 512, k, heads, max_shared, **tile)
    dv_splits, direct = cfg["dv_splits"], max_splits == 1
    out = "*bf16" if direct else "*fp32"
    pointers = {"Q": "*bf16", "K_Extend": "*bf16", "V_Extend": "*bf16", "K_Buffer": "*bf16", "V_Buffer": "*bf16",
                "kv_indptr": "*i32", "kv_indices": "*i64", "mask_ptr": "*i32", "mask_indptr": "*i32",
                "Out": out, "Lse": out}
    s = 0 if direct else max_splits
    ints = {"stride_qt": heads * 576, "stride_qh": 576, "stride_ket": 576, "stride_keh": 576, "stride_vet": 512,
            "stride_veh": 512, **{f"stride_{b}_{w}": 576 for b in ("kb", "vb") for w in ("slot", "head", "page", "tok")},
            "stride_ot": heads * 512 * (1 if direct else s), "stride_oh": 512 * (1 if direct else s),
            "stride_os": 0 if direct else 512, "stride_lt": 0 if direct else heads * s, "stride_lh": s,
            "kv_group_num": heads, "max_splits": max_splits, "min_split_len": min_split_len}
    constexprs = {"NUM_TOKENS": k, "TOKENS_PAD": cfg["tokens_pad"], "BLOCK_H": cfg["block_h"], "BLOCK_N": cfg["block_n"],
                  "BLOCK_T": 16, "BLOCK_DMODEL": 512, "BLOCK_DPE": 64, "BLOCK_DV": 512 // dv_splits,
                  "DV_SPLITS": dv_splits, "SIBLINGS": dv_splits.bit_length() - 1, "Lk": 576, "Lv": 512,
                  "PAGE_SIZE": 1, "V_FROM_K": True, "USE_CUSTOM_MASK": False, "HAS_LOGIT_CAP": False,
                  "DIRECT_OUT": direct, "HAS_EXTEND": not decode}
    signature, attrs = {}, {}
    for i, name in enumerate(kernel.arg_names):
        if name in pointers:
            signature[name], attrs[(i,)] = pointers[name], [["tt.divisibility", 16]]
        elif name in constexprs:
            signature[name] = "constexpr"
        elif name in ("sm_scale", "logit_cap"):
            signature[name] = "fp32"
        elif ints[name] == 1:
            signature[name], constexprs[name] = "constexpr", 1
        else:
            signature[name] = "i32"
            if ints[name] % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    compiled = triton.compile(ASTSource(kernel, signature, constexprs=constexprs, attrs=attrs),
                              target=GPUTarget("cuda", arch, 32),
                              options={"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]})
    ptx = compiled.asm["ptx"]
    registers, spills = ptxas_usage(ptx, arch)
    return {"shared": compiled.metadata.shared, "registers": registers, "spill_bytes": spills,
            "mma": "wgmma" if "wgmma" in ptx else "mma.sync" if "mma.sync" in ptx else "none",
            "cp_async": "cp.async" in ptx, "tile": cfg}


@pytest.mark.parametrize("arch,k,limit", [(120, 4, SM120_SHARED), (120, 8, SM120_SHARED), (90, 4, SM90_SHARED)],
                         ids=["sm120-k4", "sm120-k8", "sm90-k4"])
def test_default_mla_tile_fits_shared_memory(trees, arch: int, k: int, limit: int):  # noqa: F811
    """The H200 tile at 32 heads (128 rows, the value split in two) needs ~221 KB of sm_90's 227; sm_120 (the
    users' GPUs) has 99 KB and must get a smaller one (32 rows).
    The KV loads are pipelined (cp.async) as on a GPU launch."""
    stats = xcompile_stage1(trees.patched, arch, k, 32, limit)
    assert stats["shared"] <= limit, stats
    assert stats["cp_async"], stats


def test_default_decode_tile_at_64_heads_fits_sm90(trees):  # noqa: F811
    """Patch 0035's plain decode at 64 heads (Kimi at TP 1): all heads in one program, 64 rows, on wgmma, in sm_90's
    shared memory (session 26's H200 sweep ran it: benchmark/results/20261204-0128-h200-attn-decode-sweep)."""
    stats = xcompile_stage1(trees.patched, 90, 1, 64, SM90_SHARED, decode=True)
    assert stats["tile"]["block_h"] == 64 and stats["shared"] <= SM90_SHARED, stats
    assert stats["mma"] == "wgmma" and stats["cp_async"], stats


@pytest.mark.parametrize("heads", [8, 64])
def test_default_decode_tile_fits_sm120(trees, heads: int):  # noqa: F811
    """Patch 0035's plain decode on the users' GPUs (sm_120, 99 KB of shared memory): at 8 heads (TP 8) and at 64
    the ~100-KB branch's tile (16 heads a program), not the H200's 64-head one, and it fits."""
    stats = xcompile_stage1(trees.patched, 120, 1, heads, SM120_SHARED, decode=True)
    assert stats["tile"]["block_h"] == 16 and stats["shared"] <= SM120_SHARED, stats


def h200_mla_plan(tree: Path, num_tokens: int, bs: int, heads: int) -> dict:
    """The patched ``verify_grouped_plan`` for Kimi's MLA (576/512, one latent KV head, bf16) on an H200 (132 SMs,
    sm_90's shared memory)."""
    defs = load_defs(source(tree, VERIFY), ["_programs_target", "verify_grouped_tile", "verify_grouped_plan"],
                     extra={"_multiprocessor_count": lambda index: 132,
                            "_max_shared_memory": lambda index: SM90_SHARED})
    return defs["verify_grouped_plan"](num_tokens, bs, heads, 1, 576, 512, True, 2, torch.device("cuda", 0))


# Decode (one query) at 64 heads: session 26's sweep (benchmark/results/20261204-0128-h200-attn-decode-sweep) at
# bs 1 / 8 / 32, 8k-32k: this tile and these split counts were the fastest of 20 settings at each point (0.37-0.71x
# SGLang's decode kernel); verify (K 4) at 64 heads keeps its 32-head tile.
H200_DECODE_DEFAULTS = {1: 64, 8: 8, 32: 2}


@pytest.mark.parametrize("bs", list(H200_DECODE_DEFAULTS))
def test_default_decode_plan_at_64_heads_is_the_h200_sweep(trees, bs: int):  # noqa: F811
    keys = ("block_h", "block_n", "num_warps", "num_stages", "dv_splits")
    decode = h200_mla_plan(trees.patched, 1, bs, 64)
    assert tuple(decode[k] for k in keys) == (64, 32, 8, 2, 2) and decode["max_kv_splits"] == H200_DECODE_DEFAULTS[bs]
    verify = h200_mla_plan(trees.patched, 4, bs, 64)
    assert verify["block_h"] == 32, verify


# The defaults at the H200 sweep's points (benchmark/results/20261201-2041-h200-attn-verify-sweep): heads, bs ->
# tile and max_kv_splits; min_split_len 32 everywhere. Each was measured there (10 of the 12 points; H 8 at 1k not).
H200_DEFAULTS = {
    (32, 1): ((32, 32, 8, 2, 2), 64), (32, 8): ((32, 32, 8, 2, 2), 8),
    (8, 1): ((16, 16, 4, 3, 2), 128), (8, 8): ((16, 16, 4, 3, 2), 16),
}


@pytest.mark.parametrize("heads,bs", list(H200_DEFAULTS))
def test_default_mla_plan_is_the_h200_sweeps(trees, heads: int, bs: int):  # noqa: F811
    plan = h200_mla_plan(trees.patched, 4, bs, heads)
    tile, splits = H200_DEFAULTS[(heads, bs)]
    keys = ("block_h", "block_n", "num_warps", "num_stages", "dv_splits")
    assert (tuple(plan[k] for k in keys), plan["max_kv_splits"], plan["min_split_len"]) == (tile, splits, 32)


def test_tile_cases_cover_the_gpu_sweep():
    """Every (heads per program, KV tokens per step, value splits) the GPU sweep runs is checked here."""
    from benchmark.tools.attn_verify_bench import SWEEP_TILES

    def key(tile) -> tuple[int, int, int]:
        tile = dict(tile)
        return tile.get("block_h", 16), tile.get("block_n", 32), tile.get("dv_splits", 1)
    covered = {key(c.tile) for c in TILE_CASES if c.mla} | {key(())}
    assert {key(t) for t in SWEEP_TILES} <= covered, {key(t) for t in SWEEP_TILES} - covered
    assert len({c.name for c in CASES + TILE_CASES + TMA_CASES}) == len(CASES) + len(TILE_CASES) + len(TMA_CASES)


# ----------------------------------------------------------------------------- the GPU bench's harness, on CPU


def _bench_on_cpu(monkeypatch, tree: Path):
    """benchmark/tools/attn_verify_bench.py with DEVICE cpu, Kernels whose grouped call is a torch attention
    (it checks its settings with the patched tree's verify_grouped_plan), and fake timers."""
    import itertools

    import benchmark.tools.attn_verify_bench as bench

    defs = load_defs(source(tree, VERIFY), ["_multiprocessor_count", "_max_shared_memory", "_programs_target",
                                            "verify_grouped_tile", "verify_grouped_plan"])
    module = types.SimpleNamespace(verify_grouped_plan=defs["verify_grouped_plan"])
    monkeypatch.setattr(bench, "DEVICE", "cpu")
    monkeypatch.setattr(bench, "ROTATE_BYTES", 1)
    ticks = itertools.count(1)
    monkeypatch.setattr(bench, "graph_time_us", lambda fns, **kw: (fns[-1](), (t := 10.0 + next(ticks) % 7,
                                                                              t, t))[1])
    monkeypatch.setattr(bench, "time_us", lambda fn: (fn(), (30.0, 29.0, 31.0))[1])

    outputs = {}  # torch attention per (queries, slots): computed once

    def torch_verify(q, k_ext, v_ext, o, kb, vb, indptr, indices, k, scale, page_size=1, custom_mask=None,
                     mask_indptr=None, max_kv_splits=None, min_split_len=None, **tile):
        key, value = kb.reshape(-1, *kb.shape[-2:]), vb.reshape(-1, *vb.shape[-2:])
        lens = (indptr[1:] - indptr[:-1]).tolist()
        defs["verify_grouped_plan"](k, len(lens), q.shape[1], key.shape[1], q.shape[2], o.shape[2], True,
                                    key.element_size(), q.device, max_kv_splits, min_split_len, **tile)
        if k_ext is None:  # decode (patch 0035): no draft tokens, the KV indices cover every key
            k_ext, v_ext = key[:0], value[:0]
        key_of = (q.data_ptr(), tuple(q.shape), indices.data_ptr())
        if key_of not in outputs:
            x = {"q": q, "draft_k": k_ext, "draft_v": v_ext, "key": key, "value": value, "kv_indptr": indptr,
                 "kv_indices": indices, "lens": lens, "k": k, "heads": q.shape[1], "kv_heads": key.shape[1],
                 "lv": o.shape[2], "sm_scale": scale,
                 "draft_masks": [torch.ones(k, k, dtype=torch.bool).tril()[:, :len(k_ext) // len(lens)]] * len(lens)}
            outputs[key_of] = bench.reference(x)
        o.copy_(outputs[key_of])

    class Grid:  # get_num_kv_splits_triton[(1,)](...)
        def __getitem__(self, grid):
            return lambda *a, **kw: None
    kern = bench.Kernels.__new__(bench.Kernels)
    kern.module, kern.verify, kern.sms, kern.use_pdl = module, torch_verify, 132, False
    kern.extend_fwd = kern.decode_fwd = lambda *a, **kw: None
    kern.num_kv_splits = Grid()
    args = bench.parse_args(["--out", "unused", "--sweep-full", "--heads", "32,8", "--bs", "1,2", "--ctx", "128,256",
                             "--calls", "2"])
    return bench, kern, args


def test_gpu_bench_harness_runs_on_cpu(monkeypatch, trees):  # noqa: F811
    """The timing phase and both sweep stages end to end (fake kernels and timers): records, the best per
    point, the ranking and the tables; every sweep setting passes the kernel's own plan checks."""
    bench, kern, args = _bench_on_cpu(monkeypatch, trees.patched)
    points, log = bench.Points(args), []
    records, skipped = bench.run_timing(kern, points, (None, "not on CPU"), args, time.time() + 600, log.append)
    assert not skipped and len(records) == 8 * 7  # grouped x3, decode x2, grouped-decode, extend per point
    assert {r["variant"] for r in records} == {"grouped", "grouped-replay1", "grouped-p64", "decode",
                                                "decode-replay1", "grouped-decode", "extend"}
    assert all(r["k"] == 1 and r["mode"] == "attn_decode" and r["rel_err"] < 1e-2
               for r in records if r["variant"] == "grouped-decode")
    assert all(r.get("rel_err", 0) < 1e-2 for r in records), [r for r in records if r.get("rel_err", 0) >= 1e-2]
    sweep = bench.run_sweep(kern, points, args, time.time() + 600, log.append)
    assert not [r for r in sweep if "error" in r], [r for r in sweep if "error" in r][:3]
    stage_a = [r for r in sweep if r["stage"] == "A"]
    assert len(stage_a) == 4 * len(bench.SWEEP_TILES) + 4 * sum(bench.tile_fits(t, 8) for t in bench.SWEEP_TILES)
    assert {r["stage"] for r in sweep} == {"A", "B"}
    bs8 = {"k": 4, "lens": [32768] * 8, "heads": 32, "kv_heads": 1, "lk": 576, "lv": 512,
           "key": torch.empty(0, dtype=torch.bfloat16), "q": torch.empty(0)}
    plans = bench.split_plans(kern, bs8, {"block_h": 16, "dv_splits": 4}, 132)  # 64 programs a split: 33..1056
    assert [bench.effective_splits(p, 32768) for p in plans] == [1, 2, 4, 8, 16]
    assert plans[0]["max_kv_splits"] == 1 and all(p["max_kv_splits"] % 16 == 0 for p in plans[1:])
    best = bench.best_per_point(records, sweep)
    assert len(best) == 8 and all(b["decode_us"] and b["ratio_to_decode"] for b in best)
    assert [b["meets_bandwidth_target"] for b in best if b["ctx"] < 8192] == [None] * 8
    assert len(bench.best_table(best).splitlines()) == 2 + 8 and len(bench.table(records).splitlines()) == 2 + 8
    assert bench.ranking(sweep)[0][1] >= 1.0
    jobs = bench.sweep_jobs(kern, bench.sweep_points(args), args) + bench.timing_jobs(args) + bench.check_jobs()
    assert all(set(j) >= {"kind", "lens", "k", "heads", "page"} for j in jobs)


def test_gpu_bench_decode_sweep_runs_on_cpu(monkeypatch, trees):  # noqa: F811
    """--decode-sweep (patch 0035's plain decode): every tile that fits the head count at each distinct split
    count, each checked against the decode reference and passed through the kernel's own plan checks; the
    table picks each point's fastest setting; the compile jobs carry the tiles."""
    bench, kern, args = _bench_on_cpu(monkeypatch, trees.patched)
    args = bench.parse_args(["--out", "unused", "--decode-sweep", "--heads", "64,8", "--bs", "1,2", "--ctx", "128",
                             "--calls", "2"])
    points, log = bench.Points(args), []
    records, _ = bench.run_timing(kern, points, (None, "not on CPU"), args, time.time() + 600, log.append)
    sweep = bench.run_decode_sweep(kern, points, time.time() + 600, log.append)
    assert sweep and not [r for r in sweep if "error" in r], [r for r in sweep if "error" in r][:3]
    assert all(r["mode"] == "attn_decode" and r["k"] == 1 and r["rel_err"] < 1e-2 for r in sweep)
    assert {r["settings"]["block_h"] for r in sweep if r["heads"] == 64} >= {64}
    assert all(r["settings"]["block_h"] < 64 or r["heads"] == 64 for r in sweep), "a 64-head tile at 8 heads"
    for point in {(r["heads"], r["bs"]) for r in sweep}:
        splits = [(str(r["settings"]), r["settings"]["max_kv_splits"]) for r in sweep if (r["heads"], r["bs"]) == point]
        assert len(splits) == len(set(splits)), f"a split count timed twice at {point}"
        assert len({s for _, s in splits}) > 1, f"one split count only at {point}"
    table = bench.decode_sweep_table(records, sweep).splitlines()
    assert len(table) == 2 + 4 and all("S" in line.split("|")[-1] for line in table[2:])
    jobs = bench.decode_sweep_jobs(args)
    assert {j["heads"] for j in jobs} == {64, 8} and {"block_h": 64} in [j["kw"] for j in jobs]
    assert not [j for j in jobs if j["heads"] == 8 and j["kw"].get("block_h") == 64]


def test_gpu_bench_rotating_copies_and_pages(monkeypatch, trees):  # noqa: F811
    """A timing point's KV copies are disjoint, and its 64-token pages (FlashMLA's layout, the grouped-p64
    variant) hold copy 0's prefix and then the draft tokens."""
    bench, _, _ = _bench_on_cpu(monkeypatch, trees.patched)
    x = bench.make_point(2, 100, 3, 8, copies=5, seed=1)
    rot, pool = x["rot_indices"], x["pool"]
    assert len(rot) == 5 and len(torch.cat(rot).unique()) == 5 * 200
    assert torch.equal(x["key"][pool["p64_indices"][0]], x["key"][rot[0]])
    table = pool["tables"][0].long()
    for b in range(2):
        pos = torch.arange(100, 103)
        slots = table[b][pos // 64] * 64 + pos % 64
        assert torch.equal(x["key"][slots], x["draft_k"][b * 3:(b + 1) * 3])
    assert len(pool["tables"]) == 5 and all(t.dtype == torch.int32 for t in pool["tables"])
    monkeypatch.setattr(bench, "ROTATE_BYTES", 200 << 20)
    assert bench.copies_for(1 << 40, 20) == 20 and bench.copies_for(1 << 20, 20) == 200
    assert bench.copies_for(1, 20) == bench.MAX_CALLS


def test_gpu_bench_flashmla_skips_with_a_reason_and_packs(tmp_path):
    import benchmark.tools.attn_verify_bench as bench

    module, reason = bench.load_flashmla(None)
    assert module is None and reason and "\n" not in reason
    wheel = tmp_path / "w.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(bench.FLASHMLA_SO, b"\0" * 5000)
        z.writestr("sgl_kernel/other.so", b"x")
    size = bench.pack_flashmla(wheel, tmp_path / "f.zip")
    assert 0 < size < 5000 and zipfile.ZipFile(tmp_path / "f.zip").namelist() == ["flashmla_ops.abi3.so"]


def test_gpu_bench_help_names_the_sweep_command(capsys):
    import benchmark.tools.attn_verify_bench as bench

    with pytest.raises(SystemExit) as done:
        bench.parse_args(["--help"])
    assert done.value.code == 0
    assert "--out $OUT/attn --sweep-full --budget-s 140" in " ".join(capsys.readouterr().out.split())


@pytest.mark.slow  # the TRITON_INTERPRET child process (``results``), about 12 s on 2 cores
@pytest.mark.parametrize("name", [c.name for c in CASES + TILE_CASES])
def test_matches_float64_reference(results: dict[str, dict], name: str):
    r = results[name]
    assert not r["nan"], f"{name}: NaN left in the output (a row was not written)"
    assert r["rel_ref"] < 5e-3, f"{name}: max relative error vs float64 {r['rel_ref']}"


@pytest.mark.slow  # the TRITON_INTERPRET child process (``results``), about 12 s on 2 cores
@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_matches_sglang_extend_kernel(results: dict[str, dict], name: str):
    r = results[name]
    assert r["extend_rel_ref"] < 5e-3, f"{name}: SGLang's extend kernel itself is off ({r['extend_rel_ref']})"
    assert r["rel_extend"] < 5e-3, f"{name}: max relative difference vs extend_attention_fwd {r['rel_extend']}"


@pytest.mark.slow  # the TRITON_INTERPRET child process (``results``), about 12 s on 2 cores
@pytest.mark.parametrize("name", [c.name for c in CASES + TILE_CASES])
def test_writes_nothing_outside_its_rows(results: dict[str, dict], name: str):
    assert results[name]["spare_untouched"]


if __name__ == "__main__":
    print(json.dumps(_child(sys.argv[1])))
