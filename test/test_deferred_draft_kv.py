"""Patch 0038 (0.5.17 only): the draft's steps-0 KV rows written for many cycles in one pass, when asked.

Session 30 measured a steps-0 cycle (0034's KV-only extend + 0037's steps 0 as a decode step) as GPU-bound, its
whole gap to plain decode being the KV-only extend's GPU time (0.134 ms at bs 1 on kimi16,
``benchmark/results/20261204-1417-h200-tp1-kimi16-steps0-host-samples/``). With
``SGLANG_SPEC_KV_ONLY_DEFER_CYCLES=N`` the worker keeps each steps-0 cycle's inputs in a ``DeferredDraftKV`` and
writes them with one ``forward_draft_kv_only`` once N cycles are kept, when the batch's requests change, or before
any other draft forward. Here, on CPU with the patched tree's code: the log itself, the same KV pool contents as
writing every cycle (a tiny EAGLE-3 draft, requests leaving and slots reused), the worker's keep and read-done
event, and the flush at the head of every other draft forward. The release has none of it (its tests xfail).
"""

from __future__ import annotations

import ast
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from sglang_trees import SHOWS_THE_BUG, TreeImporter, find_def
from sglang_trees import tree_defs as patched_defs
from sglang_trees import trees  # noqa: F401 (a fixture)
from test_steps0_kv_only_extend import AUX, BS, H, HD, KV_HEADS, VOCAB, DraftWorker, draft_worker_defs, tiny_draft

SWITCH = "SGLANG_SPEC_KV_ONLY_DEFER_CYCLES"
LOG = "sglang.srt.speculative.deferred_draft_kv"
MODEL = "sglang.srt.models.llama_eagle3"
WORKER = "sglang.srt.speculative.eagle_worker_v2"
TREES = ["patched", pytest.param("pristine", marks=SHOWS_THE_BUG)]


def log_class(tree: Any) -> type:
    path = tree / "python" / "sglang" / "srt" / "speculative" / "deferred_draft_kv.py"
    assert path.exists(), "the release has no deferred_draft_kv"
    return TreeImporter.module(tree, LOG).DeferredDraftKV


class Writes:
    """A ``write`` callback recording (input_ids, positions, hidden_states, out_cache_loc) clones per call."""

    def __init__(self) -> None:
        self.calls: list[tuple[torch.Tensor, ...]] = []

    def __call__(self, *rows: torch.Tensor) -> None:
        self.calls.append(tuple(r.clone() for r in rows))


def cycle(step: int, bs: int = BS, width: int = AUX * H) -> tuple[torch.Tensor, ...]:
    """One steps-0 cycle's (input_ids, positions, out_cache_loc, hidden_states) for ``bs`` requests."""
    gen = torch.Generator().manual_seed(100 + step)
    return (torch.randint(0, VOCAB, (bs,), generator=gen), torch.arange(bs, dtype=torch.int64) * 50 + step,
            torch.arange(bs, dtype=torch.int64) * 1000 + step, torch.randn(bs, width, generator=gen))


# --- the switch ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("tree_name", TREES)
def test_the_switch_exists_and_defaults_off(trees, monkeypatch, tree_name: str) -> None:
    monkeypatch.delenv(SWITCH, raising=False)
    envs = TreeImporter.module(trees.get(tree_name), "sglang.srt.environ").envs
    assert hasattr(envs, SWITCH)
    assert getattr(envs, SWITCH).get() == 0
    monkeypatch.setenv(SWITCH, "16")
    assert getattr(envs, SWITCH).get() == 16


@pytest.mark.parametrize("tree_name", TREES)
def test_no_log_when_off_or_where_the_pool_is_touched_out_of_order(trees, tree_name: str) -> None:
    """Session 30's review: a PD decode server's KV arrives by transfer, the hierarchical cache loads and backs up
    the pool on its own streams, and DP attention ranks would key their logs apart while the write all-reduces."""
    tree = trees.get(tree_name)
    log_class(tree)
    make = TreeImporter.module(tree, LOG).deferred_draft_kv
    plain = dict(disaggregation_mode="null", enable_hierarchical_cache=False, enable_dp_attention=False)
    assert make(0, True, SimpleNamespace(**plain)) is None
    assert make(16, False, SimpleNamespace(**plain)) is None  # without 0034's KV-only extend there is nothing to keep
    for change in ({"disaggregation_mode": "decode"}, {"enable_hierarchical_cache": True},
                   {"enable_dp_attention": True}):
        assert make(16, True, SimpleNamespace(**{**plain, **change})) is None, change
    for mode in ("null", "prefill"):
        log = make(16, True, SimpleNamespace(**{**plain, "disaggregation_mode": mode}))
        assert log is not None and log.max_cycles == 16 and log.rows == 0


# --- the log ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tree_name", TREES)
def test_rows_of_n_cycles_are_written_once_in_order(trees, tree_name: str) -> None:
    log, write = log_class(trees.get(tree_name))(max_cycles=3), Writes()
    cycles = [cycle(step) for step in range(7)]
    for step, (ids, pos, loc, hidden) in enumerate(cycles):
        log.keep("reqs", ids, pos, loc, hidden, write)
        ids.fill_(-1), hidden.zero_()  # the sources are reused buffers: the log keeps copies
        assert len(write.calls) == (step + 1) // 3
    assert log.rows == BS and log.cycles == 1  # the seventh cycle waits
    for n, (ids, pos, hidden, loc) in enumerate(write.calls):
        fresh = [cycle(step) for step in range(3 * n, 3 * n + 3)]
        assert torch.equal(ids, torch.cat([c[0] for c in fresh]))
        assert torch.equal(pos, torch.cat([c[1] for c in fresh]))
        assert torch.equal(loc, torch.cat([c[2] for c in fresh]))
        assert torch.equal(hidden, torch.cat([c[3] for c in fresh]))
    log.flush(write)
    assert len(write.calls) == 3 and write.calls[2][0].shape == (BS,) and log.rows == 0
    log.flush(write)  # nothing kept: nothing written
    assert len(write.calls) == 3


@pytest.mark.parametrize("tree_name", TREES)
def test_a_change_of_requests_writes_the_kept_rows_first(trees, tree_name: str) -> None:
    """A request that leaves frees its slots: the rows kept for the old set are written before the new set's."""
    log, write = log_class(trees.get(tree_name))(max_cycles=8), Writes()
    log.keep((4, 7, 9), *cycle(0), write)
    log.keep((4, 7, 9), *cycle(1), write)
    assert write.calls == []
    log.keep((4, 9), *cycle(2, bs=2), write)
    ((ids, pos, hidden, loc),) = write.calls
    assert torch.equal(loc, torch.cat([cycle(0)[2], cycle(1)[2]]))
    assert log.rows == 2 and log.key == (4, 9)
    log.keep((4, 9, 11), *cycle(3, bs=4), write)  # more rows than before: the log grows
    assert len(write.calls) == 2 and torch.equal(write.calls[1][3], cycle(2, bs=2)[2])
    for step in range(4, 11):
        log.keep((4, 9, 11), *cycle(step, bs=4), write)
    assert len(write.calls) == 3 and write.calls[2][0].shape == (8 * 4,)


@pytest.mark.parametrize("tree_name", TREES)
def test_another_width_or_dtype_writes_the_kept_rows_and_reallocates(trees, tree_name: str) -> None:
    log, write = log_class(trees.get(tree_name))(max_cycles=4), Writes()
    log.keep("reqs", *cycle(0), write)
    ids, pos, loc, hidden = cycle(1, width=AUX * H + 8)
    log.keep("reqs", ids, pos, loc, hidden, write)
    assert len(write.calls) == 1 and write.calls[0][2].shape == (BS, AUX * H)
    log.keep("reqs", ids, pos, loc, hidden.to(torch.bfloat16), write)
    assert len(write.calls) == 2 and write.calls[1][2].dtype == torch.float32
    log.flush(write)
    assert write.calls[2][2].dtype == torch.bfloat16 and write.calls[2][2].shape == (BS, AUX * H + 8)


# --- the KV pool: deferred writes leave what per-cycle writes leave -----------------------------------


class TensorPool:
    """The draft's KV pool as two tensors; set_kv_buffer writes rows at the slots."""

    def __init__(self, slots: int) -> None:
        self.k = torch.zeros(slots, KV_HEADS, HD)
        self.v = torch.zeros(slots, KV_HEADS, HD)

    def set_kv_buffer(self, layer: Any, loc: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        # One write's rows land in no defined order on the GPU: a slot twice in one write is a race.
        assert loc.unique().numel() == loc.numel(), f"a slot twice in one write: {loc.tolist()}"
        self.k[loc], self.v[loc] = k, v


def kv_writer(tree: Any, seed: int = 3) -> Any:
    names = ["LlamaModel._target_features", "LlamaModel.forward_kv_only"]
    defs = patched_defs(tree, MODEL, names, extra={})
    model, _, _ = tiny_draft(seed=seed)
    model._target_features = lambda h, width: defs[names[0]](model, h, width)
    return lambda ids, pos, hidden, loc, pool: defs[names[1]](model, ids, pos, hidden, loc, pool)


@pytest.mark.parametrize("tree_name", TREES)
def test_the_pool_ends_as_with_a_write_every_cycle(trees, tree_name: str) -> None:
    """Three requests decode at steps 0; one leaves and its slots go to a newcomer (whose prefill, a direct write,
    comes after the owner's flush). Deferred (N 4) and per-cycle writes leave the same pool."""
    tree = trees.get(tree_name)
    forward_kv_only, log = kv_writer(tree), log_class(tree)(max_cycles=4)
    per_cycle, deferred = TensorPool(128), TensorPool(128)
    write = lambda ids, pos, hidden, loc: forward_kv_only(ids, pos, hidden, loc, deferred)  # noqa: E731
    gen = torch.Generator().manual_seed(9)
    reqs = {0: [10, 11], 1: [20], 2: [30, 31, 32]}  # req_pool_idx -> its slots so far
    free = list(range(40, 128))
    for step in range(11):
        if step == 5:  # request 1 leaves; its slots are free again, the last taken first (its kept step-4 row's)
            free = reqs.pop(1)[::-1] + free
        if step == 7:  # a newcomer's prefill takes them: a direct write, after a flush
            log.flush(write)
            slots = [free.pop(0), free.pop(0)]
            ids, hidden = torch.randint(0, VOCAB, (2,), generator=gen), torch.randn(2, AUX * H, generator=gen)
            for pool in (per_cycle, deferred):
                forward_kv_only(ids, torch.tensor([0, 1]), hidden, torch.tensor(slots), pool)
            reqs[3] = slots
        key = tuple(reqs)
        loc = torch.tensor([free.pop(0) for _ in key])
        pos = torch.tensor([len(reqs[r]) for r in key])
        for r, slot in zip(key, loc.tolist()):
            reqs[r].append(slot)
        ids, hidden = torch.randint(0, VOCAB, (len(key),), generator=gen), torch.randn(len(key), AUX * H, generator=gen)
        with torch.no_grad():
            forward_kv_only(ids, pos, hidden, loc, per_cycle)
            log.keep(key, ids, pos, loc, hidden, write)
    log.flush(write)
    torch.testing.assert_close(deferred.k, per_cycle.k, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(deferred.v, per_cycle.v, rtol=1e-6, atol=1e-6)
    assert per_cycle.k[40:].abs().sum() > 0  # the run wrote past the first slots


# --- the worker ---------------------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.kept: list[tuple[Any, ...]] = []
        self.flushes = 0

    def keep(self, key: Any, *rows_and_write: Any) -> None:
        self.kept.append((key, *rows_and_write))

    def flush(self, write: Any) -> None:
        self.flushes += 1


@pytest.mark.parametrize("tree_name", TREES)
def test_the_worker_keeps_the_rows_and_publishes_its_read_done_event(trees, tree_name: str) -> None:
    from test_steps0_kv_only_extend import ReplayRecorder, steps0_batch

    defs = draft_worker_defs(trees.get(tree_name))
    batch, result = steps0_batch()
    batch.reqs = [SimpleNamespace(req_pool_idx=i) for i in (5, 2, 8)]
    graph = ReplayRecorder(max_bs=4)
    worker = DraftWorker(defs, runner=graph)
    worker.device, worker.deferred_kv = "cpu", Recorder()
    worker._write_draft_kv = lambda *rows: worker.calls.append(("write", rows))
    worker.draft_runner.war_fastpath_read_done_event = None
    assert worker.extend(batch, result) is True
    ((key, ids, pos, loc, hidden, write),) = worker.deferred_kv.kept
    assert key == (5, 2, 8) and ids.dtype == torch.int64 and ids.tolist() == [5, 6, 7]
    assert pos.tolist() == [10, 11, 12] and loc is batch.out_cache_loc
    assert hidden is result.logits_output.hidden_states and write is worker._write_draft_kv
    assert graph.calls == [] and worker.calls == []  # no replay, no eager write this cycle
    assert isinstance(worker.draft_runner.war_fastpath_read_done_event, torch.cpu.Event)

    worker.deferred_kv = None  # off: the graph replays as before
    assert worker.extend(batch, result) is True and len(graph.calls) == 1


@pytest.mark.parametrize("tree_name", TREES)
def test_flush_writes_through_the_draft_model(trees, tree_name: str) -> None:
    names = ["EagleDraftWorker._write_draft_kv", "EagleDraftWorker.flush_deferred_kv"]
    defs = patched_defs(trees.get(tree_name), WORKER, names, extra={})
    calls = []
    pool = object()
    worker = SimpleNamespace(draft_runner=SimpleNamespace(
        model=SimpleNamespace(forward_draft_kv_only=lambda *args: calls.append(args)), token_to_kv_pool=pool))
    worker._write_draft_kv = lambda *rows: defs[names[0]](worker, *rows)
    worker.deferred_kv = None
    defs[names[1]](worker)  # off: nothing
    log = log_class(trees.get(tree_name))(max_cycles=4)
    log.keep("reqs", *cycle(0), worker._write_draft_kv)
    worker.deferred_kv = log
    defs[names[1]](worker)
    ((ids, pos, hidden, loc, got_pool),) = calls
    assert torch.equal(loc, cycle(0)[2]) and got_pool is pool and log.rows == 0


@pytest.mark.parametrize("tree_name", TREES)
@pytest.mark.parametrize("method", ["draft", "_draft_extend_for_prefill", "_draft_extend_for_decode"])
def test_every_other_draft_forward_flushes_first(trees, tree_name: str, method: str) -> None:
    """The draft never reads a kept row's slot before it is written, and a direct write to a reused slot lands
    after the kept row for it: each other draft forward's first statement is the flush."""
    fn = find_def(trees.get(tree_name), WORKER, f"EagleDraftWorker.{method}")
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    assert ast.unparse(body[0]) == "self.flush_deferred_kv()"
