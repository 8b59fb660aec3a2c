"""Speculation off path (0.5.17 only, SGLANG_SPEC_OFF_PATH): a steps-0 decode batch served as a plain decode cycle.

With the switch on, 0037's DECODE graphs of the steps-0 state and 0038's deferred log, under the overlap scheduler:
a decode batch that ``--speculative-adaptive`` routes to steps 0 leaves speculation for that cycle. The worker runs
the target through the steps-0 state's DECODE graphs (FULL capture: aux hidden states) and the ordinary sampler,
keeps the draft's KV row (sampled token, decoded position, slot, aux hidden) in the deferred log and marks the
KV-only stretch, so the first drafting cycle after it holds one steps-0 cycle with the full draft extend. The
result has no accept lengths and no draft input. Batches it cannot serve (grammar, logprobs, returned hidden
states, above the DECODE graphs' bs, another step count) stay on speculation. This file: the switch and the
worker; ``test_spec_off_path_bookkeeping.py``: the scheduler's and ScheduleBatch's side. All on CPU with
stand-ins around the patched tree's methods; the release has none of it (its tests xfail).
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from sglang_trees import SHOWS_THE_BUG, TreeImporter, assert_switch_default, tree_defs
from sglang_trees import env_flag as flag
from sglang_trees import trees  # noqa: F401 (a fixture)
from test_steps0_as_decode import FULL, H_AUX, ForwardBatchRecorder, Result, Target

SWITCH = "SGLANG_SPEC_OFF_PATH"
WORKER = "sglang.srt.speculative.eagle_worker_v2"
LOG = "sglang.srt.speculative.deferred_draft_kv"
TREES = ["patched", pytest.param("pristine", marks=SHOWS_THE_BUG)]
BS = 3  # Target (test_steps0_as_decode) samples and returns hidden states for 3 rows


@pytest.mark.parametrize("tree_name", TREES)
def test_the_switch_exists_and_defaults_off(trees, monkeypatch, tree_name: str) -> None:
    assert_switch_default(trees.get(tree_name), SWITCH, monkeypatch)


# --- the worker ---------------------------------------------------------------------------------------


def off_defs(tree: Path, as_decode: bool = True) -> dict[str, Any]:
    extra = {
        "CaptureHiddenMode": SimpleNamespace(NULL=0, LAST=1, FULL=FULL), "ForwardBatch": ForwardBatchRecorder,
        "GenerationBatchResult": Result, "torch": torch,
        "upcast_verify_logits": lambda logits_output: setattr(logits_output, "upcast", True),
        "logits_read_by_argmax_only": lambda sampling_info: sampling_info.argmax_only,
        "spec_cycle_stats": SimpleNamespace(ENABLED=False),
        "speculative_moe_backend_context": nullcontext, "speculative_moe_a2a_backend_context": nullcontext,
        "envs": SimpleNamespace(SGLANG_SPEC_STEPS0_AS_DECODE=flag(as_decode)),
    }
    names = ["EAGLEWorkerV2._spec_off_path_supported", "EAGLEWorkerV2.spec_off_ok",
             "EAGLEWorkerV2.forward_decode_off", "EAGLEWorkerV2._target_decode_step",
             "EAGLEWorkerV2._decode_graphs_serve",
             "EAGLEWorkerV2.activate_step_by_batch"]
    defs = tree_defs(tree, WORKER, names, extra=extra)
    defs |= tree_defs(tree, WORKER, ["EagleDraftWorker.keep_draft_kv_rows"], extra={"torch": torch})
    return defs


class Controller:
    """AdaptiveController's stand-in: routes every bs to ``steps``; activating a state installs its DECODE
    graphs as apply_runtime_state does (only the steps-0 state has them)."""

    def __init__(self, worker: Any, steps: int, decode_runner: Any) -> None:
        self.worker, self.steps, self.calls = worker, steps, []
        self._states = {0: SimpleNamespace(target_decode_graph_runner=decode_runner), 3: SimpleNamespace(
            target_decode_graph_runner=None)}

    def wants_steps(self, bs: int) -> int:
        return self.steps

    def activate_step_by_batch(self, bs: int) -> None:
        self.calls.append(("activate", bs))
        self.worker.speculative_num_steps = self.steps
        self.worker._steps0_decode_runner = self._states[self.steps].target_decode_graph_runner

    def hold(self, steps: int, bs: int) -> bool:
        self.calls.append(("hold", steps, bs))
        return True


def off_worker(tree: Path, steps: int = 0, decode_runner: Any = "graphs", target: Target | None = None,
               max_cycles: int = 4) -> Any:
    defs = off_defs(tree)
    log = TreeImporter.module(tree, LOG).DeferredDraftKV(max_cycles=max_cycles)

    class DraftWorker:
        def __init__(self) -> None:
            self.device, self.deferred_kv, self.written = "cpu", log, []
            self.draft_runner = SimpleNamespace(tp_group=None, war_fastpath_read_done_event=None)
            self.draft_tp_context = lambda group: nullcontext()

        def _write_draft_kv(self, *rows: torch.Tensor) -> None:
            self.written.append(tuple(r.clone() for r in rows))

    class OffWorker:
        _draft_kv_only_last = False
        _steps0_decode_runner = None
        spec_off_path = True

        def __init__(self) -> None:
            self.speculative_num_steps = 3
            self.target_worker = self._target_worker = target or Target()
            self.draft_worker = self._draft_worker = DraftWorker()
            runner = SimpleNamespace(max_bs=8, name="decode graphs") if decode_runner == "graphs" else None
            self.adaptive_controller = Controller(self, steps, runner)

    for name, fn in defs.items():
        cls = DraftWorker if name.startswith("EagleDraftWorker.") else OffWorker
        setattr(cls, name.rpartition(".")[2], fn)
    return OffWorker()


def off_batch(bs: int = BS, **changes: Any) -> SimpleNamespace:
    """A decode batch as run_batch hands it to the worker: prepare_off_forward done (the token counted in
    seq_lens, the slot taken, no spec info), the input gathered from the FutureMap."""
    mode = changes.pop("mode", "decode")
    batch = SimpleNamespace(
        seq_lens=torch.arange(11, 11 + bs, dtype=torch.int64), seq_lens_cpu=torch.arange(11, 11 + bs), seq_lens_sum=None,
        req_pool_indices=torch.arange(1, 1 + bs, dtype=torch.int64),
        reqs=[SimpleNamespace(req_pool_idx=i) for i in range(1, 1 + bs)],
        out_cache_loc=torch.arange(300, 300 + bs, dtype=torch.int64), input_ids=torch.arange(7, 7 + bs),
        has_grammar=False, return_logprob=False, return_hidden_states=False, spec_info=None,
        sampling_info=SimpleNamespace(argmax_only=False),
        forward_mode=SimpleNamespace(is_decode=lambda: mode == "decode", is_idle=lambda: mode == "idle"))
    for key, value in changes.items():
        setattr(batch, key, value)
    return batch


@pytest.mark.parametrize("tree_name", TREES)
def test_an_off_cycle_runs_the_decode_graphs_and_keeps_the_draft_row(trees, tree_name: str) -> None:
    ForwardBatchRecorder.seen = []
    worker = off_worker(trees.get(tree_name))
    target, log = worker.target_worker, worker.draft_worker.deferred_kv
    batch = off_batch()
    seq_lens, loc, input_ids = batch.seq_lens, batch.out_cache_loc, batch.input_ids
    out = worker.forward_decode_off(batch)

    # the steps-0 state routed (symmetric over TP), its DECODE graphs met, the verify graphs back after
    assert worker.adaptive_controller.calls == [("activate", BS)]
    (fwd,) = target.forwards
    assert fwd["runner"].name == "decode graphs" and fwd["is_verify"] and fwd["batch"] is None
    assert target.model_runner.decode_cuda_graph_runner is target.verify_runner
    # the forward saw the batch as the scheduler left it: nothing swapped, FULL capture for the aux hidden
    (seen,) = ForwardBatchRecorder.seen
    assert seen["seq_lens"].tolist() == seq_lens.tolist() and seen["spec_info"] is None
    assert seen["input_ids"] is input_ids and seen["out_cache_loc"] is loc and seen["capture_hidden_mode"] == FULL
    assert batch.seq_lens is seq_lens and batch.out_cache_loc is loc and batch.spec_info is None
    # the draft's row kept, not written: EAGLE's shift (sampled token at the decoded token's position)
    assert worker.draft_worker.written == [] and log.rows == BS and log.cycles == 1
    assert log.key == (1, 2, 3)
    ids, pos, hidden, slots = (buf[:BS] for buf in log._buffers)
    assert ids.tolist() == target.sampled.tolist() and ids.dtype == torch.int64
    assert pos.tolist() == (seq_lens - 1).tolist() and pos.dtype == torch.int64
    assert slots.tolist() == loc.tolist()
    assert hidden.shape == (BS, H_AUX)
    assert worker.draft_worker.draft_runner.war_fastpath_read_done_event is not None
    assert worker._draft_kv_only_last is True, "the next drafting cycle must hold steps 0 with the full extend"
    # a plain decode result: no accept lengths, no draft input, no spec stride
    assert out.next_token_ids is target.sampled and out.extra_keep_alive_refs == [fwd["forward_batch"]]
    assert not hasattr(out, "accept_lens") and not hasattr(out, "next_draft_input")
    assert not hasattr(out, "speculative_num_draft_tokens") and not hasattr(out, "new_seq_lens")
    assert out.can_run_cuda_graph is True and out.routed_experts_output == "experts"


@pytest.mark.parametrize("tree_name", TREES)
def test_off_cycles_fill_the_log_and_switching_on_holds_steps0(trees, tree_name: str) -> None:
    worker = off_worker(trees.get(tree_name), max_cycles=2)
    log, written = worker.draft_worker.deferred_kv, worker.draft_worker.written
    for cycle in range(3):
        batch = off_batch()
        batch.seq_lens = batch.seq_lens + cycle
        worker.forward_decode_off(batch)
    (ids, pos, hidden, loc), = written  # two cycles in one write, the third kept
    assert pos.tolist() == [10, 11, 12, 11, 12, 13] and log.rows == BS
    # the policy moves on: the next forward routes to steps 3 and holds steps 0 for one cycle
    worker.adaptive_controller.steps = 3
    worker.adaptive_controller.calls = []
    worker.activate_step_by_batch(BS)
    assert worker.adaptive_controller.calls == [("activate", BS), ("hold", 0, BS)]
    assert worker._draft_kv_only_last is False


class ReplayTarget(Target):
    """A target whose DECODE graph replay publishes its pre-replay read-done event on the model runner, as
    DecodeCudaGraphRunner.execute does for DECODE (``publishes`` False: a forward that published none)."""

    def __init__(self, publishes: bool) -> None:
        super().__init__()
        self.publishes, self.model_runner.war_fastpath_read_done_event = publishes, None

    def forward_batch_generation(self, batch: Any, forward_batch: Any = None, is_verify: bool = False) -> Any:
        if self.publishes:
            self.model_runner.war_fastpath_read_done_event = f"pre-replay {len(self.forwards)}"
        return super().forward_batch_generation(batch, forward_batch, is_verify)


@pytest.mark.parametrize("tree_name", TREES)
def test_the_war_barrier_waits_for_the_decode_replays_snapshot_not_the_cycle(trees, tree_name: str) -> None:
    # The scheduler fences its next writes on the draft runner's event (the spec worker's war_fastpath_runner).
    # After an off cycle that is the DECODE replay's pre-replay event, as after plain decode, not one recorded
    # after the whole cycle; the target runner's slot is left empty.
    target = ReplayTarget(publishes=True)
    worker = off_worker(trees.get(tree_name), target=target)
    draft_runner = worker.draft_worker.draft_runner
    for cycle in range(2):
        worker.forward_decode_off(off_batch())
        assert draft_runner.war_fastpath_read_done_event == f"pre-replay {cycle}"
        assert target.model_runner.war_fastpath_read_done_event is None
    # A forward that published none (e.g. eager) keeps the cycle-end event; an event an earlier forward left on
    # the target runner (a steps-0 spec cycle's replay, which nobody takes) is never handed over.
    target = ReplayTarget(publishes=False)
    worker = off_worker(trees.get(tree_name), target=target)
    target.model_runner.war_fastpath_read_done_event = "an earlier cycle's"
    worker.forward_decode_off(off_batch())
    event = worker.draft_worker.draft_runner.war_fastpath_read_done_event
    assert event is not None and not isinstance(event, str)


@pytest.mark.parametrize("tree_name", TREES)
def test_a_failed_off_forward_puts_the_verify_graphs_back(trees, tree_name: str) -> None:
    target = Target(fail=True)
    worker = off_worker(trees.get(tree_name), target=target)
    with pytest.raises(RuntimeError, match="forward failed"):
        worker.forward_decode_off(off_batch())
    assert target.model_runner.decode_cuda_graph_runner is target.verify_runner
    assert worker.draft_worker.deferred_kv.rows == 0 and worker._draft_kv_only_last is False


@pytest.mark.parametrize("tree_name", TREES)
@pytest.mark.parametrize("case", ["eligible", "switch-off", "grammar", "logprobs", "hidden-states", "above-max-bs",
                                  "steps3", "no-decode-graphs"])
def test_which_batches_leave_speculation(trees, tree_name: str, case: str) -> None:
    worker = off_worker(trees.get(tree_name), steps=3 if case == "steps3" else 0,
                        decode_runner=None if case == "no-decode-graphs" else "graphs")
    worker.spec_off_path = case != "switch-off"
    changes = {"grammar": {"has_grammar": True}, "logprobs": {"return_logprob": True},
               "hidden-states": {"return_hidden_states": True}}
    batch = off_batch(9 if case == "above-max-bs" else BS, **changes.get(case, {}))
    assert worker.spec_off_ok(batch) is (case == "eligible")
    assert worker.adaptive_controller.calls == [], "deciding routes nothing"


@pytest.mark.parametrize("tree_name", TREES)
@pytest.mark.parametrize("case", ["supported", "no-deferred-log", "not-as-decode", "not-adaptive", "no-overlap",
                                  "mamba-lazy-buffer"])
def test_the_path_needs_the_deferred_log_decode_graphs_and_overlap(trees, tree_name: str, case: str) -> None:
    fn = off_defs(trees.get(tree_name), as_decode=case != "not-as-decode")["EAGLEWorkerV2._spec_off_path_supported"]
    worker = SimpleNamespace(adaptive_controller=None if case == "not-adaptive" else object(),
                             _draft_worker=SimpleNamespace(deferred_kv=None if case == "no-deferred-log" else "log"))
    server_args = SimpleNamespace(disable_overlap_schedule=case == "no-overlap",
                                  enable_mamba_extra_buffer_lazy=lambda: case == "mamba-lazy-buffer")
    assert bool(fn(worker, server_args)) is (case == "supported")
