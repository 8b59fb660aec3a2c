"""Patch 0041 (0.5.17 only): the shared CUDA-graph buffers hold the rows adaptive speculation captures.

With ``--speculative-adaptive`` the shared logits buffer and the Triton backend's shared split-KV
partials were sized for the widest candidate at the largest captured batch size
(``max_speculative_num_draft_tokens`` x max bs: K 8 x bs 64 = 512 rows on kimi16), though patch 0016
captures each candidate's graphs only at the batch sizes its slots route to it. A config that keeps K 6
and K 8 to bs <= 32 (``benchmark/configs/adaptive-ks-rows256.json``) captures no graph wider than 256
rows, fixed K 4's at bs 64, yet kept the 512-row buffers (session 32: +0.32 GB on kimi16). Here
``max_graph_rows`` (from the patched tree's ``adaptive_spec_params``) is checked against the slots'
own routing (``cuda_graph_bs_for_step``), and both buffers' sizing is run on stand-ins. The pristine
release sizes for the widest candidate everywhere: those checks fail there.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from sglang_trees import SHOWS_THE_BUG, TreeImporter, load_defs, source
from sglang_trees import trees  # noqa: F401 (a fixture)
from test_shared_graph_state import HEAD_DIM, HEADS, SPLITS, attn_backend, loaded, storage

MODULE = "sglang.srt.speculative.adaptive_spec_params"
MODEL_RUNNER = "sglang.srt.model_executor.model_runner"
CONFIGS = Path(__file__).resolve().parents[1] / "benchmark" / "configs"
# The decode batch sizes SGLang 0.5.17 captures with graphs to bs 64 (a kimi16 K-set run's start-up log).
GRAPH_BS = [*range(1, 9), *range(10, 33, 2), 40, 44, 48, 52, 56, 60, 64]
PATCHED_0517 = ["patched", pytest.param("pristine", marks=SHOWS_THE_BUG)]


def server_args(config: Path | str | None, adaptive: bool = True, launch_k: int = 4, widest: int = 8) -> Any:
    return SimpleNamespace(speculative_adaptive=adaptive, speculative_adaptive_config=None if config is None
                           else str(config), speculative_num_draft_tokens=launch_k,
                           max_speculative_num_draft_tokens=widest if adaptive else launch_k)


def write_config(tmp_path: Path, slots: dict[str, list[int]]) -> Path:
    path = tmp_path / "adaptive.json"
    path.write_text(json.dumps({"policy": "throughput", **{s: {"candidate_steps": c} for s, c in slots.items()}}))
    return path


@pytest.fixture
def asp(trees, monkeypatch) -> Any:
    monkeypatch.delenv("SGLANG_SPEC_ADAPTIVE_POLICY", raising=False)
    return TreeImporter.module(trees.patched, MODULE)


def rows_by_routing(asp: Any, args: Any, capture_bs: list[int]) -> int:
    """The widest graph as the adaptive states capture it: the start-up K at every batch size, each other
    candidate at the batch sizes ``cuda_graph_bs_for_step`` gives it (all of them when it gives none, as
    ``get_batch_sizes_to_capture`` then keeps the full list)."""
    params = asp.AdaptiveSpeculativeParams(initial_steps=args.speculative_num_draft_tokens - 1,
                                           cfg_path=args.speculative_adaptive_config)
    params.set_cuda_graph_bs(capture_bs)
    rows = args.speculative_num_draft_tokens * max(capture_bs)
    for steps in params.candidate_steps:
        rows = max(rows, (steps + 1) * max(params.cuda_graph_bs_for_step(steps) or capture_bs))
    return rows


@pytest.mark.parametrize("config, expected", [("adaptive-ks-rows256.json", 256), ("adaptive-ks.json", 512),
                                              ("adaptive-ks-off.json", 512)])
def test_rows_follow_the_slots_routing(asp, config: str, expected: int) -> None:
    args = server_args(CONFIGS / config)
    assert asp.max_graph_rows(args, GRAPH_BS) == expected == rows_by_routing(asp, args, GRAPH_BS)


@pytest.mark.parametrize("slots", [
    {"1": [1, 3], "8": [1, 2, 3, 7], "24": [3]},  # K 8 only at bs 8-22
    {"1": [1, 2, 3], "128": [1, 3, 7]},  # steps 7 in a slot no captured bs reaches: captured at every bs
    {"4": [2, 3, 5], "16": [3]},  # bs 1-3 route to the smallest slot
])
def test_rows_agree_with_routing_for_other_layouts(asp, tmp_path: Path, slots: dict[str, list[int]]) -> None:
    args = server_args(write_config(tmp_path, slots))
    for capture_bs in (GRAPH_BS, [1, 2, 4, 8], [16, 32]):
        assert asp.max_graph_rows(args, capture_bs) == rows_by_routing(asp, args, capture_bs)


def test_no_bound_without_adaptive_speculation_or_graphs(asp) -> None:
    assert asp.max_graph_rows(server_args(None, adaptive=False), GRAPH_BS) is None
    assert asp.max_graph_rows(server_args(CONFIGS / "adaptive-ks.json"), None) is None
    assert asp.max_graph_rows(server_args(CONFIGS / "adaptive-ks.json"), []) is None


class FakeRunner:
    """What ``ModelRunner.max_decode_logits_rows`` reads."""

    def __init__(self, args: Any) -> None:
        self.server_args = args

    def decode_num_tokens_per_req(self, *, num_draft_tokens: int | None = None) -> int:
        return self.server_args.speculative_num_draft_tokens if num_draft_tokens is None else num_draft_tokens


@pytest.mark.parametrize("tree_name", PATCHED_0517)
def test_the_shared_logits_buffer_holds_the_rows_the_states_capture(trees, tree_name: str) -> None:
    tree = trees.get(tree_name)
    TreeImporter.use(tree)
    rows = load_defs(source(tree, MODEL_RUNNER), ["ModelRunner.max_decode_logits_rows"],
                     extra={"get_batch_sizes_to_capture": lambda runner, width=1: (GRAPH_BS, [])})
    logits_rows = rows["ModelRunner.max_decode_logits_rows"]
    assert logits_rows(FakeRunner(server_args(CONFIGS / "adaptive-ks.json"))) == 8 * 64
    assert logits_rows(FakeRunner(server_args(None, adaptive=False))) == 4 * 64
    assert logits_rows(FakeRunner(server_args(CONFIGS / "adaptive-ks-rows256.json"))) == 4 * 64


@pytest.mark.parametrize("tree_name", PATCHED_0517)
def test_the_shared_split_kv_partials_hold_the_rows_the_states_capture(trees, tree_name: str) -> None:
    """The start-up K-4 verify at bs 64 sizes the shared partials; the K-8 state, captured to bs 32 only,
    then reuses them. Without a bound (None) they are sized for K 8 at bs 64, as before."""
    tree, row = trees.get(tree_name), HEADS * SPLITS * HEAD_DIM
    for bound, expected_rows in ((256, 256), (None, 512)):
        buffers: dict = {}
        init = loaded(tree, "TritonAttnBackend.init_cuda_graph_state", buffers)
        backends = []
        for max_bs, k in ((64, 4), (32, 8)):
            b = attn_backend(init, shared=True)
            b.max_graph_rows = bound
            b.init_cuda_graph_state(max_bs, max_bs * k)
            backends.append(b)
        partials = buffers.get("triton_graph_state", {}).get(("attn_logits", HEADS, SPLITS, HEAD_DIM))
        assert partials is not None, "no shared split-KV partials"
        assert partials.numel() == expected_rows * row
        assert storage(backends[0].cuda_graph_attn_logits) == storage(backends[1].cuda_graph_attn_logits)
