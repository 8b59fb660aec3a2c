"""Speculation off path (SGLANG_SPEC_OFF_PATH), the scheduler's side: ScheduleBatch and FutureMap bookkeeping.

A decode batch off speculation keeps the spec reservation (``kv_allocated_len >= committed + reserve``), commits
its token at prepare as decode does, takes its slot from the reservation at ``seq_lens`` (once seq_lens is
resolved: the first off cycle follows a spec cycle whose accept length the host does not know yet), counts the
token in seq_lens, publishes that length and relays the sampled token alone. Switching back rebuilds the draft
input's future indices, so the resolve reads what the off cycles published. Batches the worker refuses stay on
the spec path, and with the switch off nothing changes. On CPU: the patched tree's ScheduleBatch and Scheduler
methods on a dataclass stand-in, its FutureMap and resolve_forward_inputs, a fake ``req_to_token`` and slot
allocator, the forwards emulated; see ``test_spec_off_path.py`` for the worker. The release has none of it.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import pytest
import torch
from sglang_trees import SHOWS_THE_BUG, TreeImporter, source, tree_defs
from sglang_trees import trees  # noqa: F401 (a fixture)
from test_fused_spec_stash import Spec

BATCH = "sglang.srt.managers.schedule_batch"
SCHED = "sglang.srt.managers.scheduler"
OVERLAP = "sglang.srt.managers.overlap_utils"
RESULTS = "sglang.srt.managers.scheduler_components.batch_result_processor"
TREES = ["patched", pytest.param("pristine", marks=SHOWS_THE_BUG)]
POOL, CONTEXT, RESERVE, PROMPT = 6, 128, 8, [5, 9, 14]


class DraftInput(SimpleNamespace):
    """EagleDraftInput's stand-in (its fields default to None)."""

    def __init__(self, **fields: Any) -> None:
        super().__init__(**{"future_dsa_topk_indices_available": False, "draft_probs": None,
                            "bonus_tokens": None, **fields})


@dataclasses.dataclass(eq=False)
class Batch:
    """ScheduleBatch's stand-in: the fields the off path reads and writes, the tree's methods set on it."""

    reqs: list
    req_pool_indices: torch.Tensor
    seq_lens: torch.Tensor
    req_to_token_pool: Any
    spec_algorithm: Any = dataclasses.field(default_factory=Spec)
    spec_off: bool = False
    spec_info: Any = None
    seq_lens_cpu: Optional[torch.Tensor] = None
    seq_lens_sum: Optional[int] = None
    out_cache_loc: Optional[torch.Tensor] = None
    input_ids: Optional[torch.Tensor] = None
    input_embeds: Any = None
    forward_mode: Any = None
    sampling_info: Any = None
    prefill_input_ids_cpu: Any = None
    mix_running_indices: Any = None
    enable_overlap: bool = True
    device: str = "cpu"


def batch_class(tree: Path) -> type:
    names = ["ScheduleBatch.is_spec_cycle", "ScheduleBatch.prepare_off_forward", "ScheduleBatch.prepare_for_decode"]
    extra = {"torch": torch, "ForwardMode": SimpleNamespace(DECODE="decode"), "get_server_args": lambda: None}
    # reached only off the spec path
    extra |= dict.fromkeys(["alloc_for_decode", "set_mamba_track_indices_from_reqs", "get_exec"])
    defs = tree_defs(tree, BATCH, names, extra=extra)

    class TreeBatch(Batch):
        pass

    for name, fn in defs.items():
        setattr(TreeBatch, name.rpartition(".")[2], fn)
    return TreeBatch


class KV:
    """The token pool: hands out fresh slots, and records each target KV write (slot -> request, position)."""

    def __init__(self) -> None:
        self.req_to_token = torch.full((POOL, CONTEXT), -1, dtype=torch.int32)
        self.handed_out, self.owner, self.written = 0, {}, {}

    def reserve(self, batch: Any) -> None:
        """eagle_prepare_for_decode's reservation at page size 1: top each request up to committed + reserve."""
        for req in batch.reqs:
            cur = req.kv.kv_allocated_len
            nxt = max(cur, req.kv_committed_len + RESERVE)
            slots = torch.arange(self.handed_out, self.handed_out + nxt - cur, dtype=torch.int32) + 1000
            self.handed_out += nxt - cur
            self.req_to_token[req.req_pool_idx, cur:nxt] = slots
            req.kv.kv_allocated_len = nxt
            req.decode_batch_idx += 1

    def write(self, req: Any, pos: int, slot: int) -> None:
        assert 0 <= pos < req.kv.kv_allocated_len, "a write outside the request's reservation"
        assert slot == int(self.req_to_token[req.req_pool_idx, pos]), "a write to a slot not the position's"
        assert (req.req_pool_idx, pos) not in self.written, f"position {pos} of {req.rid} written twice"
        assert self.owner.setdefault(slot, (req.req_pool_idx, pos)) == (req.req_pool_idx, pos), "slot overwritten"
        self.written[(req.req_pool_idx, pos)] = slot

    def count(self, req: Any) -> int:
        return sum(1 for (rpi, _) in self.written if rpi == req.req_pool_idx)


class Sim:
    """One running batch through the overlap loop: schedule(N) (decide, prepare), run(N), process(N-1)."""

    def __init__(self, tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.kv = KV()
        monkeypatch.setenv("SGLANG_ENABLE_FUSED_SPEC_STASH", "0")
        self.overlap = TreeImporter.module(tree, OVERLAP)
        pool = SimpleNamespace(req_to_token=self.kv.req_to_token)
        self.fm = self.overlap.FutureMap(torch.device("cpu"), Spec(), pool, needs_cpu_seq_lens=False)
        self.extras: list[str] = []
        self.fm._resolve_spec_extras = self.resolve_extras  # its Triton gather: the bonus alone here
        update = tree_defs(tree, SCHED, ["Scheduler._update_spec_off"], extra={"EagleDraftInput": DraftInput})[
            "Scheduler._update_spec_off"]
        self.off_next = False
        self.scheduler = SimpleNamespace(model_worker=SimpleNamespace(spec_off_ok=lambda batch: self.off_next))
        self.update = lambda batch: update(self.scheduler, batch)
        rpi = torch.tensor([1, 3, 4])
        reqs = [SimpleNamespace(rid=f"r{i}", req_pool_idx=int(p), kv_committed_len=n, decode_batch_idx=0,
                                kv=SimpleNamespace(kv_allocated_len=n)) for i, (p, n) in enumerate(zip(rpi, PROMPT))]
        self.batch = batch_class(tree)(reqs=reqs, req_pool_indices=rpi, seq_lens=torch.tensor(PROMPT),
                                       req_to_token_pool=pool)
        # the prefill: its KV, its published length and its sampled token with the draft's extras
        for req in reqs:
            self.kv.req_to_token[req.req_pool_idx, :req.kv_committed_len] = torch.arange(req.kv_committed_len) + (
                100 * req.req_pool_idx)
            for pos in range(req.kv_committed_len):
                self.kv.write(req, pos, int(self.kv.req_to_token[req.req_pool_idx, pos]))
        # after the tree's modules are in place: prepare_for_decode's and stash's imports find it
        monkeypatch.setitem(sys.modules, "sglang.srt.speculative.spec_utils", SimpleNamespace(
            spec_prepare_for_decode=self.kv.reserve, spec_need_hidden_states=lambda: True))
        self.token = 50
        self.bonus = self.sample()
        self.fm.publish(rpi, self.batch.seq_lens)
        self.fm.stash(rpi, self.overlap.RelayPayload(bonus_tokens=self.bonus, topk_p=torch.rand(3, 1),
                                                     topk_index=torch.zeros(3, 1, dtype=torch.int64),
                                                     hidden_states=torch.randn(3, 4)))
        self.batch.spec_info = DraftInput(future_indices=rpi)
        self.pending: Optional[list[int]] = None  # the accept lengths of the spec result not yet processed

    def sample(self) -> torch.Tensor:
        self.token += 3
        return torch.arange(self.token, self.token + 3, dtype=torch.int64)

    def resolve_extras(self, batch: Any) -> None:
        self.extras.append("extras")
        batch.spec_info.bonus_tokens = self.fm.output_tokens_buf[batch.spec_info.future_indices]

    def cycle(self, off: bool, accept: Optional[list[int]] = None) -> dict[str, Any]:
        batch, seen = self.batch, {}
        # schedule(N)
        self.off_next = off
        self.update(batch)
        batch.prepare_for_decode()
        seen["committed_at_prepare"] = [r.kv_committed_len for r in batch.reqs]
        # run(N): run_batch's overlap branch
        self.fm.resolve_seq_lens_cpu(batch)
        if batch.spec_off:
            batch.prepare_off_forward()
        self.extras.clear()
        self.overlap.resolve_forward_inputs(batch, self.fm)
        seen["extras"] = list(self.extras)
        rpi = batch.req_pool_indices
        if batch.is_spec_cycle:
            assert batch.spec_info.bonus_tokens.tolist() == self.bonus.tolist(), "the last cycle's token is the input"
            start = batch.seq_lens.clone()
            for i, req in enumerate(batch.reqs):  # the verify writes the accepted tokens' KV
                for j in range(accept[i]):
                    pos = int(start[i]) + j
                    self.kv.write(req, pos, int(self.kv.req_to_token[req.req_pool_idx, pos]))
            self.fm.publish(rpi, start + torch.tensor(accept))
            self.bonus = self.sample()
            self.fm.stash(rpi, self.overlap.RelayPayload(bonus_tokens=self.bonus, topk_p=torch.rand(3, 1),
                                                         topk_index=torch.zeros(3, 1, dtype=torch.int64),
                                                         hidden_states=torch.randn(3, 4)))
            batch.spec_info = DraftInput(future_indices=rpi)
            result = list(accept)
        else:
            assert batch.input_ids.tolist() == self.bonus.tolist(), "the last cycle's token is the input"
            assert batch.spec_info is None
            seen["seq_lens"] = batch.seq_lens.tolist()
            seen["out_cache_loc"] = batch.out_cache_loc.tolist()
            for i, req in enumerate(batch.reqs):  # the decode forward writes the token's KV at out_cache_loc
                self.kv.write(req, int(batch.seq_lens[i]) - 1, int(batch.out_cache_loc[i]))
            self.fm.publish(rpi, batch.seq_lens)
            self.bonus = self.sample()
            self.fm.stash(rpi, self.overlap.RelayPayload(bonus_tokens=self.bonus))
            result = None
        batch.input_ids = None
        # process(N-1): a spec result commits its accepted run; an off result committed at prepare
        if self.pending is not None:
            for req, n in zip(batch.reqs, self.pending):
                req.kv_committed_len += n
        self.pending = result
        return seen


def check_no_leak(sim: Sim) -> None:
    kv = sim.kv
    assert kv.handed_out == sum(r.kv.kv_allocated_len - n for r, n in zip(sim.batch.reqs, PROMPT))
    for req in sim.batch.reqs:
        row = kv.req_to_token[req.req_pool_idx, :req.kv.kv_allocated_len].tolist()
        assert len(set(row)) == len(row) and -1 not in row, "every reserved position holds its own slot"


@pytest.mark.parametrize("tree_name", TREES)
def test_spec_off_off_and_back_on_keep_the_kv_bookkeeping(trees, monkeypatch, tree_name: str) -> None:
    sim = Sim(trees.get(tree_name), monkeypatch)
    batch, kv = sim.batch, sim.kv
    reqs = batch.reqs

    # two spec cycles (the second's accept lengths unknown on the host at the next prepare)
    sim.cycle(off=False, accept=[2, 4, 1])
    sim.cycle(off=False, accept=[3, 1, 4])
    after_spec = [kv.count(r) for r in reqs]  # [10, 14, 19]
    allocated = [r.kv.kv_allocated_len for r in reqs]

    # the first off cycle: seq_lens resolved from the spec cycle's publish, then the slot from the reservation
    seen = sim.cycle(off=True)
    assert batch.spec_off and not batch.is_spec_cycle and seen["extras"] == []
    assert seen["seq_lens"] == [n + 1 for n in after_spec]
    assert seen["out_cache_loc"] == [int(kv.req_to_token[r.req_pool_idx, n]) for r, n in zip(reqs, after_spec)]
    assert seen["committed_at_prepare"] == [n - a + 1 for n, a in zip(after_spec, [3, 1, 4])], "lags one cycle"
    assert [r.kv_committed_len for r in reqs] == [kv.count(r) for r in reqs], "exact once the spec result is in"
    # the spec reservation from the lagging count, as a spec cycle would have taken: no switch allocation
    assert [r.kv.kv_allocated_len for r in reqs] == [
        max(a, c - 1 + RESERVE) for a, c in zip(allocated, seen["committed_at_prepare"])]

    # steady off cycles: commit +1 at prepare, one slot a cycle from the reservation, topped up as it runs low
    for _ in range(6):
        seen = sim.cycle(off=True)
        assert [r.kv_committed_len for r in reqs] == [kv.count(r) for r in reqs] == seen["seq_lens"]
        assert seen["committed_at_prepare"] == seen["seq_lens"]
        assert all(r.kv.kv_allocated_len >= r.kv_committed_len + RESERVE - 1 for r in reqs)
    assert batch.spec_info is None and [r.decode_batch_idx for r in reqs] == [9] * 3

    # back on: the draft input's futures rebuilt; the resolve reads the off cycles' published lengths
    off_lens = [kv.count(r) for r in reqs]
    seen = sim.cycle(off=False, accept=[1, 1, 1])  # the held steps-0 cycle
    assert not batch.spec_off and batch.is_spec_cycle and seen["extras"] == ["extras"]
    assert seen["committed_at_prepare"] == off_lens, "switching on commits nothing"
    sim.cycle(off=False, accept=[4, 2, 3])
    sim.cycle(off=False, accept=[1, 1, 1])
    assert [r.kv_committed_len for r in reqs] == [n + 1 + a for n, a in zip(off_lens, [4, 2, 3])]
    assert [r.kv_committed_len for r in reqs] == [kv.count(r) - 1 for r in reqs]  # the last run not processed yet
    for req in reqs:  # every position written once, in order, each in its own reserved slot
        assert sorted(p for (rpi, p) in kv.written if rpi == req.req_pool_idx) == list(range(kv.count(req)))
    check_no_leak(sim)


@pytest.mark.parametrize("tree_name", TREES)
def test_a_refused_batch_stays_on_the_spec_path(trees, monkeypatch, tree_name: str) -> None:
    sim = Sim(trees.get(tree_name), monkeypatch)
    for accept in ([2, 4, 1], [1, 1, 1], [4, 4, 4]):
        seen = sim.cycle(off=False, accept=accept)
        assert not sim.batch.spec_off and seen["extras"] == ["extras"]
    assert [r.kv_committed_len for r in sim.batch.reqs] == [n + a + b for n, a, b in zip(PROMPT, [2, 4, 1], [1, 1, 1])]
    check_no_leak(sim)


@pytest.mark.parametrize("tree_name", TREES)
def test_the_switch_gates_the_decision(trees, tree_name: str) -> None:
    text = source(trees.get(tree_name), SCHED).read_text()
    update = text[text.index("    def update_running_batch("):text.index("    def record_batch_in_overlap(")]
    assert "self.spec_off_path = self.enable_overlap and getattr(" in text
    assert "if self.spec_off_path:\n            self._update_spec_off(batch)\n        batch.prepare_for_decode()" in update
    init = text[text.index("            self.model_worker = self.draft_worker"):]
    assert init.index("self.spec_off_path = self.enable_overlap and getattr(") < 300


# --- run_batch's overlap branch ------------------------------------------------------------------------


@pytest.mark.parametrize("tree_name", TREES)
def test_run_batch_routes_an_off_batch_to_the_decode_forward(trees, tree_name: str) -> None:
    """run_batch is too entangled to run on a CPU: its overlap branch must prepare the off forward after the
    seq_lens resolve and before the input gather, call forward_decode_off and publish seq_lens as it is, pass
    on_publish only to spec cycles, and leave spec_info None after an off cycle."""
    text = source(trees.get(tree_name), SCHED).read_text()
    body = text[text.index("    def run_batch("):text.index("    def _maybe_report_active_ranks(")]
    branch = body[body.index("if self.enable_overlap:"):body.index("elif self.enable_pdmux")]
    assert "forward_decode_off" in branch and "prepare_off_forward" in branch
    resolve = branch.index("self.future_map.resolve_seq_lens_cpu(batch)")
    assert resolve < branch.index("if batch.spec_off:\n                    batch.prepare_off_forward()")
    assert branch.index("batch.prepare_off_forward()") < branch.index("resolve_forward_inputs(batch")
    assert "if batch.is_spec_cycle:\n                            fwd_kwargs[\"on_publish\"]" in branch
    off = branch[branch.index("if batch.spec_off:\n                            batch_result"):]
    assert off.index("self.model_worker.forward_decode_off(batch)") < off.index(
        "self.future_map.publish(future_indices, batch.seq_lens)") < off.index("else:")
    assert "if batch.is_spec_cycle:\n                    batch.spec_info = batch_result.next_draft_input" in branch


@pytest.mark.parametrize("tree_name", TREES)
def test_an_off_batch_gathers_its_input_and_no_spec_extras(trees, monkeypatch, tree_name: str) -> None:
    sim = Sim(trees.get(tree_name), monkeypatch)
    batch = sim.batch
    batch.spec_off, batch.spec_info = True, None
    sim.overlap.resolve_forward_inputs(batch, sim.fm)
    assert sim.extras == [] and batch.input_ids.tolist() == sim.bonus.tolist()
    # the switch off (spec_off never set): the spec path as today, the input left to the worker
    batch.spec_off, batch.input_ids, batch.spec_info = False, None, DraftInput(future_indices=batch.req_pool_indices)
    sim.overlap.resolve_forward_inputs(batch, sim.fm)
    assert sim.extras == ["extras"] and batch.input_ids is None


@pytest.mark.parametrize("tree_name", TREES)
@pytest.mark.parametrize("spec_off", [True, False])
def test_an_off_batch_skips_the_full_snapshot(trees, monkeypatch, tree_name: str, spec_off: bool) -> None:
    sim = Sim(trees.get(tree_name), monkeypatch)
    isolation = tree_defs(trees.get(tree_name), SCHED, ["Scheduler._forward_isolation"])["Scheduler._forward_isolation"]
    batch = sim.batch
    sampling = SimpleNamespace(copy_for_forward=lambda: "forward copy")
    batch.spec_off, batch.sampling_info, batch.out_cache_loc = spec_off, sampling, torch.tensor([1, 2, 3])
    with isolation(SimpleNamespace(), batch, overlap=False):
        assert batch.sampling_info == "forward copy"
        batch.out_cache_loc = torch.tensor([7, 8, 9])
    assert batch.sampling_info is sampling
    assert batch.out_cache_loc.tolist() == ([7, 8, 9] if spec_off else [1, 2, 3])


# --- the result processor ------------------------------------------------------------------------------


@pytest.mark.parametrize("tree_name", TREES)
@pytest.mark.parametrize("spec_off", [True, False])
def test_an_off_result_is_a_decode_result_that_feeds_the_policy(trees, monkeypatch, tree_name: str,
                                                               spec_off: bool) -> None:
    tree = trees.get(tree_name)
    sim = Sim(tree, monkeypatch)
    fn = tree_defs(tree, RESULTS, ["SchedulerBatchResultProcessor._normalize_decode_outputs"], extra={"torch": torch})[
        "SchedulerBatchResultProcessor._normalize_decode_outputs"]
    fed: list[tuple] = []
    processor = SimpleNamespace(
        model_worker=SimpleNamespace(on_verify_complete_cpu=lambda drafts, batch_size=0: fed.append(
            (drafts, batch_size))),
        _resolve_spec_v2_tokens=lambda result, batch: [["spec"]] * 3)
    batch = sim.batch
    batch.spec_off, batch.return_logprob = spec_off, False
    ids, _ = fn(processor, batch=batch, result=SimpleNamespace(), logits_output=None,
                next_token_ids=torch.tensor([4, 5, 6]))
    if spec_off:
        assert ids == [[4], [5], [6]] and fed == [([0, 0, 0], 3)]
    else:
        assert ids == [["spec"]] * 3 and fed == []
