"""Patch 0041 (0.5.17 only): the shared logits buffer holds the rows adaptive speculation captures.

With ``--speculative-adaptive`` the shared logits buffer was sized for the widest candidate at the largest
captured batch size (``max_speculative_num_draft_tokens`` x max bs: K 8 x bs 64 = 512 rows on kimi16),
though patch 0016 captures each candidate's graphs only at the batch sizes its slots route to it. A config that keeps K 6
and K 8 to bs <= 32 (``benchmark/configs/adaptive-ks-rows256.json``) captures no graph wider than 256
rows, fixed K 4's at bs 64, yet kept the 512-row buffer (session 32: 168 MB in bf16 on kimi16). Here
``max_graph_rows`` (the patched tree's ``adaptive_spec_params``) must equal the widest graph the states
capture by 0.5.17's own ``get_batch_sizes_to_capture`` and slot routing, for the shipped configs and
other slot layouts, request pools and graph lists; the buffer's sizing runs on a stand-in. The pristine
release sizes otherwise: those checks fail there. (The Triton backend's split-KV partials, which 0041 first
also sized by these rows, are sized for decode rows by patch 0042: test_decode_partials_rows.py.)
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sglang_trees import SHOWS_THE_BUG, TreeImporter, load_defs, source
from sglang_trees import trees  # noqa: F401 (a fixture)
from test_adaptive_throughput_policy import CONFIGS
from test_adaptive_throughput_policy import GRAPH_BS_TO_64 as GRAPH_BS

MODULE = "sglang.srt.speculative.adaptive_spec_params"
MODEL_RUNNER = "sglang.srt.model_executor.model_runner"
BASE_RUNNER = "sglang.srt.model_executor.runner.base_cuda_graph_runner"
# A list of graph batch sizes to 256 in the steps SGLang 0.5.17 uses to 64 (GRAPH_BS).
GRAPH_BS_256 = [*range(1, 9), *range(10, 33, 2), *range(40, 257, 8)]
PATCHED_0517 = ["patched", pytest.param("pristine", marks=SHOWS_THE_BUG)]
LAYOUTS = {  # besides the shipped configs: slots whose candidates do not shrink with bs (a review's case)
    "gap": {"1": [1, 3, 7], "16": [1, 3], "64": [3, 7]},
    "gap48": {"1": [1, 3, 7], "16": [1, 3], "48": [3, 7]},
    "unrouted": {"1": [1, 2, 3], "128": [1, 3, 7]},  # steps 7 in a slot no captured bs reaches
    "small-first": {"4": [2, 3, 5], "16": [3]},  # bs 1-3 route to the smallest slot
}
SHIPPED = ["adaptive-ks.json", "adaptive-ks-off.json", "adaptive-ks-rows256.json", "adaptive-ks-bs256.json",
           "adaptive-throughput.json"]


def server_args(config: Path | str | None, adaptive: bool = True, launch_k: int = 4, widest: int = 8,
                graph_bs: list[int] = GRAPH_BS) -> Any:
    return SimpleNamespace(speculative_adaptive=adaptive, speculative_adaptive_config=None if config is None
                           else str(config), speculative_num_draft_tokens=launch_k,
                           max_speculative_num_draft_tokens=widest if adaptive else launch_k,
                           cuda_graph_config=SimpleNamespace(decode=SimpleNamespace(bs=list(graph_bs))))


def config_path(tmp_path: Path, name: str) -> Path:
    if name in LAYOUTS:
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"policy": "throughput",
                                    **{s: {"candidate_steps": c} for s, c in LAYOUTS[name].items()}}))
        return path
    return CONFIGS / name


@pytest.fixture
def asp(trees, monkeypatch) -> Any:
    monkeypatch.delenv("SGLANG_SPEC_ADAPTIVE_POLICY", raising=False)
    return TreeImporter.module(trees.patched, MODULE)


def captured(tree: Path, graph_bs: list[int], pruned: list[int] | None, max_requests: int) -> list[int]:
    """The batch sizes a runner captures: 0.5.17's own get_batch_sizes_to_capture, with the exec bag's pruned
    list (None at start-up, a state's cuda_graph_bs_for_step while it is built), the request pool's size, no
    alignment constraint and no torch.compile."""
    fn = load_defs(source(tree, BASE_RUNNER), ["get_batch_sizes_to_capture"], extra={
        "get_exec": lambda: SimpleNamespace(graph=SimpleNamespace(cuda_graph_bs_decode=pruned)),
        "get_cuda_graph_batch_size_alignment": lambda args: 1,
        "get_cuda_graph_max_batch_size": lambda args, n: n,
        "get_flags": lambda: SimpleNamespace(capture=SimpleNamespace(enable_torch_compile=False)),
    })["get_batch_sizes_to_capture"]
    args = SimpleNamespace(cuda_graph_config=SimpleNamespace(decode=SimpleNamespace(bs=list(graph_bs))),
                           cuda_graph_bs_decode=None, enable_two_batch_overlap=False, torch_compile_max_bs=0)
    return fn(SimpleNamespace(server_args=args, req_to_token_pool=SimpleNamespace(size=max_requests)))[0]


def rows_captured(tree: Path, asp: Any, args: Any, max_requests: int) -> int:
    """The widest graph the states capture: the start-up state unpruned, each other candidate on the batch
    sizes ``AdaptiveController.init_states`` gives it (``cuda_graph_bs_for_step`` over the configured list)."""
    graph_bs = args.cuda_graph_config.decode.bs
    params = asp.AdaptiveSpeculativeParams(initial_steps=args.speculative_num_draft_tokens - 1,
                                           cfg_path=args.speculative_adaptive_config)
    params.set_cuda_graph_bs(graph_bs)
    rows = args.speculative_num_draft_tokens * max(captured(tree, graph_bs, None, max_requests))
    for steps in params.candidate_steps:
        state_bs = captured(tree, graph_bs, params.cuda_graph_bs_for_step(steps), max_requests)
        rows = max(rows, (steps + 1) * max(state_bs))
    return rows


@pytest.mark.parametrize("name", SHIPPED + list(LAYOUTS))
@pytest.mark.parametrize("graph_bs", [GRAPH_BS, GRAPH_BS_256], ids=["to64", "to256"])
@pytest.mark.parametrize("max_requests", [40, 48, 64, 512])
def test_the_bound_is_the_widest_graph_the_states_capture(trees, asp, tmp_path: Path, name: str,
                                                          graph_bs: list[int], max_requests: int) -> None:
    """Exact, not just an upper bound: with the request pool below the largest configured bs (EAGLE's default
    48 requests against graphs to 256) a state whose batch sizes run past it also captures the pool's size,
    whatever that size's own slot lists (a first form of the bound missed that: 192 rows against 384 in "gap")."""
    args = server_args(config_path(tmp_path, name), graph_bs=graph_bs)
    max_bs = max(captured(trees.patched, graph_bs, None, max_requests))
    assert asp.max_graph_rows(args, graph_bs, max_bs) == rows_captured(trees.patched, asp, args, max_requests)


def test_the_row_held_config_needs_fixed_k_4s_rows(asp) -> None:
    for name, rows in (("adaptive-ks-rows256.json", 256), ("adaptive-ks.json", 512)):
        assert asp.max_graph_rows(server_args(CONFIGS / name), GRAPH_BS, 64) == rows


def test_the_bs256_config_keeps_every_graph_within_512_rows(trees, asp) -> None:
    """``adaptive-ks-bs256.json`` launched at K 2 with graphs and requests to bs 256 (``test/gpu/queue/s37d.sh``):
    K 2 to bs 256, K 3 / 4 to bs 128, K 6 / 8 to bs 64, so no graph is wider than issue 12's 512-token budget;
    launched at K 4 the start-up state alone would capture 4 x 256 rows."""
    for launch_k, rows in ((2, 512), (4, 1024)):
        args = server_args(CONFIGS / "adaptive-ks-bs256.json", launch_k=launch_k, graph_bs=GRAPH_BS_256)
        assert rows_captured(trees.patched, asp, args, 256) == rows
        assert asp.max_graph_rows(args, GRAPH_BS_256, 256) == rows


def test_no_bound_without_adaptive_speculation_or_graphs(asp) -> None:
    assert asp.max_graph_rows(server_args(None, adaptive=False), GRAPH_BS, 64) is None
    assert asp.max_graph_rows(server_args(CONFIGS / "adaptive-ks.json"), None, 64) is None
    assert asp.max_graph_rows(server_args(CONFIGS / "adaptive-ks.json"), [], 64) is None


class FakeRunner:
    """What ``ModelRunner.max_decode_logits_rows`` reads."""

    def __init__(self, args: Any) -> None:
        self.server_args = args

    def decode_num_tokens_per_req(self, *, num_draft_tokens: int | None = None) -> int:
        return self.server_args.speculative_num_draft_tokens if num_draft_tokens is None else num_draft_tokens


@pytest.mark.parametrize("tree_name, name, graph_bs, max_requests", [
    ("patched", "adaptive-ks-rows256.json", GRAPH_BS, 64),
    ("patched", "gap", GRAPH_BS_256, 48),
    # 0.5.17 sizes for the start-up width only (patch 0014's bug), which matches the row-held config by chance
    pytest.param("pristine", "gap", GRAPH_BS_256, 48, marks=SHOWS_THE_BUG),
])
def test_the_shared_logits_buffer_holds_the_rows_the_states_capture(trees, tmp_path: Path, tree_name: str,
                                                                    name: str, graph_bs: list[int],
                                                                    max_requests: int) -> None:
    tree, patched = trees.get(tree_name), trees.patched
    TreeImporter.use(tree)
    start_bs = captured(patched, graph_bs, None, max_requests)
    rows = load_defs(source(tree, MODEL_RUNNER), ["ModelRunner.max_decode_logits_rows"],
                     extra={"get_batch_sizes_to_capture": lambda runner, width=1: (start_bs, [])})
    logits_rows = rows["ModelRunner.max_decode_logits_rows"]
    args = server_args(config_path(tmp_path, name), graph_bs=graph_bs)
    asp = TreeImporter.module(patched, MODULE)
    assert logits_rows(FakeRunner(args)) == rows_captured(patched, asp, args, max_requests)
    TreeImporter.use(tree)
    assert logits_rows(FakeRunner(server_args(None, adaptive=False))) == 4 * max(start_bs)
