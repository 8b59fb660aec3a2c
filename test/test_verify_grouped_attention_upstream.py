"""The upstream port of patch 0007 (patches/upstream/v0.5.23/0007) under ``TRITON_INTERPRET=1`` on CPU.

The kernel file of the port differs from the 0.5.17 one by a docstring line, and
``test_verify_grouped_attention.py`` checks that kernel against a float64 reference and SGLang's
extend kernel on 0.5.17. What is new on 0.5.23 is checked here, in a child process on the patched
0.5.23 tree:

* the kernel with 0.5.23's ``_extract_kv_strides``, which takes only 3-D ``[slots, heads, dim]``
  buffers (page 16 addresses them by token slot), on every case of the 0.5.17 test against the
  float64 reference, every output row written and nothing outside;
* 0.5.23's ``TritonAttnBackend.forward_extend``: target verify runs the grouped kernel (chain and
  tree), and the extend path where the port must not apply (switch off, sliding window, KV
  scales, a sink). The extend kernel is a stand-in there that writes the reference (0.5.23's
  extend kernel is not loaded on CPU); which kernel ran is what those cases check. With the port
  of 0023 (upstream 0022), EAGLE's draft extend runs the grouped kernel on its own switch, with
  the chain mask.
"""

from __future__ import annotations

import json
import sys
import types
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from sglang_trees import load_defs, source, trees  # noqa: F401 (trees: a module-scoped fixture)
from test_verify_grouped_attention import (
    BACKEND,
    CASES,
    DECODE,
    MAX_VERIFY_TOKENS,
    SPARE_ROWS,
    VERIFY,
    Case,
    FakePool,
    _NoSWAPool,
    interpreted_results,
    make_inputs,
    max_rel,
    poisoned_output,
    reference,
)

KERNEL_FILE = "python/sglang/kernels/ops/attention/verify_grouped_attention.py"
DISPATCH = [  # case name, grouped on, layer overrides, forward_extend extra kwargs, the kernel that must run
    ("mla-k4-p1", True, {}, {}, "verify"),
    ("gqa-k4-tree", True, {}, {}, "verify"),
    ("mla-k6-tree-cap", True, {}, {}, "verify"),
    ("mla-k4-p1", False, {}, {}, "extend"),
    ("gqa-k2-p1", True, {"sliding_window_size": 4096}, {}, "extend"),
    ("gqa-k2-p1", True, {"k_scale": 1.0, "v_scale": 1.0, "k_scale_float": 1.0, "v_scale_float": 1.0}, {}, "extend"),
    ("gqa-k2-p1", True, {}, {"sinks": "a sink"}, "extend"),
]
# upstream 0022 (0.5.17's 0023): a DRAFT_EXTEND_V2 batch, grouped on meaning its own switch
DRAFT_EXTEND_DISPATCH = [("gqa-k7-groups", True, {}, {}, "verify"), ("gqa-k7-groups", False, {}, {}, "extend")]


def load_verify(tree: Path):
    strides = load_defs(source(tree, DECODE), ["_extract_kv_strides"])["_extract_kv_strides"]
    verify = load_defs(source(tree, VERIFY), ["_scaled_scores", "_accumulate", "_key_tile_scores",
                                              "_verify_grouped_stage1", "_verify_grouped_merge",
                                              "_multiprocessor_count", "_programs_target", "verify_grouped_tile",
                                              "verify_grouped_plan", "verify_grouped_attention_fwd"],
                       {"_extract_kv_strides": strides, "MAX_VERIFY_TOKENS": MAX_VERIFY_TOKENS})
    assert type(verify["_verify_grouped_stage1"]).__name__ == "InterpretedFunction"
    return verify["verify_grouped_attention_fwd"]


def run_verify_3d(fwd, case: Case, x: dict) -> dict:
    """The kernel as 0.5.23's backend calls it: 3-D KV buffers at every page size."""
    spare, o = poisoned_output(x, case.heads)
    fwd(x["q"], x["draft_k"], x["draft_v"], o, x["key"], x["value"], x["kv_indptr"], x["kv_indices"], case.k,
        x["sm_scale"], custom_mask=x["custom_mask"] if case.tree else None,
        mask_indptr=x["mask_indptr"] if case.tree else None, logit_cap=case.logit_cap, page_size=case.page,
        max_kv_splits=case.max_splits, min_split_len=case.min_split_len)
    return {"out": o.double(), "spare_untouched": bool(torch.isnan(spare[:SPARE_ROWS]).all()
                                                      and torch.isnan(spare[-SPARE_ROWS:]).all())}


class _WriteLoc:
    """0.5.23's KVWriteLoc.for_batch, reduced to the batch's out_cache_loc (what FakePool indexes with)."""

    @staticmethod
    def for_batch(forward_batch, swa_loc=None, full_loc=None):
        return forward_batch.out_cache_loc


def run_backend(tree: Path, verify, case: Case, x: dict, grouped: bool, layer_overrides: dict, kwargs: dict,
                draft_extend: bool = False) -> dict:
    """0.5.23 TritonAttnBackend.forward_extend (patched) on a target-verify batch, or a draft-extend one
    (``grouped`` then the draft-extend switch, the verify one off): which kernel ran, and o."""
    defs = load_defs(source(tree, BACKEND), ["logit_capping_mod", "TritonAttnBackend.forward_extend",
                                              "TritonAttnBackend._set_kv_buffer",
                                              "TritonAttnBackend._forward_extend_kernel"],
                     {"KVWriteLoc": _WriteLoc, "SWAKVPool": _NoSWAPool, "MAX_VERIFY_TOKENS": MAX_VERIFY_TOKENS,
                      "AttentionType": types.SimpleNamespace(ENCODER_ONLY="encoder_only",
                                                             DECODER_BIDIRECTIONAL="decoder_bidirectional")})
    calls: list[str] = []
    ref = reference(case, x)

    def grouped_kernel(*a, **kw):
        calls.append("verify")
        return verify(*a, **kw)

    def extend_stand_in(q, k, v, o, *a, **kw):
        calls.append("extend")
        o.copy_(ref.view_as(o).to(o.dtype))

    def tma_off(*a, **kw):  # the port of 0032 (upstream 0024) reads its switch, off here: never called
        calls.append("tma")
        return False

    k, bs = case.k, len(case.prefix)
    out_cache_loc = torch.arange(bs * k) + x["key"].shape[0]  # the draft tokens' own slots, past the prefixes
    pool_k = torch.cat([x["key"], torch.zeros(bs * k, *x["key"].shape[1:], dtype=x["key"].dtype)])
    pool_v = pool_k[..., :x["lv"]] if case.mla else torch.cat([x["value"], torch.zeros_like(x["draft_v"])])
    backend = types.SimpleNamespace(
        token_to_kv_pool=FakePool(pool_k, pool_v, case.mla), dcp_size=1, enable_deterministic=False,
        use_verify_splitkv=False, use_verify_shared_kv=False, use_verify_grouped=grouped and not draft_extend,
        use_draft_extend_grouped=grouped and draft_extend, use_mla=case.mla,
        topk=2 if case.tree else 1, page_size=case.page, allow_bidirectional_attention_in_extend=False,
        dllm_attention=None, extend_attention_fwd=extend_stand_in, verify_grouped_attention_fwd=grouped_kernel,
        use_verify_mla_tma=False, verify_mla_tma_fwd=tma_off,
        req_to_token_pool=types.SimpleNamespace(size=64),
        _can_run_dense_fp8_chunked_mha=lambda *a: False,
        forward_metadata=types.SimpleNamespace(
            kv_indptr=x["kv_indptr"], kv_indices=x["kv_indices"], qo_indptr=x["qo_indptr"],
            custom_mask=x["custom_mask"], mask_indptr=x["mask_indptr"], max_extend_len=k,
            window_kv_indptr=x["kv_indptr"], window_kv_indices=x["kv_indices"],
            window_kv_offsets=torch.zeros(bs, dtype=torch.int32), swa_out_cache_loc=None))
    for name in ("_set_kv_buffer", "_forward_extend_kernel"):
        setattr(backend, name, types.MethodType(defs[f"TritonAttnBackend.{name}"], backend))
    layer = types.SimpleNamespace(
        tp_q_head_num=case.heads, qk_head_dim=x["q"].shape[-1], v_head_dim=x["lv"], layer_id=0, k_scale=None,
        v_scale=None, logit_capping_method="tanh", logit_cap=case.logit_cap, is_cross_attention=False,
        attn_type="decoder", sliding_window_size=None, scaling=x["sm_scale"], xai_temperature_len=None)
    for name, value in layer_overrides.items():
        setattr(layer, name, value)
    batch = types.SimpleNamespace(
        out_cache_loc=out_cache_loc, mha_one_shot=False, attn_attend_prefix_cache=False, extend_seq_lens_cpu=None,
        forward_mode=types.SimpleNamespace(is_target_verify=lambda: not draft_extend, is_dllm_extend=lambda: False,
                                           is_draft_extend_v2=lambda: draft_extend))
    o = defs["TritonAttnBackend.forward_extend"](
        backend, x["q"].reshape(bs * k, -1), x["draft_k"], x["draft_v"], layer, batch, **kwargs)
    return {"calls": calls, "rel_ref": max_rel(o.view(bs * k, case.heads, x["lv"]).double(), ref)}


def _child(tree: str) -> list[dict]:
    """In the TRITON_INTERPRET=1 process: every case, results as plain data."""
    verify = load_verify(Path(tree))
    results = []
    by_name = {c.name: c for c in CASES}
    for draft_extend, table in ((False, DISPATCH), (True, DRAFT_EXTEND_DISPATCH)):
        for name, grouped, overrides, kwargs, want in table:
            case = by_name[name]
            x = make_inputs(case)
            got = run_backend(Path(tree), verify, case, x, grouped, overrides, kwargs, draft_extend)
            results.append({"dispatch": name, "want": want, "draft_extend": draft_extend, **got})
    for case in CASES:
        x = make_inputs(case)
        got = run_verify_3d(verify, case, x)
        results.append({"case": asdict(case), "nan": bool(torch.isnan(got["out"]).any()),
                        "spare_untouched": got["spare_untouched"], "rel_ref": max_rel(got["out"], reference(case, x))})
    return results


@pytest.fixture(scope="module")
def results(trees) -> dict[str, dict]:  # noqa: F811
    return interpreted_results(__file__, trees.upstream)


def test_port_runs_the_kernel_file_of_the_0517_patch_but_one_docstring_line(trees):  # noqa: F811
    """The kernel tests on 0.5.17 cover the port's kernel: the two files differ in one docstring line only. The
    0.5.17 file as patch 0007 creates it: 0035's decode mode (no extend tokens) is not ported."""
    from benchmark.tools.attn_verify_bench import file_from_patch, patch_creating
    from sglang_fastpath.paths import patches_dir

    ported = (trees.upstream / KERNEL_FILE).read_text().splitlines()
    original = file_from_patch(patch_creating(KERNEL_FILE, patches_dir()), KERNEL_FILE).splitlines()
    assert len(ported) == len(original)
    differing = [(a, b) for a, b in zip(ported, original) if a != b]
    assert len(differing) == 1 and "k_buffer/v_buffer" in differing[0][0], differing


@pytest.mark.slow  # the TRITON_INTERPRET child process (``results``)
@pytest.mark.parametrize("index", range(len(DISPATCH) + len(DRAFT_EXTEND_DISPATCH)))
def test_upstream_backend_dispatch(results: dict[str, dict], index: int):
    """0.5.23's forward_extend runs the grouped kernel for target verify (and, on upstream 0022's switch, for
    the draft extend), else the extend path, and o is right."""
    r = results[f"dispatch-{index}"]
    assert r["calls"] == [r["want"]], r
    assert r["rel_ref"] < 5e-3, r


@pytest.mark.slow  # the TRITON_INTERPRET child process (``results``)
@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_kernel_on_3d_buffers_matches_float64_reference(results: dict[str, dict], name: str):
    r = results[name]
    assert not r["nan"], f"{name}: NaN left in the output (a row was not written)"
    assert r["spare_untouched"], f"{name}: wrote outside its rows"
    assert r["rel_ref"] < 5e-3, f"{name}: max relative error vs float64 {r['rel_ref']}"


if __name__ == "__main__":
    print(json.dumps(_child(sys.argv[1])))
