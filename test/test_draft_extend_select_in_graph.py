"""Patch 0018: the draft extend's last accepted rows are picked inside its CUDA graph.

With ``SGLANG_ENABLE_DRAFT_EXTEND_SELECT_IN_GRAPH`` on, the draft-extend runner's captured forward
gathers row ``i * K + num_accept_tokens[i] - 1`` of the logits and hidden states and takes the
argmax there (``_select_last_accepted``); ``EagleDraftWorker._draft_extend_for_decode`` then uses
that selection instead of its eager arange/gather/argmax. Both paths must give the next draft input
the same ``topk_p``, ``topk_index`` and ``hidden_states`` for every accept length, with the padded
rows of a padded graph batch cut off. The runner turns the selection on only for greedy top-1
drafting without rejection sampling, DSA seeding or gathered DP buffers.

The worker method and the runner's methods run on CPU tensors from the patched tree; the graph
replay is a stand-in that does what ``execute`` does with the captured selection (cut to the real
batch size) and returns the full rows as ``LogitsProcessorOutput``.

Upstream port 0021 (0.5.23, the tests named ``..._0523``): 0.5.23 already gathers the last accepted
rows inside the graph, before the LM head (the worker passes ``select_index`` to ``execute``), so the
port moves only the top-1: the captured forward takes the argmax of the selected rows
(``_take_top1``), ``execute`` exposes it cut to the real batch as ``last_top1``
(``_replayed_top1``, ``topk_p`` from a constant ones buffer) and the worker uses it instead of its
eager ``argmax`` / ``ones_like``. On the pristine 0.5.23 tree the worker still launches both after
a replay (the launch-count test fails there).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from sglang_trees import PATCHED, SHOWS_THE_BUG, load_defs, source
from sglang_trees import trees  # noqa: F401 (a fixture)

WORKER = "sglang.srt.speculative.eagle_worker_v2"
RUNNER = "sglang.srt.speculative.eagle_draft_extend_cuda_graph_runner"
K, MAX_BS, VOCAB, HIDDEN = 4, 8, 13, 6
RAW_BS, PADDED_BS = 3, 4


RUNNER_CLASS = "EAGLEDraftExtendCudaGraphRunner"


def _runner_defs(tree) -> dict[str, Any]:
    # DraftExtendSelection is a plain dataclass of three fields; a namespace stands in for it here.
    names = [f"{RUNNER_CLASS}._select_last_accepted"]
    defs = load_defs(source(tree, RUNNER), names,
                     extra={"LogitsProcessorOutput": SimpleNamespace, "DraftExtendSelection": SimpleNamespace})
    return {name.rpartition(".")[2]: value for name, value in defs.items()}


def _worker_stand_ins() -> dict[str, Any]:
    """What ``_draft_extend_for_decode`` needs besides the tensors, on both trees."""
    return {
        "EagleDraftExtendInput": lambda **fields: SimpleNamespace(**fields),
        "prepare_for_draft_extend": lambda draft_extend_input, *args, **kwargs: SimpleNamespace(
            spec_info=draft_extend_input, forward_mode=SimpleNamespace(is_idle=lambda: False)),
        "context_tuple": lambda *ctxs: contextlib.nullcontext(),
        "graph_fallback": SimpleNamespace(note_runner=lambda *args: None),
        "maybe_detect_nan": lambda *args: None,
        "maybe_detect_inf": lambda *args: None,
        "get_spec": lambda: SimpleNamespace(speculative_use_rejection_sampling=False),
        "_is_hip": False,
        # the top-k > 1 and rejection-sampling branches, never reached at topk 1 without rejection sampling
        "fast_topk": None, "renorm_draft_probs": None, "sample_draft_proposal": None,
    }


def _worker_method(tree):
    name = "EagleDraftWorker._draft_extend_for_decode"
    return load_defs(source(tree, WORKER), [name], extra=_worker_stand_ins())[name]


class GraphStandIn:
    """The draft-extend runner as the worker sees it: ``can_run_graph``, ``execute``, ``last_selection``.

    ``execute`` fills the num_accept_tokens buffer as the real replay does (padded rows get K), runs
    the patched ``_select_last_accepted`` on the "graph's" full output when the selection is on, and
    cuts both to the real batch, as ``EAGLEDraftExtendCudaGraphRunner.execute`` does.
    """

    def __init__(self, defs: dict[str, Any], logits: torch.Tensor, hidden: torch.Tensor, select: bool) -> None:
        self.defs, self.logits, self.hidden, self.select = defs, logits, hidden, select
        self.row_starts = torch.arange(0, MAX_BS * K, K, dtype=torch.int64)
        self.ones_topk_p = torch.ones((MAX_BS, 1), dtype=torch.float32)
        self.last_selection = None
        self.replays = 0

    def can_run_graph(self, forward_batch: Any) -> bool:
        return True

    def execute(self, forward_batch: Any) -> SimpleNamespace:
        self.replays += 1
        raw_bs = forward_batch.spec_info.num_accept_tokens.shape[0]
        num_accept_tokens = torch.full((PADDED_BS,), K, dtype=torch.int32)
        num_accept_tokens[:raw_bs] = forward_batch.spec_info.num_accept_tokens
        graph_out = SimpleNamespace(next_token_logits=self.logits, hidden_states=self.hidden)
        self.last_selection = None
        if self.select:
            sel = self.defs["_select_last_accepted"](self, graph_out, num_accept_tokens)
            self.last_selection = SimpleNamespace(
                topk_p=sel.topk_p[:raw_bs], topk_index=sel.topk_index[:raw_bs],
                hidden_states=sel.hidden_states[:raw_bs])
        return SimpleNamespace(next_token_logits=self.logits[:raw_bs * K], hidden_states=self.hidden[:raw_bs * K])


def _run_worker(tree, accept_lens: list[int], select: bool) -> tuple[SimpleNamespace, GraphStandIn]:
    gen = torch.Generator().manual_seed(sum(accept_lens) + 17 * len(accept_lens))
    logits = torch.randn((PADDED_BS * K, VOCAB), generator=gen)
    hidden = torch.randn((PADDED_BS * K, HIDDEN), generator=gen)
    runner = GraphStandIn(_runner_defs(tree), logits, hidden, select)
    worker = SimpleNamespace(
        speculative_num_draft_tokens=K, device="cpu", plan_stream_ctx=contextlib.nullcontext(), plan_stream=None,
        draft_runner=SimpleNamespace(canary_manager=None), cuda_graph_runner_for_draft_extend=runner,
        seed_dsa_topk_from_draft_extend=False, topk=1,
        flush_deferred_kv=lambda: None)  # patch 0038's flush (test_deferred_draft_kv.py); a no-op when off
    next_draft_input = SimpleNamespace()
    batch = SimpleNamespace(seq_lens=torch.zeros(RAW_BS, dtype=torch.int64), sampling_info=None)
    batch_result = SimpleNamespace(
        logits_output=SimpleNamespace(hidden_states=hidden[:RAW_BS * K]),
        accept_lens=torch.tensor(accept_lens, dtype=torch.int32),
        next_token_ids=torch.zeros(RAW_BS * K, dtype=torch.int32), next_draft_input=next_draft_input)
    _worker_method(tree)(worker, batch, batch_result)
    return next_draft_input, runner


ACCEPTS = [[1, 1, 1], [K, K, K], [1, K, 2], [3, 2, K]]


def _assert_both_are_the_last_accepted_rows_top1(eager: Any, in_graph: Any, graph_runner: Any,
                                                 accept_lens: list[int]) -> None:
    """Both next draft inputs hold the argmax and hidden state of each request's last accepted row."""
    rows = [i * K + a - 1 for i, a in enumerate(accept_lens)]
    expected_index = graph_runner.logits[rows].argmax(dim=-1, keepdim=True)
    for got in (eager, in_graph):
        assert torch.equal(got.topk_index, expected_index)
        assert got.topk_index.shape == (RAW_BS, 1) and got.topk_index.dtype == torch.int64
        assert torch.equal(got.topk_p, torch.ones((RAW_BS, 1), dtype=torch.float32))
        assert torch.equal(got.hidden_states, graph_runner.hidden[rows])


@pytest.mark.parametrize("accept_lens", ACCEPTS, ids=lambda a: "-".join(map(str, a)))
def test_the_in_graph_selection_gives_the_eager_next_draft_input(trees, accept_lens: list[int]) -> None:
    tree = trees.get("patched")
    eager, eager_runner = _run_worker(tree, accept_lens, select=False)
    in_graph, graph_runner = _run_worker(tree, accept_lens, select=True)
    assert eager_runner.replays == graph_runner.replays == 1
    assert graph_runner.last_selection is not None and eager_runner.last_selection is None
    _assert_both_are_the_last_accepted_rows_top1(eager, in_graph, graph_runner, accept_lens)


def test_padded_rows_select_inside_their_own_request(trees) -> None:
    """A padded request (num_accept_tokens = K) picks its own last row, never a neighbour's."""
    defs = _runner_defs(trees.get("patched"))
    stand_in = GraphStandIn(defs, torch.arange(PADDED_BS * K * 2.0).view(PADDED_BS * K, 2),
                            torch.arange(PADDED_BS * K * 1.0).view(-1, 1), select=True)
    out = SimpleNamespace(next_token_logits=stand_in.logits, hidden_states=stand_in.hidden)
    sel = defs["_select_last_accepted"](stand_in, out, torch.tensor([2, 1, K, K], dtype=torch.int32))
    assert sel.hidden_states.view(-1).tolist() == [1.0, 4.0, 11.0, 15.0]
    assert sel.topk_p.shape == (PADDED_BS, 1)


WIDTH_BUFFERS = ("extend_seq_lens", "num_correct_drafts", "num_accept_tokens")


def test_a_narrower_runner_captures_with_its_own_width_in_the_shared_buffers(trees) -> None:
    """``--speculative-adaptive`` builds one draft-extend runner per width. The input-buffer pool shares the
    [max_bs] width-valued buffers by size, so a width-1 runner (the steps-0 state) sees the startup runner's
    width there; its capture's row pick then indexed past its logits (a device-side assert at start-up on an
    H200). Each runner must refill them with its own width before it captures."""
    tree = trees.get("patched")
    share = load_defs(source(tree, "sglang.srt.model_executor.input_buffers"), ["share_input_buffer"],
                      extra={"_forward_input_buffer_pool": {}})["share_input_buffer"]

    def pooled(width: int) -> SimpleNamespace:
        return SimpleNamespace(**{n: share(n, torch.full((MAX_BS,), width, dtype=torch.int32)) for n in WIDTH_BUFFERS})

    startup = pooled(K)
    narrow = SimpleNamespace(buffers=pooled(1), captured_req_width=1,
                             row_starts=torch.arange(MAX_BS, dtype=torch.int64),
                             ones_topk_p=torch.ones((MAX_BS, 1), dtype=torch.float32))
    assert narrow.buffers.num_accept_tokens.tolist() == [K] * MAX_BS  # the pool's aliasing, as on the GPU
    defs = load_defs(source(tree, RUNNER), [f"{RUNNER_CLASS}._fill_own_width", f"{RUNNER_CLASS}._select_last_accepted"],
                     extra={"LogitsProcessorOutput": SimpleNamespace, "DraftExtendSelection": SimpleNamespace})
    defs[f"{RUNNER_CLASS}._fill_own_width"](narrow)
    for name in WIDTH_BUFFERS:
        assert getattr(narrow.buffers, name).tolist() == [1] * MAX_BS
    assert startup.num_accept_tokens.data_ptr() == narrow.buffers.num_accept_tokens.data_ptr()

    hidden = torch.randn((MAX_BS, HIDDEN), generator=torch.Generator().manual_seed(5))
    out = SimpleNamespace(next_token_logits=torch.randn((MAX_BS, VOCAB)), hidden_states=hidden)
    sel = defs[f"{RUNNER_CLASS}._select_last_accepted"](narrow, out, narrow.buffers.num_accept_tokens)
    assert torch.equal(sel.hidden_states, hidden)  # row i of a width-1 graph is request i's only token

    # ... and the runner does it between sharing the buffers and capturing.
    init = source(tree, RUNNER).read_text().split(f"class {RUNNER_CLASS}", 1)[1]
    shared, filled = init.index("self.buffers.share_buffers()"), init.index("self._fill_own_width()")
    assert shared < filled < init.index("self.capture()")


def _conditions(**changes: Any) -> SimpleNamespace:
    base = dict(switch=True, topk=1, rejection=False, hip=False, dsa=False, gathered=False)
    base.update(changes)
    return SimpleNamespace(**base)


# (conditions changed from greedy top-1 drafting, on for 0.5.17's selection, on for 0.5.23's top-1): 0.5.23
# gathers the rows (and the DSA seed) itself, so its top-1 does not depend on either.
CONDITIONS = [({}, True, True), ({"switch": False}, False, False), ({"topk": 4}, False, False),
              ({"rejection": True}, False, False), ({"hip": True}, False, False), ({"dsa": True}, False, True),
              ({"gathered": True}, False, True)]
CONDITION_IDS = ["greedy-topk1", "switch-off", "topk4", "rejection-sampling", "rocm", "dsa-seed", "dp-gathered"]


def _decide(tree: Path, method: str, c: SimpleNamespace) -> bool:
    """The runner's ``method`` (a switch check) under the conditions ``c``, on ``tree``'s runner file."""
    extra = {
        "envs": SimpleNamespace(SGLANG_ENABLE_DRAFT_EXTEND_SELECT_IN_GRAPH=SimpleNamespace(get=lambda: c.switch)),
        "get_spec": lambda: SimpleNamespace(speculative_use_rejection_sampling=c.rejection),
        "is_hip": lambda: c.hip,
    }
    name = f"{RUNNER_CLASS}.{method}"
    decide = load_defs(source(tree, RUNNER), [name], extra=extra)[name]
    runner = SimpleNamespace(eagle_worker=SimpleNamespace(topk=c.topk, seed_dsa_topk_from_draft_extend=c.dsa),
                             require_gathered_buffer=c.gathered)
    return bool(decide(runner))


@pytest.mark.parametrize("changes, expected, _", CONDITIONS, ids=CONDITION_IDS)
def test_the_selection_is_on_only_for_greedy_top1_drafting(trees, changes: dict[str, Any], expected: bool,
                                                          _: bool) -> None:
    assert _decide(trees.get("patched"), "_can_select_in_graph", _conditions(**changes)) is expected


@pytest.mark.parametrize("tree_name", PATCHED)
def test_the_switch_defaults_on_and_turns_off(trees, monkeypatch, tree_name: str) -> None:
    """On by default since its GPU parity and speed runs (benchmark/results/*-draft-side-in-graph);
    the 0.5.23 port keeps the default of the 0.5.17 patch, where it was measured."""
    from sglang_trees import TreeImporter

    monkeypatch.delenv("SGLANG_ENABLE_DRAFT_EXTEND_SELECT_IN_GRAPH", raising=False)
    envs = TreeImporter.module(trees.get(tree_name), "sglang.srt.environ").envs
    assert envs.SGLANG_ENABLE_DRAFT_EXTEND_SELECT_IN_GRAPH.get() is True
    monkeypatch.setenv("SGLANG_ENABLE_DRAFT_EXTEND_SELECT_IN_GRAPH", "false")
    assert envs.SGLANG_ENABLE_DRAFT_EXTEND_SELECT_IN_GRAPH.get() is False



# --- upstream port 0021 (0.5.23): only the top-1 moves into the graph --------------------------------


def _upstream_runner_defs(tree) -> dict[str, Any]:
    names = [f"{RUNNER_CLASS}._take_top1", f"{RUNNER_CLASS}._replayed_top1"]
    defs = load_defs(source(tree, RUNNER), names, extra={"DraftExtendTop1": SimpleNamespace})
    return {name.rpartition(".")[2]: value for name, value in defs.items()}


class CountingTorch:
    """``torch`` for the worker method, counting the eager top-1 launches it makes."""

    def __init__(self) -> None:
        self.launches: list[str] = []

    def __getattr__(self, name: str) -> Any:
        value = getattr(torch, name)
        if name not in ("argmax", "ones_like"):
            return value

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.launches.append(name)
            return value(*args, **kwargs)

        return counted


def _upstream_worker_method(tree, counting: CountingTorch):
    # 0.5.23's ROCm top-1 branch is never reached here either
    extra = {**_worker_stand_ins(), "torch": counting, "draft_topk1_argmax_only": None}
    name = "EagleDraftWorker._draft_extend_for_decode"
    return load_defs(source(tree, WORKER), [name], extra=extra)[name]


class UpstreamGraphStandIn:
    """0.5.23's draft-extend runner as the worker sees it (``can_run_graph``, ``execute(forward_batch,
    select_index)``, ``last_top1``). The "graph" gathers the ``select_index`` rows (padded requests
    point at their own last row, as the buffer's initial values do) before its identity "LM head",
    and returns them cut to the real batch with the hidden states cloned, as ``execute`` does.

    ``top1``: ``"tree"`` takes the top-1 with the tree's ``_take_top1`` / ``_replayed_top1`` as the
    captured forward and ``execute`` do; ``"given"`` hands the worker a top-1 computed here (the
    worker's side alone, for the pristine tree, whose runner has no such methods); ``None`` none.
    """

    def __init__(self, tree, logits: torch.Tensor, hidden: torch.Tensor, top1: str | None) -> None:
        self.logits, self.hidden, self.top1 = logits, hidden, top1
        self.defs = _upstream_runner_defs(tree) if top1 == "tree" else {}
        self.ones_topk_p = torch.ones((MAX_BS, 1), dtype=torch.float32)
        self._top1_index: dict[int, torch.Tensor] = {}
        self.last_top1 = None
        self.replays = 0

    def can_run_graph(self, forward_batch: Any) -> bool:
        return True

    def execute(self, forward_batch: Any, select_index: torch.Tensor) -> SimpleNamespace:
        self.replays += 1
        raw_bs = select_index.shape[0]
        rows = torch.arange(PADDED_BS, dtype=torch.int64) * K + K - 1
        rows[:raw_bs] = select_index
        out = SimpleNamespace(next_token_logits=self.logits[rows], hidden_states=self.hidden[rows])
        self.last_top1 = None
        if self.top1 == "tree":
            self._top1_index[PADDED_BS] = self.defs["_take_top1"](self, out)
            self.last_top1 = self.defs["_replayed_top1"](self, PADDED_BS, raw_bs)
        elif self.top1 == "given":
            self.last_top1 = SimpleNamespace(
                topk_p=self.ones_topk_p[:raw_bs],
                topk_index=out.next_token_logits.argmax(dim=-1, keepdim=True)[:raw_bs])
        return SimpleNamespace(next_token_logits=out.next_token_logits[:raw_bs],
                               hidden_states=out.hidden_states[:raw_bs].clone())


def _run_upstream_worker(tree, accept_lens: list[int], top1: str | None):
    gen = torch.Generator().manual_seed(sum(accept_lens) + 17 * len(accept_lens))
    logits = torch.randn((PADDED_BS * K, VOCAB), generator=gen)
    hidden = torch.randn((PADDED_BS * K, HIDDEN), generator=gen)
    runner = UpstreamGraphStandIn(tree, logits, hidden, top1)
    counting = CountingTorch()
    worker = SimpleNamespace(
        speculative_num_draft_tokens=K, device="cpu", plan_stream_ctx=contextlib.nullcontext(), plan_stream=None,
        draft_runner=SimpleNamespace(canary_manager=None), cuda_graph_runner_for_draft_extend=runner,
        seed_dsa_topk_from_draft_extend=False, topk=1)
    accept = torch.tensor(accept_lens, dtype=torch.int32)
    select_index = torch.arange(RAW_BS, dtype=torch.int64) * K + accept - 1
    next_draft_input = SimpleNamespace()
    batch = SimpleNamespace(seq_lens=torch.zeros(RAW_BS, dtype=torch.int64), sampling_info=None)
    batch_result = SimpleNamespace(
        prepared_draft_extend_inputs=(accept - 1, select_index, torch.zeros(RAW_BS * K, dtype=torch.int64)),
        logits_output=SimpleNamespace(hidden_states=hidden[:RAW_BS * K]), accept_lens=accept,
        new_seq_lens=None, next_draft_input=next_draft_input)
    _upstream_worker_method(tree, counting)(worker, batch, batch_result)
    return next_draft_input, runner, counting


@pytest.mark.parametrize("accept_lens", ACCEPTS, ids=lambda a: "-".join(map(str, a)))
def test_the_in_graph_top1_gives_the_eager_next_draft_input_0523(trees, accept_lens: list[int]) -> None:
    tree = trees.get("upstream")
    eager, eager_runner, eager_torch = _run_upstream_worker(tree, accept_lens, top1=None)
    in_graph, graph_runner, graph_torch = _run_upstream_worker(tree, accept_lens, top1="tree")
    assert eager_runner.replays == graph_runner.replays == 1
    assert graph_runner.last_top1 is not None and eager_runner.last_top1 is None
    assert eager_torch.launches == ["argmax", "ones_like"] and graph_torch.launches == []
    _assert_both_are_the_last_accepted_rows_top1(eager, in_graph, graph_runner, accept_lens)


@pytest.mark.parametrize("tree_name", ["upstream", pytest.param("upstream_pristine", marks=SHOWS_THE_BUG)])
def test_no_eager_top1_after_a_replay_that_took_it_0523(trees, tree_name: str) -> None:
    """The worker passes the graph's top-1 on and launches no argmax or ones_like; 0.5.23 launches both."""
    next_draft_input, runner, counting = _run_upstream_worker(trees.get(tree_name), [1, K, 2], top1="given")
    assert counting.launches == []
    assert next_draft_input.topk_index is runner.last_top1.topk_index
    assert next_draft_input.topk_p is runner.last_top1.topk_p


def test_the_top1_is_cut_to_the_real_batch_and_absent_without_a_capture_0523(trees) -> None:
    defs = _upstream_runner_defs(trees.get("upstream"))
    stand_in = SimpleNamespace(ones_topk_p=torch.ones((MAX_BS, 1)), _top1_index={})
    logits = torch.tensor([[0.0, 2.0, 1.0], [5.0, 0.0, 1.0], [0.0, 1.0, 3.0], [9.0, 0.0, 0.0]])
    stand_in._top1_index[PADDED_BS] = defs["_take_top1"](stand_in, SimpleNamespace(next_token_logits=logits))
    top1 = defs["_replayed_top1"](stand_in, PADDED_BS, RAW_BS)
    assert top1.topk_index.tolist() == [[1], [0], [2]]
    assert top1.topk_p.shape == (RAW_BS, 1) and bool((top1.topk_p == 1).all())
    assert defs["_replayed_top1"](stand_in, MAX_BS, RAW_BS) is None  # no top-1 captured for that bs


@pytest.mark.parametrize("changes, _, expected", CONDITIONS, ids=CONDITION_IDS)
def test_the_top1_is_taken_only_for_greedy_top1_drafting_0523(trees, changes: dict[str, Any], _: bool,
                                                              expected: bool) -> None:
    assert _decide(trees.get("upstream"), "_can_take_top1_in_graph", _conditions(**changes)) is expected
