"""Patch 0008: a step that runs without its CUDA graph says why, once, and is counted.

Runs the patched trees' code on CPU with stand-ins, 0.5.17 and the upstream port (0.5.23 +
patches/upstream/v0.5.23): the admission decision of DecodeCudaGraphRunner must equal its
pristine release's on every batch (the patch only names the reason), the reason must be the
failing check, and graph_fallback must log the first fallback of each (role, mode, reason,
width) on TP rank 0 only.
"""

from __future__ import annotations

import ast
import importlib.util
import logging
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from sglang_trees import PATCHED, load_defs, source, trees  # noqa: F401 (trees: a module-scoped fixture)

RUNNER = "sglang.srt.model_executor.runner.decode_cuda_graph_runner"
FALLBACK = "sglang.srt.model_executor.runner.graph_fallback"
STUBS = {"resolve_ragged_verify_layout": lambda fb: None, "get_current_stream_idx": lambda: 0, "torch": torch}
PAIRS = [("patched", "pristine"), ("upstream", "upstream_pristine")]  # each patched tree and its release


def load_fallback_module(tree: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("fastpath_graph_fallback", source(tree, FALLBACK))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_runner(tree: Path, **overrides: Any) -> SimpleNamespace:
    names = ["DecodeCudaGraphRunner.can_run_graph"]
    patched = (source(tree, RUNNER).read_text().count("def graph_fallback_reason") == 1)
    if patched:
        names.append("DecodeCudaGraphRunner.graph_fallback_reason")
    defs = load_defs(source(tree, RUNNER), names, extra=dict(STUBS))
    runner = SimpleNamespace(
        ragged_verify_mode=False, captured_req_width=4, require_mlp_tp_gather=False, enable_pdmux=False,
        disable_padding=False, max_bs=8, require_mlp_sync=False, is_encoder_decoder=False,
        enable_two_batch_overlap=False,
        model_runner=SimpleNamespace(spec_algorithm=SimpleNamespace(is_ngram=lambda: False)),
        backend=SimpleNamespace(can_run=lambda fb, key: key[0] in (1, 2, 4, 8)),
        _make_graph_key=lambda bs, stream_idx=None, variant_label=None, attention_variant=None: (bs,),
        _resolve_lora_variant=lambda fb: None, _resolve_attention_variant=lambda fb, bs: None,
    )
    for key, value in overrides.items():
        setattr(runner, key, value)
    runner.can_run_graph = types.MethodType(defs["DecodeCudaGraphRunner.can_run_graph"], runner)
    if patched:
        runner.graph_fallback_reason = types.MethodType(defs["DecodeCudaGraphRunner.graph_fallback_reason"], runner)
    return runner


def make_batch(bs: int = 4, width: int = 4, **overrides: Any) -> SimpleNamespace:
    batch = SimpleNamespace(
        replace_embeds=None, forward_mode=SimpleNamespace(is_target_verify=lambda: True),
        spec_info=SimpleNamespace(num_tokens_per_req=width), batch_size=bs, can_run_dp_cuda_graph=True,
        can_run_decode_cuda_graph=True,  # 0.5.23's name for the DP-attention sync flag
        can_run_tbo=True, encoder_lens=None, input_ids=torch.zeros(bs * width, dtype=torch.int64),
        original_global_num_tokens_cpu=[bs],
    )
    for key, value in overrides.items():
        setattr(batch, key, value)
    return batch


# (runner overrides, batch, expected reason or None)
CASES = {
    "graph": ({}, make_batch(4), None),
    "bs_above_max": ({}, make_batch(16), "batch_size_above_max"),
    "width_mismatch": ({}, make_batch(4, width=3), "tokens_per_req_mismatch"),
    "embeds": ({}, make_batch(2, replace_embeds=torch.zeros(1)), "replace_embeds"),
    "dp_not_ready": ({"require_mlp_sync": True},
                     make_batch(2, can_run_dp_cuda_graph=False, can_run_decode_cuda_graph=False), "dp_rank_not_ready"),
    "dp_ready": ({"require_mlp_sync": True}, make_batch(2), None),
    "tbo": ({"enable_two_batch_overlap": True}, make_batch(2, can_run_tbo=False), "two_batch_overlap"),
    "not_captured": ({"disable_padding": True}, make_batch(3), "batch_size_not_captured"),
    "captured_no_padding": ({"disable_padding": True}, make_batch(8), None),
    "ragged": ({"ragged_verify_mode": True}, make_batch(2), "ragged_verify"),
}


@pytest.mark.parametrize("pair", PAIRS, ids=[p[0] for p in PAIRS])
@pytest.mark.parametrize("case", sorted(CASES))
def test_admission_is_pristines_and_the_reason_is_the_failing_check(trees, case: str, pair: tuple) -> None:
    overrides, batch, reason = CASES[case]
    patched, pristine = (make_runner(trees.get(name), **overrides) for name in pair)
    assert patched.can_run_graph(batch) == pristine.can_run_graph(batch) == (reason is None)
    found = patched.graph_fallback_reason(batch)
    assert (found and found[0]) == reason


@pytest.mark.parametrize("tree_name", PATCHED)
def test_the_numbers_that_decided_it_are_in_the_reason(trees, tree_name: str) -> None:
    runner = make_runner(trees.get(tree_name))
    assert runner.graph_fallback_reason(make_batch(16)) == ("batch_size_above_max", "bs 16, captured max 8")
    assert runner.graph_fallback_reason(make_batch(4, width=3))[1] == "3 tokens per request, captured 4"


@pytest.mark.parametrize("tree_name", ["pristine", "upstream_pristine"])
def test_pristine_has_no_reason(trees, tree_name: str) -> None:
    assert not hasattr(make_runner(trees.get(tree_name)), "graph_fallback_reason")


@pytest.mark.parametrize("tree_name", PATCHED)
def test_logged_once_per_key_on_rank_zero_and_every_step_counted(trees, caplog, tree_name: str) -> None:
    gf = load_fallback_module(trees.get(tree_name))
    gf.configure(tp_rank=0)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            gf.note("target", "target_verify", "batch_size_above_max", 4, "bs 64, captured max 48")
        gf.note("target", "target_verify", "batch_size_above_max", 2, "bs 64, captured max 48")  # new width
        gf.note("draft", "draft_extend", "no_graph_runner", 4, "no draft-extend CUDA graph")
    lines = [r.getMessage() for r in caplog.records if r.name == "fastpath_graph_fallback"]
    assert len(lines) == 3
    assert "target target_verify runs without its CUDA graph (tokens per request 4): batch_size_above_max " \
           "(bs 64, captured max 48)" in lines[0]
    assert gf.snapshot() == [
        {"role": "draft", "mode": "draft_extend", "reason": "no_graph_runner", "count": 1},
        {"role": "target", "mode": "target_verify", "reason": "batch_size_above_max", "count": 4},
    ]
    with pytest.raises(ValueError, match="unknown CUDA graph fallback reason"):
        gf.note("target", "decode", "because", 1)


@pytest.mark.parametrize("tree_name", PATCHED)
def test_other_ranks_count_but_do_not_log(trees, caplog, tree_name: str) -> None:
    gf = load_fallback_module(trees.get(tree_name))
    gf.configure(tp_rank=1)
    with caplog.at_level(logging.WARNING):
        gf.note("target", "decode", "no_graph_runner", 1)
    assert not [r for r in caplog.records if r.name == "fastpath_graph_fallback"]
    assert gf.snapshot()[0]["count"] == 1


@pytest.mark.parametrize("tree_name", PATCHED)
def test_prometheus_counter_has_the_reason_label(trees, tree_name: str) -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    gf = load_fallback_module(trees.get(tree_name))
    gf.configure(tp_rank=0, export_prometheus=True)
    try:
        gf.note("draft", "draft", "batch_size_above_max", 1, "bs 64, captured max 48")
        value = prometheus_client.REGISTRY.get_sample_value(
            "sglang:cuda_graph_fallbacks_total",
            {"role": "draft", "mode": "draft", "reason": "batch_size_above_max", "tp_rank": "0"})
        assert value == 1.0
    finally:  # the next tree's module registers the same name
        prometheus_client.REGISTRY.unregister(gf._prom_counter)


@pytest.mark.parametrize("tree_name", PATCHED)
def test_draft_runner_missing_or_declining(trees, tree_name: str) -> None:
    gf = load_fallback_module(trees.get(tree_name))
    gf.note_runner("draft", "draft_extend", None, 4, 4, "no draft-extend CUDA graph for this attention backend")
    gf.note_runner("draft", "draft", SimpleNamespace(max_bs=48), 64, 1)
    gf.note_runner("draft", "draft", SimpleNamespace(max_bs=48), 8, 1)
    assert {(r["mode"], r["reason"]) for r in gf.snapshot()} == {
        ("draft_extend", "no_graph_runner"), ("draft", "batch_size_above_max"), ("draft", "runner_declined")}


@pytest.mark.parametrize("tree_name", PATCHED)
def test_model_runner_notes_a_target_step_without_a_runner(trees, tree_name: str) -> None:
    tree = trees.get(tree_name)
    gf = load_fallback_module(tree)
    note = load_defs(source(tree, "sglang.srt.model_executor.model_runner"),
                     ["ModelRunner._note_graph_fallback"], extra={"graph_fallback": gf})["ModelRunner._note_graph_fallback"]
    mode = SimpleNamespace(name="TARGET_VERIFY")
    batch = SimpleNamespace(forward_mode=mode, spec_info=SimpleNamespace(num_tokens_per_req=4))
    note(SimpleNamespace(decode_cuda_graph_runner=None), batch)
    runner = make_runner(tree)
    note(SimpleNamespace(decode_cuda_graph_runner=runner), make_batch(4, forward_mode=mode))
    noted = [{"role": "target", "mode": "target_verify", "reason": "no_graph_runner", "count": 1}]
    if tree_name == "upstream":
        # The port is called only after can_run_graph said no: a runner whose own checks all pass
        # (a subclass with checks of its own, another platform's runner) declined for its own reason.
        noted.append({"role": "target", "mode": "target_verify", "reason": "runner_declined", "count": 1})
    assert gf.snapshot() == noted  # 0.5.17: a graph-able batch is not noted


def _calls_in(tree: Path, module: str, func: str, callee: str) -> list[list[Any]]:
    """The constant arguments of every ``callee(...)`` call inside ``func`` (Class.method) of a module."""
    parsed = ast.parse(source(tree, module).read_text())
    cls, name = func.split(".")
    node = next(n for n in ast.walk(parsed) if isinstance(n, ast.ClassDef) and n.name == cls)
    method = next(n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == name)
    return [[a.value for a in call.args if isinstance(a, ast.Constant)]
            for call in ast.walk(method)
            if isinstance(call, ast.Call) and ast.unparse(call.func) == callee]


@pytest.mark.parametrize("tree_name", ["patched", "pristine", "upstream", "upstream_pristine"])
def test_the_hooks_sit_on_the_eager_branches(trees, tree_name: str) -> None:
    tree = trees.get(tree_name)
    forward = _calls_in(tree, "sglang.srt.model_executor.model_runner", "ModelRunner._forward_raw",
                        "self._note_graph_fallback")
    draft = _calls_in(tree, "sglang.srt.speculative.eagle_worker_v2", "EagleDraftWorker.draft",
                      "graph_fallback.note_runner")
    extend = _calls_in(tree, "sglang.srt.speculative.eagle_worker_v2", "EagleDraftWorker._draft_extend_for_decode",
                       "graph_fallback.note_runner")
    found = (len(forward), draft[0][:2] if draft else None, extend[0][:2] if extend else None)
    if tree_name.endswith("pristine"):
        assert found == (0, None, None)
    else:
        assert found == (1, ["draft", "draft"], ["draft", "draft_extend"])
