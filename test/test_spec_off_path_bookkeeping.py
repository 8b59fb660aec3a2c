"""Speculation off path (SGLANG_SPEC_OFF_PATH), the scheduler's side: ScheduleBatch and FutureMap bookkeeping.

A decode batch off speculation keeps the spec reservation (``kv_allocated_len >= committed + reserve``), commits
its token at prepare as decode does, takes its slot from the reservation at ``seq_lens`` (once seq_lens is
resolved: the first off cycle follows a spec cycle whose accept length the host does not know yet), counts the
token in seq_lens, publishes that length and relays the sampled token alone. Switching back rebuilds the draft
input's future indices, so the resolve reads what the off cycles published. Batches the worker refuses stay on
the spec path, and with the switch off nothing changes. A prefill merged into an off batch (whose missing draft
input drops the prefill's) decodes off from its prompt; one merged into a spec batch that goes off resolves every
length; a request retracted while off gives back every slot it held and, prefilled again on the same pool row,
decodes on. On CPU: the patched tree's ScheduleBatch (merge_batch and filter_batch included) and Scheduler methods
on a dataclass stand-in, its FutureMap and resolve_forward_inputs, a fake ``req_to_token`` and slot allocator, the
forwards and the retraction's release emulated; see ``test_spec_off_path.py`` for the worker. The release has
none of it.
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
from test_spec_accept_rate import cycle, end_interval, reporter

BATCH = "sglang.srt.managers.schedule_batch"
SCHED = "sglang.srt.managers.scheduler"
OVERLAP = "sglang.srt.managers.overlap_utils"
RESULTS = "sglang.srt.managers.scheduler_components.batch_result_processor"
TREES = ["patched", pytest.param("pristine", marks=SHOWS_THE_BUG)]
POOL, CONTEXT, RESERVE, PROMPT = 6, 128, 8, [5, 9, 14]


class DraftInput(SimpleNamespace):
    """EagleDraftInput's stand-in (its fields default to None); under overlap its rows are its future indices."""

    def __init__(self, **fields: Any) -> None:
        super().__init__(**{"future_dsa_topk_indices_available": False, "draft_probs": None,
                            "bonus_tokens": None, **fields})

    def merge_batch(self, other: "DraftInput") -> None:
        self.future_indices = torch.cat([self.future_indices, other.future_indices])

    def filter_batch(self, new_indices: torch.Tensor, new_indices_cpu: list[int]) -> None:
        self.future_indices = self.future_indices[new_indices]


class Capture(int):
    """CaptureHiddenMode's stand-in: ordered, NULL captures nothing."""

    def need_capture(self) -> bool:
        return self > 0


Capture.NULL = Capture(0)


class SamplingInfo:
    """SamplingBatchInfo's stand-in: a row count that follows the batch's merges and filters."""

    def __init__(self, rows: int) -> None:
        self.rows = rows

    def merge_batch(self, other: "SamplingInfo") -> None:
        self.rows += other.rows

    def filter_batch(self, keep_indices: list[int], keep_indices_device: torch.Tensor) -> None:
        self.rows = len(keep_indices)


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
    # what the tree's merge_batch and filter_batch also read and write
    req_pool_indices_cpu: Optional[torch.Tensor] = None
    orig_seq_lens: Optional[torch.Tensor] = None
    model_config: Any = dataclasses.field(default_factory=lambda: SimpleNamespace(is_encoder_decoder=False))
    multimodal_inputs: Any = None
    return_logprob: bool = False
    top_logprobs_nums: Any = None
    token_ids_logprobs: Any = None
    has_grammar: bool = False
    return_hidden_states_mode: Any = None
    return_hidden_states: bool = False
    is_prefill_only: bool = False

    def __post_init__(self) -> None:
        self.req_pool_indices_cpu = self.req_pool_indices.clone()
        self.orig_seq_lens = self.seq_lens.clone()
        self.return_hidden_states_mode = Capture.NULL
        self.sampling_info = SamplingInfo(len(self.reqs))


def batch_class(tree: Path) -> type:
    names = ["ScheduleBatch.is_spec_cycle", "ScheduleBatch.prepare_off_forward", "ScheduleBatch.prepare_for_decode",
             "ScheduleBatch.merge_batch", "ScheduleBatch.filter_batch"]
    extra = {"torch": torch, "ForwardMode": SimpleNamespace(DECODE="decode"), "get_server_args": lambda: None,
             "is_pin_memory_available": lambda device: False, "CaptureHiddenMode": Capture,
             "get_batch_return_hidden_states_mode": lambda reqs: Capture.NULL}
    # reached only off the spec path
    extra |= dict.fromkeys(["alloc_for_decode", "set_mamba_track_indices_from_reqs", "get_exec"])
    defs = tree_defs(tree, BATCH, names, extra=extra)

    class TreeBatch(Batch):
        pass

    for name, fn in defs.items():
        setattr(TreeBatch, name.rpartition(".")[2], fn)
    return TreeBatch


class KV:
    """The token pool: hands out fresh slots (never reused), frees them, and records each target KV write
    (slot -> request, position)."""

    def __init__(self) -> None:
        self.req_to_token = torch.full((POOL, CONTEXT), -1, dtype=torch.int32)
        self.handed_out, self.freed, self.owner, self.written = 0, [], {}, {}

    def take(self, req: Any, start: int, stop: int) -> None:
        slots = torch.arange(self.handed_out, self.handed_out + stop - start, dtype=torch.int32) + 1000
        self.handed_out += stop - start
        self.req_to_token[req.req_pool_idx, start:stop] = slots

    def prefill(self, req: Any) -> None:
        """The prompt's slots, and the prefill's writes at every prompt position."""
        self.take(req, 0, req.kv_committed_len)
        for pos in range(req.kv_committed_len):
            self.write(req, pos, int(self.req_to_token[req.req_pool_idx, pos]))

    def reserve(self, batch: Any) -> None:
        """eagle_prepare_for_decode's reservation at page size 1: top each request up to committed + reserve."""
        for req in batch.reqs:
            cur = req.kv.kv_allocated_len
            nxt = max(cur, req.kv_committed_len + RESERVE)
            self.take(req, cur, nxt)
            req.kv.kv_allocated_len = nxt
            req.decode_batch_idx += 1

    def release(self, req: Any) -> None:
        """A retraction's release (no tree insert): every slot the request holds goes back."""
        self.freed += self.req_to_token[req.req_pool_idx, :req.kv.kv_allocated_len].tolist()
        req.kv.kv_allocated_len = 0

    def write(self, req: Any, pos: int, slot: int) -> None:
        assert 0 <= pos < req.kv.kv_allocated_len, "a write outside the request's reservation"
        assert slot == int(self.req_to_token[req.req_pool_idx, pos]), "a write to a slot not the position's"
        assert (req.rid, pos) not in self.written, f"position {pos} of {req.rid} written twice"
        assert slot not in self.freed, f"a write to a freed slot ({req.rid}, position {pos})"
        assert self.owner.setdefault(slot, (req.rid, pos)) == (req.rid, pos), "slot overwritten"
        self.written[(req.rid, pos)] = slot

    def count(self, req: Any) -> int:
        return sum(1 for (rid, _) in self.written if rid == req.rid)


def new_req(rid: str, pool_idx: int, prompt: int) -> SimpleNamespace:
    """A request just prefilled: its prompt committed and allocated."""
    return SimpleNamespace(rid=rid, req_pool_idx=pool_idx, kv_committed_len=prompt, decode_batch_idx=0,
                           kv=SimpleNamespace(kv_allocated_len=prompt), return_logprob=False, grammar=None)


class Sim:
    """One running batch through the overlap loop: schedule(N) (decide, prepare), run(N), process(N-1); a prefill
    runs as its own iteration and is merged at the next schedule, as get_next_batch_to_run does."""

    def __init__(self, tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.kv = KV()
        monkeypatch.setenv("SGLANG_ENABLE_FUSED_SPEC_STASH", "0")
        self.overlap = TreeImporter.module(tree, OVERLAP)
        self.pool = SimpleNamespace(req_to_token=self.kv.req_to_token)
        self.fm = self.overlap.FutureMap(torch.device("cpu"), Spec(), self.pool, needs_cpu_seq_lens=False)
        self.extras: list[str] = []
        self.fm._resolve_spec_extras = self.resolve_extras  # its Triton gather: the bonus alone here
        update = tree_defs(tree, SCHED, ["Scheduler._update_spec_off"], extra={"EagleDraftInput": DraftInput})[
            "Scheduler._update_spec_off"]
        self.off_next = False
        self.scheduler = SimpleNamespace(model_worker=SimpleNamespace(spec_off_ok=lambda batch: self.off_next))
        self.update = lambda batch: update(self.scheduler, batch)
        self.batch_class = batch_class(tree)
        # after the tree's modules are in place: prepare_for_decode's and stash's imports find it
        monkeypatch.setitem(sys.modules, "sglang.srt.speculative.spec_utils", SimpleNamespace(
            spec_prepare_for_decode=self.kv.reserve, spec_need_hidden_states=lambda: True))
        self.token = 50
        self.last: dict[int, int] = {}  # pool index -> the token its request's next cycle takes as input
        self.batch = self.prefill([("r0", 1, PROMPT[0]), ("r1", 3, PROMPT[1]), ("r2", 4, PROMPT[2])])
        self.pending: Optional[list[tuple[Any, int]]] = None  # a spec result not yet processed

    def prefill(self, reqs: list[tuple[str, int, int]]) -> Any:
        """A spec prefill batch (rid, pool index, prompt length) as run_batch leaves it: its KV written, its
        length published, its sampled token and the draft's extras stashed, its draft input on its futures."""
        made = [new_req(rid, idx, n) for rid, idx, n in reqs]
        for req in made:
            self.kv.prefill(req)
        rpi = torch.tensor([idx for _, idx, _ in reqs])
        batch = self.batch_class(reqs=made, req_pool_indices=rpi, seq_lens=torch.tensor([n for _, _, n in reqs]),
                                 req_to_token_pool=self.pool)
        self.fm.publish(rpi, batch.seq_lens)
        self.stash(rpi, extras=True)
        batch.spec_info = DraftInput(future_indices=rpi)
        return batch

    def merge_prefill(self, reqs: list[tuple[str, int, int]]) -> None:
        """A prefill iteration (it processes the last decode's result), then the next schedule's merge."""
        prefill = self.prefill(reqs)
        self.process()
        self.batch.merge_batch(prefill)

    def retract(self, rid: str) -> Any:
        """update_running_batch's retraction of one request: its KV released, the batch filtered."""
        keep = [i for i, req in enumerate(self.batch.reqs) if req.rid != rid]
        (req,) = [req for req in self.batch.reqs if req.rid == rid]
        self.kv.release(req)
        self.batch.filter_batch(keep_indices=keep)
        return req

    def stash(self, rpi: torch.Tensor, extras: bool) -> None:
        """The result's relay: a sampled token per request, with the draft's extras on a drafting result."""
        tokens = torch.arange(self.token, self.token + len(rpi), dtype=torch.int64)
        self.token += len(rpi)
        self.last |= dict(zip(rpi.tolist(), tokens.tolist()))
        n = len(rpi)
        payload = (self.overlap.RelayPayload(bonus_tokens=tokens, topk_p=torch.rand(n, 1),
                                             topk_index=torch.zeros(n, 1, dtype=torch.int64),
                                             hidden_states=torch.randn(n, 4))
                   if extras else self.overlap.RelayPayload(bonus_tokens=tokens))
        self.fm.stash(rpi, payload)

    def expected_input(self) -> list[int]:
        return [self.last[idx] for idx in self.batch.req_pool_indices.tolist()]

    def resolve_extras(self, batch: Any) -> None:
        self.extras.append("extras")
        batch.spec_info.bonus_tokens = self.fm.output_tokens_buf[batch.spec_info.future_indices]

    def process(self) -> None:
        """process(N-1): a spec result commits its accepted run; an off result committed at prepare."""
        for req, n in self.pending or []:
            req.kv_committed_len += n
        self.pending = None

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
            assert batch.spec_info.bonus_tokens.tolist() == self.expected_input(), "the last cycle's token is the input"
            start = batch.seq_lens.clone()
            seen["start"] = start.tolist()
            for i, req in enumerate(batch.reqs):  # the verify writes the accepted tokens' KV
                for j in range(accept[i]):
                    pos = int(start[i]) + j
                    self.kv.write(req, pos, int(self.kv.req_to_token[req.req_pool_idx, pos]))
            self.fm.publish(rpi, start + torch.tensor(accept))
            self.stash(rpi, extras=True)
            batch.spec_info = DraftInput(future_indices=rpi)
            result = list(zip(batch.reqs, accept))
        else:
            assert batch.input_ids.tolist() == self.expected_input(), "the last cycle's token is the input"
            assert batch.spec_info is None
            seen["seq_lens"] = batch.seq_lens.tolist()
            seen["out_cache_loc"] = batch.out_cache_loc.tolist()
            for i, req in enumerate(batch.reqs):  # the decode forward writes the token's KV at out_cache_loc
                self.kv.write(req, int(batch.seq_lens[i]) - 1, int(batch.out_cache_loc[i]))
            self.fm.publish(rpi, batch.seq_lens)
            self.stash(rpi, extras=False)
            result = None
        batch.input_ids = None
        self.process()
        self.pending = result
        return seen


def check_no_leak(sim: Sim) -> None:
    """Every slot handed out is held by one running request's row or was freed once, and every held row is
    whole; every position of each running request written once, in order."""
    kv, reqs = sim.kv, sim.batch.reqs
    held = [slot for r in reqs for slot in kv.req_to_token[r.req_pool_idx, :r.kv.kv_allocated_len].tolist()]
    assert -1 not in held
    assert len(set(held)) == len(held) and not set(held) & set(kv.freed) and len(set(kv.freed)) == len(kv.freed)
    assert len(held) + len(kv.freed) == kv.handed_out, "a slot neither held nor freed"
    for req in reqs:
        assert sorted(p for (rid, p) in kv.written if rid == req.rid) == list(range(kv.count(req)))


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
    check_no_leak(sim)  # every position written once, in order, each in its own reserved slot


def off_stretch(sim: Sim, cycles: int) -> None:
    """Off cycles in steady state: each request commits one token at prepare and writes it in its reservation."""
    for _ in range(cycles):
        seen = sim.cycle(off=True)
        reqs = sim.batch.reqs
        assert [r.kv_committed_len for r in reqs] == [sim.kv.count(r) for r in reqs] == seen["seq_lens"]


def back_on(sim: Sim) -> list[int]:
    """The held steps-0 cycle and two drafting cycles; returns the lengths the held cycle resolved."""
    reqs = sim.batch.reqs
    lens = [sim.kv.count(r) for r in reqs]
    seen = sim.cycle(off=False, accept=[1] * len(reqs))
    assert sim.batch.is_spec_cycle and seen["extras"] == ["extras"] and seen["start"] == lens
    assert seen["committed_at_prepare"] == lens, "switching on commits nothing"
    sim.cycle(off=False, accept=[3] * len(reqs))
    sim.cycle(off=False, accept=[2] * len(reqs))
    assert [r.kv_committed_len for r in reqs] == [n + 1 + 3 for n in lens]
    return lens


def settle(sim: Sim, off_cycles: int) -> None:
    """More off cycles, back on, and the whole pool accounted for."""
    off_stretch(sim, off_cycles)
    back_on(sim)
    check_no_leak(sim)


@pytest.mark.parametrize("tree_name", TREES)
def test_a_prefill_merged_into_an_off_batch_decodes_off_from_its_prompt(trees, monkeypatch, tree_name: str) -> None:
    """get_next_batch_to_run merges a finished prefill into the running batch. An off batch has no draft input,
    so merge_batch drops the prefill's: its request's length is its prompt (the spec prefill publishes the
    length before its tokens), its input the prefill's sampled token, its slot from its first reservation."""
    sim = Sim(trees.get(tree_name), monkeypatch)
    sim.cycle(off=False, accept=[2, 4, 1])
    sim.cycle(off=True)
    off_stretch(sim, 2)
    sim.merge_prefill([("r3", 2, 7)])
    batch, kv = sim.batch, sim.kv
    assert batch.spec_off and batch.spec_info is None and batch.seq_lens.tolist()[-1] == 7
    assert batch.sampling_info.rows == 4

    seen = sim.cycle(off=True)
    new = batch.reqs[-1]
    assert seen["seq_lens"][-1] == 8 and seen["committed_at_prepare"][-1] == 8
    assert seen["out_cache_loc"][-1] == int(kv.req_to_token[2, 7]), "the prompt's next position, reserved"
    assert new.kv.kv_allocated_len == 7 + RESERVE
    settle(sim, off_cycles=3)


@pytest.mark.parametrize("tree_name", TREES)
def test_a_prefill_merged_into_a_spec_batch_that_goes_off_resolves_every_length(trees, monkeypatch,
                                                                                tree_name: str) -> None:
    """The draft inputs merge; the first off cycle's resolve reads the spec cycle's lengths for the running
    requests (its accept lengths still unknown on the host) and the prefill's for the new one."""
    sim = Sim(trees.get(tree_name), monkeypatch)
    sim.cycle(off=False, accept=[2, 4, 1])
    sim.cycle(off=False, accept=[3, 1, 4])
    sim.merge_prefill([("r3", 2, 7), ("r4", 5, 11)])
    batch, kv = sim.batch, sim.kv
    assert batch.spec_info.future_indices.tolist() == [1, 3, 4, 2, 5]
    written = [kv.count(r) for r in batch.reqs]
    seen = sim.cycle(off=True)
    assert seen["seq_lens"] == [n + 1 for n in written]
    assert seen["out_cache_loc"] == [int(kv.req_to_token[r.req_pool_idx, n]) for r, n in zip(batch.reqs, written)]
    assert [r.kv_committed_len for r in batch.reqs] == [n + 1 for n in written]
    settle(sim, off_cycles=2)


@pytest.mark.parametrize("tree_name", TREES)
def test_a_request_retracted_while_off_frees_its_reservation_and_comes_back(trees, monkeypatch,
                                                                           tree_name: str) -> None:
    """update_running_batch retracts before it asks the worker: the retracted request's slots (prompt, decoded
    and reserved) all go back once, the rest decode on off with their own slots, and the request, prefilled
    again from what it had decoded, joins the off batch on the same pool row and decodes on from there."""
    sim = Sim(trees.get(tree_name), monkeypatch)
    sim.cycle(off=False, accept=[2, 4, 1])
    sim.cycle(off=True)
    off_stretch(sim, 2)
    batch, kv = sim.batch, sim.kv
    held = int(kv.req_to_token[3, :batch.reqs[1].kv.kv_allocated_len].ne(-1).sum())
    gone = sim.retract("r1")
    assert [r.rid for r in batch.reqs] == ["r0", "r2"] and batch.req_pool_indices.tolist() == [1, 4]
    assert batch.spec_off and batch.spec_info is None and batch.sampling_info.rows == 2
    assert len(kv.freed) == held, "every slot the request held"
    check_no_leak(sim)

    off_stretch(sim, 3)
    # back from the waiting queue: its prompt now holds what it had decoded
    decoded = kv.count(gone)
    sim.merge_prefill([("r1-again", 3, decoded)])
    assert batch.req_pool_indices.tolist() == [1, 4, 3]
    seen = sim.cycle(off=True)
    assert seen["seq_lens"][-1] == decoded + 1
    assert seen["out_cache_loc"][-1] == int(kv.req_to_token[3, decoded]) and seen["out_cache_loc"][-1] not in kv.freed
    settle(sim, off_cycles=2)


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
    assert sim.extras == [] and batch.input_ids.tolist() == sim.expected_input()
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


def decode_log_line(tree: Path, spec_rows: int) -> tuple[list[str], SimpleNamespace]:
    """(the lines the tree's report_decode_stats logs at an interval's end, the reporter) after an interval whose
    spec cycle verified ``spec_rows`` requests at K 4, accepting 3 tokens each (the rest ran off speculation)."""
    rep, lines = reporter(tree, startup_k=4)
    if spec_rows:
        cycle(rep, [3] * spec_rows, k=4)
    try:
        end_interval(rep)
    except ZeroDivisionError as error:
        pytest.fail(f"the decode log divided by zero spec forwards: {error}")
    return lines, rep


@pytest.mark.parametrize("tree_name", TREES)
def test_a_log_interval_of_off_cycles_reports_speculation_off(trees, tree_name: str) -> None:
    """An interval whose cycles all ran off speculation counts no spec forwards (an off result adds no spec
    metrics). The decode log line says so instead of dividing by zero, which killed the scheduler in the off
    path's first GPU run (session 39); an interval with spec cycles still reports their accept length."""
    tree = trees.get(tree_name)
    lines, rep = decode_log_line(tree, spec_rows=2)
    assert len(lines) == 1 and "accept len: 3.00" in lines[0] and rep.spec_total_num_forward_ct == 2
    lines, rep = decode_log_line(tree, spec_rows=0)
    assert len(lines) == 1 and "speculation off" in lines[0] and "accept len" not in lines[0]
    assert rep.spec_num_forward_ct == 0 and rep.spec_total_num_forward_ct == 0
