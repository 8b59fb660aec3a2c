"""Patch 0036 (0.5.17 only): at speculation steps 0 the draft's KV is written in batches of N positions, when asked.

With 0034's ``SGLANG_SPEC_KV_ONLY_ZERO_STEP_DRAFT_EXTEND`` and ``SGLANG_SPEC_KV_ONLY_BATCH`` = N >= 2, a
steps-0 cycle does not run the KV-only extend: ``EagleDraftWorker._draft_extend_kv_only`` scatters its inputs
(next token, position, KV slot, the verify's aux hidden states) into a ring indexed by request pool slot
(``Steps0KVBatch``), and every N cycles (a host counter) one KV-only forward writes bs x N positions; entries a
request does not have write reserved slot 0. A cycle that drafts or runs the full extend (0034's hold) flushes
first; a prefill clears its requests' counts; every forward first writes the entries of requests not in its batch
(a finished request's prefix stays in the radix cache). On CPU with the tiny EAGLE-3 stand-in of
test_steps0_kv_only_extend.py and the patched tree's code; the release has none of it (its tests xfail).
"""

from __future__ import annotations

import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from sglang_trees import SHOWS_THE_BUG, TreeImporter, source
from sglang_trees import trees  # noqa: F401 (a fixture)
from test_steps0_kv_only_extend import (
    AUX, BS, H, HD, KV_HEADS, MODEL, VOCAB, flag, hold_scenario, move_slot, patched_defs, spec_worker, spec_worker_defs,
    steps0_batch, tiny_draft)

KNOB = "SGLANG_SPEC_KV_ONLY_BATCH"
RING = "sglang.srt.speculative.steps0_kv_batch"
WORKER = "sglang.srt.speculative.eagle_worker_v2"
TREES = ["patched", pytest.param("pristine", marks=SHOWS_THE_BUG)]
N = 4
SLOTS = 16  # request pool slots


def ring_module(tree: Path) -> types.ModuleType:
    assert source(tree, RING).is_file(), "no Steps0KVBatch"
    return TreeImporter.module(tree, RING)


# --- the knob ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("tree_name", TREES)
def test_the_knob_exists_and_defaults_to_per_cycle(trees, monkeypatch, tree_name: str) -> None:
    monkeypatch.delenv(KNOB, raising=False)
    envs = TreeImporter.module(trees.get(tree_name), "sglang.srt.environ").envs
    assert hasattr(envs, KNOB)
    assert getattr(envs, KNOB).get() == 0
    monkeypatch.setenv(KNOB, "8")
    assert getattr(envs, KNOB).get() == 8


# --- the ring ---------------------------------------------------------------------------------------


def new_ring(tree: Path, n: int = N, loc_dtype: torch.dtype = torch.int64) -> Any:
    return ring_module(tree).Steps0KVBatch(n, SLOTS, AUX * H, torch.float32, loc_dtype, "cpu")


@pytest.mark.parametrize("tree_name", TREES)
def test_a_push_scatters_into_the_requests_rows_and_counts(trees, tree_name: str) -> None:
    ring = new_ring(trees.get(tree_name))
    gen = torch.Generator().manual_seed(1)
    rpi = torch.tensor([7, 2, 11])
    rows = []
    for cycle in range(N):
        ids, pos = torch.randint(0, VOCAB, (3,), generator=gen), torch.tensor([10, 40, 3]) + cycle
        loc, hidden = torch.tensor([300, 500, 900]) + cycle, torch.randn(3, AUX * H, generator=gen)
        rows.append((ids, pos, loc, hidden))
        due = ring.push(rpi, ids.to(torch.int32), pos, loc, hidden)
        assert due is (cycle == N - 1)  # the host counter: flush after N cycles
        assert ring.cycles == cycle + 1
        assert ring.pending.tolist() == [cycle + 1 if s in (7, 2, 11) else 0 for s in range(SLOTS)]
    for j, (ids, pos, loc, hidden) in enumerate(rows):
        assert ring.input_ids[rpi, j].tolist() == ids.tolist() and ring.input_ids.dtype == torch.int64
        assert ring.positions[rpi, j].tolist() == pos.tolist()
        assert ring.out_cache_loc[rpi, j].tolist() == loc.tolist()
        assert torch.equal(ring.hidden_states[rpi, j], hidden)
    untouched = [s for s in range(SLOTS) if s not in (7, 2, 11)]
    assert ring.out_cache_loc[untouched].abs().sum() == 0 and ring.hidden_states[untouched].abs().sum() == 0
    # Past N (no flush came): the last entry is overwritten, never a row past the ring's end.
    ring.push(rpi[:1], torch.tensor([1]), torch.tensor([99]), torch.tensor([999]), torch.zeros(1, AUX * H))
    assert ring.pending[7] == N and ring.out_cache_loc[7].tolist() == [300, 301, 302, 999]


@pytest.mark.parametrize("tree_name", TREES)
def test_the_flush_inputs_pad_missing_entries_to_slot_zero_and_clear_resets(trees, tree_name: str) -> None:
    ring = new_ring(trees.get(tree_name), loc_dtype=torch.int32)
    for cycle in range(3):  # slot 4 from the first cycle, slot 9 joins at the third
        rpi = torch.tensor([4, 9]) if cycle == 2 else torch.tensor([4])
        n = rpi.shape[0]
        ring.push(rpi, torch.full((n,), 5 + cycle), torch.tensor([20, 70][:n]) + cycle,
                  torch.tensor([400, 900][:n], dtype=torch.int32) + cycle, torch.full((n, AUX * H), float(cycle)))
    ids, pos, loc, hidden = ring.flush_inputs(torch.tensor([9, 4]))
    assert ids.shape == pos.shape == loc.shape == (2 * N,) and hidden.shape == (2 * N, AUX * H)
    assert loc.dtype == torch.int32
    assert loc.tolist() == [902, 0, 0, 0, 400, 401, 402, 0]
    assert pos.tolist() == [72, 0, 0, 0, 20, 21, 22, 0]
    assert ids.tolist()[:1] + ids.tolist()[4:7] == [7, 5, 6, 7]
    assert hidden[4:7, 0].tolist() == [0.0, 1.0, 2.0] and hidden[0, 0] == 2.0
    ring.clear(torch.tensor([9, 4]))
    assert ring.pending.abs().sum() == 0


@pytest.mark.parametrize("tree_name", TREES)
def test_the_ring_never_waits_on_the_device(trees, tree_name: str) -> None:
    """Push, flush inputs and clear on the meta device, where any data-dependent step (``.item()``,
    ``.tolist()``, a boolean mask's gather, ``nonzero``) raises: no host sync, none per cycle."""
    ring = ring_module(trees.get(tree_name)).Steps0KVBatch(N, SLOTS, AUX * H, torch.bfloat16, torch.int64, "meta")
    rpi = torch.empty(BS, dtype=torch.int64, device="meta")
    for cycle in range(N):
        due = ring.push(rpi, torch.empty(BS, dtype=torch.int32, device="meta"), rpi, rpi,
                        torch.empty(BS, AUX * H, dtype=torch.bfloat16, device="meta"))
        assert due is (cycle == N - 1)
    ids, pos, loc, hidden = ring.flush_inputs(rpi)
    ring.clear(rpi)
    assert ids.shape == pos.shape == loc.shape == (BS * N,) and hidden.shape == (BS * N, AUX * H)
    with pytest.raises(NotImplementedError):  # what a sync would meet
        ring.pending[rpi].tolist()


# --- the draft worker: a flush writes what N per-cycle KV-only extends would ------------------------------


class KVPool:
    """The draft's MHA pool on CPU: one layer of K and V rows per slot."""

    def __init__(self, slots: int = 256) -> None:
        self.k, self.v = torch.zeros(slots, KV_HEADS, HD), torch.zeros(slots, KV_HEADS, HD)
        self.writes: list[torch.Tensor] = []

    def set_kv_buffer(self, layer: Any, loc: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        self.k[loc.long()], self.v[loc.long()] = k, v
        self.writes.append(loc.clone())


class TinyDraftModel:
    """forward_draft_kv_only = the tree's LlamaModel.forward_kv_only on the tiny EAGLE-3 draft; counts forwards."""

    def __init__(self, tree: Path) -> None:
        names = ["LlamaModel._target_features", "LlamaModel.forward_kv_only"]
        defs = patched_defs(tree, MODEL, names, extra={})
        self.model, _, _ = tiny_draft(seed=3)
        self.model._target_features = lambda h, width: defs[names[0]](self.model, h, width)
        self.forward = defs[names[1]]
        self.tokens: list[int] = []

    def forward_draft_kv_only(self, input_ids, positions, hidden_states, out_cache_loc, pool) -> torch.Tensor:
        self.tokens.append(input_ids.shape[0])
        with torch.no_grad():
            return self.forward(self.model, input_ids, positions, hidden_states, out_cache_loc, pool)


def draft_worker(tree: Path, n: int, disaggregation_mode: str = "null", **globals_: Any) -> Any:
    """An EagleDraftWorker around the tree's KV-only extend, ring, flush and clear (eager: no KV-only graph);
    ``globals_`` replace names the tree's methods read."""
    names = [f"EagleDraftWorker.{m}" for m in ("_draft_extend_kv_only", "_steps0_kv_ring", "_flush_steps0_kv",
                                               "_flush_departed_steps0_kv", "_write_steps0_kv", "_clear_steps0_kv",
                                               "_publish_steps0_kv_read_done")]
    extra = {"envs": SimpleNamespace(**{KNOB: flag(n)}), "log_info_on_rank0": lambda logger, msg: logs.append(msg),
             "logger": None, "STEPS0_KV_RING_MAX_BYTES": ring_module(tree).STEPS0_KV_RING_MAX_BYTES,
             "is_pin_memory_available": lambda device=None: False,  # CPU: the departed slots' index unpinned
             **globals_}
    defs = patched_defs(tree, WORKER, names, extra=extra)
    logs: list[str] = []

    class Worker:
        _steps0_kv = None
        _steps0_kv_refused = False
        _steps0_kv_members = ()

        def __init__(self) -> None:
            self.server_args = SimpleNamespace(disaggregation_mode=disaggregation_mode)
            self.req_to_token_pool = SimpleNamespace(req_to_token=torch.zeros(SLOTS, 64, dtype=torch.int32))
            self.device, self.cuda_graph_runner_for_draft_extend_kv_only = "cpu", None
            self.draft_runner = SimpleNamespace(model=TinyDraftModel(tree), token_to_kv_pool=KVPool(),
                                                war_fastpath_read_done_event=None)
            self.read_done: list[Any] = []  # the event each cycle published for the scheduler's WAR barrier
            self.logs = logs

        def _draft_kv_only_supported(self) -> bool:
            return True

    for name, fn in defs.items():
        setattr(Worker, name.rpartition(".")[2], fn)
    return Worker()


class Requests:
    """Decoding requests at steps 0: each gains one position (and one KV slot) a cycle."""

    def __init__(self, seed: int) -> None:
        self.gen = torch.Generator().manual_seed(seed)
        self.position: dict[int, int] = {}  # pool slot -> next position
        self.loc: dict[int, int] = {}  # pool slot -> next KV slot
        self.history: dict[int, list[int]] = {}  # pool slot -> KV slots written so far
        self.rid: dict[int, str] = {}  # pool slot -> the request on it now
        self.left: dict[str, list[int]] = {}  # a request that left (its pool slot reused) -> its KV slots

    def reqs(self, rpis: list[int]) -> list[SimpleNamespace]:
        return [SimpleNamespace(req_pool_idx=r, rid=self.rid[r]) for r in rpis]

    def admit(self, rpi: int, position: int, loc: int) -> SimpleNamespace:
        if rpi in self.rid:  # a new request on a pool slot a finished one had
            self.left[self.rid[rpi]] = self.history[rpi]
        self.rid[rpi] = f"req-{len(self.rid) + len(self.left)}"
        self.position[rpi], self.loc[rpi], self.history[rpi] = position, loc, []
        return SimpleNamespace(req_pool_indices=torch.tensor([rpi]), reqs=self.reqs([rpi]),
                               forward_mode=SimpleNamespace(is_idle=lambda: False))

    def cycle(self, rpis: list[int]) -> tuple[SimpleNamespace, SimpleNamespace]:
        bs = len(rpis)
        batch = SimpleNamespace(
            req_pool_indices=torch.tensor(rpis), reqs=self.reqs(rpis),
            seq_lens=torch.tensor([self.position[r] for r in rpis]),
            out_cache_loc=torch.tensor([self.loc[r] for r in rpis]),
            forward_mode=SimpleNamespace(is_idle=lambda: False))
        result = SimpleNamespace(
            next_token_ids=torch.randint(0, VOCAB, (bs,), generator=self.gen, dtype=torch.int32),
            logits_output=SimpleNamespace(hidden_states=torch.randn(bs, AUX * H, generator=self.gen)))
        for r in rpis:
            self.history[r].append(self.loc[r])
            self.position[r] += 1
            self.loc[r] += 1
        return batch, result


def run(worker: Any, schedule: list[Any], seed: int = 5) -> Requests:
    """Drive the worker: ("admit", rpi, position, loc) | ("cycle", [rpi...]) | ("flush", [rpi...])."""
    reqs = Requests(seed)
    for step in schedule:
        # Each forward first writes what requests not in its batch kept (EAGLEWorkerV2.forward_batch_generation).
        if step[0] == "admit":
            batch = reqs.admit(*step[1:])
            worker._flush_departed_steps0_kv(batch)
            worker._clear_steps0_kv(batch)  # what the spec worker's prefill branch does
        elif step[0] == "cycle":
            batch, result = reqs.cycle(step[1])
            worker._flush_departed_steps0_kv(batch)
            assert worker._draft_extend_kv_only(batch, result) is True
            worker.read_done.append(worker.draft_runner.war_fastpath_read_done_event)
            worker.draft_runner.war_fastpath_read_done_event = None
        else:
            batch, _ = reqs.cycle(step[1])
            worker._flush_departed_steps0_kv(batch)
            worker._flush_steps0_kv(batch)
    return reqs


def slots_of(reqs: Requests, rpis: list[int]) -> torch.Tensor:
    return torch.tensor([loc for r in rpis for loc in reqs.history[r]])


@pytest.mark.parametrize("tree_name", TREES)
def test_n_cycles_flush_in_one_forward_equal_to_per_cycle_extends(trees, tree_name: str) -> None:
    tree = trees.get(tree_name)
    schedule = [("admit", 3, 17, 100), ("admit", 8, 5, 140), ("admit", 1, 130, 180)] + [("cycle", [3, 8, 1])] * N
    batched, per_cycle = draft_worker(tree, n=N), draft_worker(tree, n=0)
    reqs = run(per_cycle, schedule)
    assert per_cycle.draft_runner.model.tokens == [3] * N and per_cycle._steps0_kv is None
    run(batched, schedule[:-1])
    assert batched.draft_runner.model.tokens == []  # N - 1 cycles: nothing written yet
    assert batched.draft_runner.token_to_kv_pool.k.abs().sum() == 0
    assert batched._steps0_kv.cycles == N - 1
    batched = draft_worker(tree, n=N)
    run(batched, schedule)
    assert batched.draft_runner.model.tokens == [3 * N]  # one forward of bs x N positions
    assert len(batched.read_done) == N and all(e is not None for e in batched.read_done)
    pool, ref = batched.draft_runner.token_to_kv_pool, per_cycle.draft_runner.token_to_kv_pool
    written = slots_of(reqs, [3, 8, 1])
    assert sorted(pool.writes[0].tolist()) == sorted(written.tolist())  # every entry was real: no padding
    torch.testing.assert_close(pool.k, ref.k, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(pool.v, ref.v, rtol=1e-5, atol=1e-5)
    assert ref.k[written].abs().min() > 0  # the comparison is not between two empty pools
    assert batched._steps0_kv.cycles == 0 and batched._steps0_kv.pending.abs().sum() == 0


@pytest.mark.parametrize("tree_name", TREES)
def test_requests_joining_and_leaving_mid_stretch(trees, tree_name: str) -> None:
    """Every position any request had gets the KV the per-cycle extend writes: a request that leaves (finished: the
    radix cache keeps its prefix) is written at the next forward, before anything else; a prefill batch (it leaves
    the running requests out) writes theirs early; a stale count on a reused pool slot is cleared."""
    tree = trees.get(tree_name)
    schedule = [
        ("admit", 3, 17, 100), ("admit", 8, 5, 140),
        ("cycle", [3, 8]), ("cycle", [3, 8]),
        ("admit", 5, 60, 200),  # joins from a prefill at the third cycle; 3 and 8 are not in that batch
        ("cycle", [3, 8, 5]),
        ("cycle", [3, 5]),  # 8 finished: its entry is written first
    ]
    batched = draft_worker(tree, n=N)
    ring = ring_module(tree)
    batched._steps0_kv = ring.Steps0KVBatch(N, SLOTS, AUX * H, torch.float32, torch.int64, "cpu")
    batched._steps0_kv.pending[5] = 3  # a previous owner of pool slot 5 left entries behind
    per_cycle = draft_worker(tree, n=0)
    reqs = run(batched, schedule)
    run(per_cycle, schedule)
    pool, ref = batched.draft_runner.token_to_kv_pool, per_cycle.draft_runner.token_to_kv_pool
    assert [w.tolist() for w in pool.writes] == [
        [100, 101, 0, 0, 140, 141, 0, 0],  # the prefill's forward: 3 and 8's two cycles, early
        [142, 0, 0, 0],  # the next cycle without 8: its one entry since
        [102, 103, 0, 0, 200, 201, 0, 0],  # the N-th cycle since the last full flush: 3 and 5
    ]
    assert batched.draft_runner.model.tokens == [2 * N, N, 2 * N]
    every = slots_of(reqs, [3, 5, 8])
    torch.testing.assert_close(pool.k[every], ref.k[every], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(pool.v[every], ref.v[every], rtol=1e-5, atol=1e-5)
    assert ref.k[every].abs().min() > 0
    assert batched._steps0_kv.pending.abs().sum() == 0 and batched._steps0_kv_members == ()


@pytest.mark.parametrize("tree_name", TREES)
def test_a_reused_pool_slot_writes_its_previous_owner_first(trees, tree_name: str) -> None:
    """A request that finished with pending entries, its pool slot taken by a new request's prefill: the old
    owner's entries are written before the prefill clears the slot's count (told apart by rid, not slot)."""
    tree = trees.get(tree_name)
    schedule = [("admit", 3, 17, 100), ("admit", 8, 5, 140), ("cycle", [3, 8]), ("cycle", [3, 8]),
                ("cycle", [3, 8]), ("admit", 8, 9, 230)]
    batched, per_cycle = draft_worker(tree, n=N), draft_worker(tree, n=0)
    reqs = run(batched, schedule)
    run(per_cycle, schedule)
    pool, ref = batched.draft_runner.token_to_kv_pool, per_cycle.draft_runner.token_to_kv_pool
    ((old,),) = [[rid for rid in reqs.left]]
    assert [w.tolist() for w in pool.writes] == [[100, 101, 102, 0, 140, 141, 142, 0]]
    gone = torch.tensor(reqs.left[old])
    assert gone.tolist() == [140, 141, 142]
    torch.testing.assert_close(pool.k[gone], ref.k[gone], rtol=1e-5, atol=1e-5)
    assert batched._steps0_kv.pending.abs().sum() == 0 and batched._steps0_kv_members == ()


@pytest.mark.parametrize("tree_name", TREES)
def test_the_departed_slots_reach_the_device_without_waiting_for_it(trees, tree_name: str) -> None:
    """The departed requests' pool slots (host ints) go to the device from pinned memory with non_blocking: a
    pageable host-to-device copy would wait for the stream, i.e. the previous batch, in the scheduler's loop."""
    seen: list[tuple] = []

    class Index:
        def __init__(self, t: torch.Tensor) -> None:
            self.t = t

        def to(self, device: Any, non_blocking: bool = False) -> torch.Tensor:
            seen.append(("to", device, non_blocking))
            return self.t.to(device)

    class TorchSpy:
        def __getattr__(self, name: str) -> Any:
            return getattr(torch, name)

        def tensor(self, data: Any, **kw: Any) -> Index:
            seen.append(("tensor", data, kw.get("pin_memory")))
            return Index(torch.tensor(data, dtype=kw.get("dtype")))

    worker = draft_worker(trees.get(tree_name), n=N, torch=TorchSpy(),
                          is_pin_memory_available=lambda device=None: device == "cpu")
    run(worker, [("admit", 3, 17, 100), ("admit", 8, 5, 140), ("cycle", [3, 8]), ("cycle", [3])])
    assert seen == [("tensor", [8], True), ("to", "cpu", True)]
    assert [w.tolist() for w in worker.draft_runner.token_to_kv_pool.writes] == [[140, 0, 0, 0]]


@pytest.mark.parametrize("tree_name", TREES)
def test_an_exit_flush_writes_the_pending_cycles_and_is_a_noop_after(trees, tree_name: str) -> None:
    tree = trees.get(tree_name)
    schedule = [("admit", 3, 17, 100), ("admit", 8, 5, 140), ("cycle", [3, 8]), ("cycle", [3, 8])]
    batched, per_cycle = draft_worker(tree, n=N), draft_worker(tree, n=0)
    reqs = run(batched, schedule + [("flush", [8, 3])])  # leaving steps 0 after two cycles
    run(per_cycle, schedule)
    (loc,) = batched.draft_runner.token_to_kv_pool.writes
    assert loc.tolist() == [140, 141, 0, 0, 100, 101, 0, 0]
    written = torch.tensor([100, 101, 140, 141])
    pool, ref = batched.draft_runner.token_to_kv_pool, per_cycle.draft_runner.token_to_kv_pool
    torch.testing.assert_close(pool.k[1:], ref.k[1:], rtol=1e-5, atol=1e-5)
    assert ref.k[written].abs().min() > 0
    assert batched._steps0_kv.cycles == 0 and batched._steps0_kv.pending.abs().sum() == 0
    batched._flush_steps0_kv(reqs.cycle([3, 8])[0])  # nothing pending: no forward
    assert batched.draft_runner.model.tokens == [2 * N]


@pytest.mark.parametrize("tree_name", TREES)
@pytest.mark.parametrize("n, mode", [(0, "null"), (1, "null"), (N, "decode")])
def test_otherwise_each_cycle_runs_0034s_kv_only_extend(trees, tree_name: str, n: int, mode: str) -> None:
    tree = trees.get(tree_name)
    assert "def _steps0_kv_ring(" in source(tree, WORKER).read_text()
    worker = draft_worker(tree, n=n, disaggregation_mode=mode)
    schedule = [("admit", 3, 17, 100), ("admit", 8, 5, 140)] + [("cycle", [3, 8])] * N
    run(worker, schedule)
    assert worker.draft_runner.model.tokens == [2] * N and worker._steps0_kv is None
    assert worker.read_done == [None] * N  # 0034's eager path publishes none
    assert [w.tolist() for w in worker.draft_runner.token_to_kv_pool.writes] == [[100 + c, 140 + c] for c in range(N)]


@pytest.mark.parametrize("tree_name", TREES)
def test_a_ring_over_the_cap_is_refused_once_and_each_cycle_runs_0034s_extend(trees, tree_name: str,
                                                                              monkeypatch) -> None:
    """The rings are allocated after the KV cache took its memory: past STEPS0_KV_RING_MAX_BYTES (a fixed cap, the
    same on every TP rank) the knob is refused with one log line and 0034's per-cycle extend runs."""
    tree = trees.get(tree_name)
    worker = draft_worker(tree, n=N)
    cap = ring_module(tree).STEPS0_KV_RING_MAX_BYTES
    assert 256 << 20 <= cap <= 1 << 30  # Kimi at N 8 (344 KB a request slot) fits a few hundred slots and more
    rows = cap // (N * AUX * H * 4) + 1  # float32 hidden states in this test: one slot past the cap
    worker.req_to_token_pool = SimpleNamespace(req_to_token=torch.zeros(rows, 1, dtype=torch.int32, device="meta"))
    schedule = [("admit", 3, 17, 100), ("admit", 8, 5, 140)] + [("cycle", [3, 8])] * N
    run(worker, schedule)
    assert worker._steps0_kv is None and worker._steps0_kv_refused
    assert worker.draft_runner.model.tokens == [2] * N  # one KV-only extend a cycle
    assert len(worker.logs) == 1 and "not used" in worker.logs[0] and "--max-running-requests" in worker.logs[0]


# --- the spec worker: where it flushes and clears ---------------------------------------------------


def recording(worker: Any) -> None:
    """Record the flushes and drafts of a spec worker of test_steps0_kv_only_extend, in its ``ran`` list."""
    dw = worker.draft_worker
    draft = dw.draft
    dw._flush_steps0_kv = lambda batch: worker.ran.append((worker.speculative_num_steps, "flush"))

    def recorded_draft(batch: Any) -> Any:
        worker.ran.append((worker.speculative_num_steps, "draft"))
        return draft(batch)

    dw.draft = recorded_draft


def forward(worker: Any) -> None:
    batch, _ = steps0_batch(BS)
    worker.forward_batch_generation(batch)


@pytest.mark.parametrize("tree_name", TREES)
def test_the_hold_flushes_before_its_full_extend_and_drafting_flushes_first(trees, tree_name: str,
                                                                           tmp_path: Path) -> None:
    tree = trees.get(tree_name)
    assert "_flush_steps0_kv" in source(tree, WORKER).read_text()
    ctl, worker, _ = hold_scenario(tree, tmp_path, steps0_max_bs=4)
    recording(worker)
    forward(worker)
    forward(worker)
    move_slot(ctl, 2)
    forward(worker)  # held: steps 0 with the full extend, whose attention reads the draft's KV
    forward(worker)
    assert worker.ran == [(0, "kv_only"), (0, "kv_only"), (0, "flush"), (0, "full"),
                          (2, "flush"), (2, "draft"), (2, "flush"), (2, "full")]


@pytest.mark.parametrize("tree_name", TREES)
def test_a_cold_upshift_flushes_before_it_drafts(trees, tree_name: str, tmp_path: Path) -> None:
    tree = trees.get(tree_name)
    assert "_flush_steps0_kv" in source(tree, WORKER).read_text()
    ctl, worker, _ = hold_scenario(tree, tmp_path, steps0_max_bs=2)  # no steps-0 graph for bs 3: no hold
    recording(worker)
    forward(worker)
    move_slot(ctl, 2)
    forward(worker)
    assert worker.ran == [(0, "kv_only"), (2, "flush"), (2, "draft"), (2, "flush"), (2, "full")]


@pytest.mark.parametrize("tree_name", TREES)
def test_a_prefill_clears_its_requests_counts_before_the_draft_prefill(trees, tree_name: str) -> None:
    tree = trees.get(tree_name)
    assert "_clear_steps0_kv" in source(tree, WORKER).read_text()
    worker = spec_worker(spec_worker_defs(tree, switch=True), steps=0)
    order: list[str] = []
    hidden = torch.randn(BS, AUX * H)
    worker.speculative_algorithm = SimpleNamespace(is_standalone=lambda: False)
    worker.target_worker = SimpleNamespace(forward_batch_generation=lambda batch, capture_hidden_mode: SimpleNamespace(
        logits_output=SimpleNamespace(hidden_states=hidden, mm_input_embeds=None), next_token_ids=torch.arange(BS)))
    worker.draft_worker._clear_steps0_kv = lambda batch: order.append(("clear", batch))
    worker.draft_worker._draft_extend_for_prefill = lambda batch, *args: order.append(("prefill", batch))
    worker.draft_worker._flush_departed_steps0_kv = lambda batch: order.append(("departed", batch))
    batch = SimpleNamespace(forward_mode=SimpleNamespace(is_extend=lambda: True, is_idle=lambda: False),
                            is_extend_in_batch=False, seq_lens=torch.arange(BS), req_pool_indices=torch.arange(BS))
    worker.forward_batch_generation(batch)
    assert order == [("clear", batch), ("prefill", batch)]  # nobody keeps pending entries: no departed check
    # Requests that kept entries: what left is written first, before the clear of a reused pool slot.
    order.clear()
    worker.draft_worker._steps0_kv_members = ((0, "req-0"),)
    worker.forward_batch_generation(batch)
    assert order == [("departed", batch), ("clear", batch), ("prefill", batch)]
