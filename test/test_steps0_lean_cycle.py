"""Patch 0043 (0.5.17 only): a steps-0 decode cycle's host launches, cut under overlap when asked.

With ``SGLANG_SPEC_STEPS0_LEAN_CYCLE`` on, a steps-0 decode cycle (0037) whose result goes through the overlap
scheduler's FutureMap (its draft input has future indices):
- with the KV-only draft write (0034) builds no zero stand-ins for the draft's top-k and hidden state, and
  ``FutureMap.stash`` writes only the bonus row of a payload without top-k values;
- keeps the bonus token int64 (the FutureMap's dtype) and gives its accept lengths as a host tensor, or on the
  device when the cycle runs the full draft extend;
- skips the float32 upcast of the graph's logits when sampling reads them only through an argmax.
Without overlap or with the switch off the cycle is as before. Also (unconditionally) 0038's log keeps a cycle's
rows with one foreach copy a dtype. On CPU: the patched tree's stash and log, its worker methods on
test_steps0_as_decode's stand-ins (device "meta", so that a host tensor is told from a device one); the release
crashes on a bonus-only payload and has no switch (its tests xfail).
"""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from sglang_trees import SHOWS_THE_BUG, TreeImporter, assert_switch_default, load_defs, source
from sglang_trees import trees  # noqa: F401 (a fixture)
from test_fused_spec_stash import Spec
from test_steps0_as_decode import BS, Target, decode_batch, spec_worker, worker_defs

SWITCH = "SGLANG_SPEC_STEPS0_LEAN_CYCLE"
OVERLAP = "sglang.srt.managers.overlap_utils"
COMMON = "sglang.srt.speculative.eagle_worker_common"
LOG = "sglang.srt.speculative.deferred_draft_kv"
TREES = ["patched", pytest.param("pristine", marks=SHOWS_THE_BUG)]
POOL, HIDDEN = 8, 6


@pytest.mark.parametrize("tree_name", TREES)
def test_the_switch_exists_and_defaults_off(trees, monkeypatch, tree_name: str) -> None:
    assert_switch_default(trees.get(tree_name), SWITCH, monkeypatch)


# --- FutureMap.stash --------------------------------------------------------------------------------


def future_map(tree: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    overlap = TreeImporter.module(tree, OVERLAP)
    # stash's first call imports spec_need_hidden_states from spec_utils, whose imports need the GPU stack
    monkeypatch.setitem(sys.modules, "sglang.srt.speculative.spec_utils",
                        SimpleNamespace(spec_need_hidden_states=lambda: True))
    monkeypatch.setenv("SGLANG_ENABLE_FUSED_SPEC_STASH", "0")
    pool = SimpleNamespace(req_to_token=torch.zeros(POOL, 8, dtype=torch.int32))
    return overlap, overlap.FutureMap(torch.device("cpu"), Spec(), pool, needs_cpu_seq_lens=False)


def full_payload(overlap: Any, n: int) -> Any:
    return overlap.RelayPayload(bonus_tokens=torch.arange(11, 11 + n, dtype=torch.int32),
                                topk_p=torch.rand(n, 1), topk_index=torch.arange(5, 5 + n).view(n, 1),
                                hidden_states=torch.randn(n, HIDDEN, dtype=torch.bfloat16))


def extras(fm: Any, slots: torch.Tensor) -> list[torch.Tensor]:
    return [fm.topk_p_buf[slots].clone(), fm.topk_index_buf[slots].clone(), fm.hidden_states_buf[slots].clone()]


@pytest.mark.parametrize("tree_name", TREES)
def test_a_bonus_only_payload_writes_the_bonus_and_keeps_the_other_rows(trees, monkeypatch, tree_name: str) -> None:
    overlap, fm = future_map(trees.get(tree_name), monkeypatch)
    slots = torch.tensor([1, 4, 6])
    fm.stash(slots, full_payload(overlap, 3))  # a prefill's full payload first, as every request's first stash is
    kept = extras(fm, slots)
    try:
        fm.stash(slots[:2], overlap.RelayPayload(bonus_tokens=torch.tensor([21, 22])))
    except AttributeError as exc:  # the release reads the absent top-k values
        pytest.fail(f"stash refused a bonus-only payload: {exc}")
    assert fm.output_tokens_buf[slots].tolist() == [21, 22, 13]
    assert fm.output_tokens_buf.dtype == torch.int64
    for after, before in zip(extras(fm, slots), kept):
        assert torch.equal(after, before), "the rows the last full extend wrote stay"


# --- the worker's steps-0 decode cycle ---------------------------------------------------------------


class LeanTarget(Target):
    """Target's stand-in that records whether the logits were upcast before sampling (Target asserts it)."""

    def __init__(self) -> None:
        super().__init__()
        self.upcast_seen: list[bool] = []

    def sample(self, logits_output: Any, forward_batch: Any) -> torch.Tensor:
        self.upcast_seen.append(getattr(logits_output, "upcast", False))
        self.sampled = torch.arange(20, 20 + BS, dtype=torch.int64)
        return self.sampled


def lean_worker(trees: Any, monkeypatch: pytest.MonkeyPatch, switch: bool, kv_only: bool = True) -> Any:
    worker = spec_worker(worker_defs(trees.get("patched"), monkeypatch, kv_only=kv_only), target=LeanTarget())
    worker._steps0_lean, worker.device = switch, "meta"
    return worker


def steps0_batch(overlap: bool, argmax_only: bool = True) -> SimpleNamespace:
    batch = decode_batch(sampling_info=SimpleNamespace(argmax_only=argmax_only))
    if overlap:
        batch.spec_info.future_indices = torch.arange(BS)
    return batch


@pytest.mark.parametrize("overlap,switch", [(True, True), (False, True), (True, False)])
def test_a_lean_cycle_relays_the_bonus_alone_with_host_accept_lengths(trees, monkeypatch, overlap: bool,
                                                                        switch: bool) -> None:
    worker = lean_worker(trees, monkeypatch, switch)
    out = worker.forward_batch_generation(steps0_batch(overlap))
    lean = overlap and switch
    assert worker.ran == ["kv-only extend"] and len(worker.target_worker.forwards) == 1
    draft_input = out.next_draft_input
    assert (getattr(draft_input, "topk_index", None) is None) is lean, "no stand-ins exactly when lean"
    assert draft_input.bonus_tokens.tolist() == worker.target_worker.sampled.tolist()
    assert draft_input.bonus_tokens.dtype == (torch.int64 if lean else torch.int32)
    assert out.accept_lens.device.type == ("cpu" if lean else "meta")
    assert out.accept_lens.dtype == torch.int32 and out.accept_lens.shape == (BS,)
    if lean:
        assert out.accept_lens.tolist() == [1] * BS
    assert worker.target_worker.upcast_seen == [not lean], "the upcast is skipped exactly when lean (argmax only)"


def test_the_relayed_bonus_reaches_the_future_map_and_the_rows_stay(trees, monkeypatch) -> None:
    """The lean result through the scheduler's relay (RelayPayload.from_draft_input, then stash)."""
    overlap, fm = future_map(trees.get("patched"), monkeypatch)
    slots = torch.tensor([2, 5, 7])
    fm.stash(slots, full_payload(overlap, BS))
    kept = extras(fm, slots)
    worker = lean_worker(trees, monkeypatch, switch=True)
    out = worker.forward_batch_generation(steps0_batch(overlap=True))
    # EagleDraftInput's fields default to None (eagle_info.py); the stand-in has only those the worker set
    unset = dict(topk_p=None, topk_index=None, hidden_states=None, dsa_topk_indices=None)
    fm.stash(slots, overlap.RelayPayload.from_draft_input(SimpleNamespace(**{**unset, **vars(out.next_draft_input)})))
    assert fm.output_tokens_buf[slots].tolist() == worker.target_worker.sampled.tolist()
    for after, before in zip(extras(fm, slots), kept):
        assert torch.equal(after, before)


def test_a_batch_sampled_otherwise_keeps_the_upcast(trees, monkeypatch) -> None:
    worker = lean_worker(trees, monkeypatch, switch=True)
    out = worker.forward_batch_generation(steps0_batch(overlap=True, argmax_only=False))
    assert worker.target_worker.upcast_seen == [True]
    assert getattr(out.next_draft_input, "topk_index", None) is None  # the relay is lean all the same


def test_a_lean_cycle_that_runs_the_full_extend_gets_device_accept_lengths(trees, monkeypatch) -> None:
    """Where the KV-only write cannot serve, the full draft extend reads the accept lengths on the device."""
    worker = lean_worker(trees, monkeypatch, switch=True, kv_only=False)
    out = worker.forward_batch_generation(steps0_batch(overlap=True))
    assert worker.ran == ["full extend"]
    assert out.accept_lens.device.type == "meta" and out.accept_lens.dtype == torch.int32
    assert out.accept_lens.shape == (BS,)


def test_the_host_accept_lengths_grow_with_the_batch(trees, monkeypatch) -> None:
    worker = lean_worker(trees, monkeypatch, switch=True)
    small = worker._steps0_accept_lens_host(3)
    large = worker._steps0_accept_lens_host(100)
    assert small.tolist() == [1] * 3 and large.tolist() == [1] * 100
    assert worker._steps0_accept_lens_host(5).data_ptr() == large.data_ptr(), "one buffer, sliced"


# --- which sampling reads the logits only through an argmax -------------------------------------------


def sampling_info(**changes: Any) -> SimpleNamespace:
    info = SimpleNamespace(is_all_greedy=True, has_custom_logit_processor=False, grammar_mask=None, logit_bias=None,
                           acc_additive_penalties=None, acc_scaling_penalties=None,
                           penalizer_orchestrator=SimpleNamespace(is_required=False), return_sampling_masks=None)
    for key, value in changes.items():
        setattr(info, key, value)
    return info


@pytest.mark.parametrize("changes,expected", [
    ({}, True),
    ({"penalizer_orchestrator": None}, True),
    ({"return_sampling_masks": [False, False]}, True),
    ({"is_all_greedy": False}, False),
    ({"has_custom_logit_processor": True}, False),
    ({"grammar_mask": object()}, False),
    ({"logit_bias": torch.zeros(4)}, False),
    ({"acc_additive_penalties": torch.zeros(4)}, False),
    ({"acc_scaling_penalties": torch.ones(4)}, False),
    ({"penalizer_orchestrator": SimpleNamespace(is_required=True)}, False),
    ({"return_sampling_masks": [False, True]}, False),
])
def test_logits_read_by_argmax_only(trees, changes: dict, expected: bool) -> None:
    fn = load_defs(source(trees.get("patched"), COMMON), ["logits_read_by_argmax_only"])["logits_read_by_argmax_only"]
    assert fn(sampling_info(**changes)) is expected


def test_bf16_argmax_is_the_argmax_of_the_upcast() -> None:
    """The skip's premise, on random bf16 logits with ties (exact upcast, first-max rule)."""
    gen = torch.Generator().manual_seed(0)
    logits = (torch.randn(64, 1000, generator=gen) * 4).to(torch.bfloat16)
    logits[:, 7] = logits.max(dim=-1).values  # a tie with an earlier or later maximum in every row
    assert torch.equal(torch.argmax(logits, -1), torch.argmax(logits.float(), -1))


# --- 0038's log: one copy a dtype ---------------------------------------------------------------------


def test_the_log_keeps_a_cycle_with_one_foreach_copy_a_dtype(trees, monkeypatch) -> None:
    log = TreeImporter.module(trees.get("patched"), LOG).DeferredDraftKV(max_cycles=4)
    calls: list[list[torch.dtype]] = []
    foreach = torch._foreach_copy_

    def counting(dsts: list[torch.Tensor], srcs: list[torch.Tensor], **kwargs: Any) -> None:
        calls.append([d.dtype for d in dsts])
        foreach(dsts, srcs, **kwargs)

    monkeypatch.setattr(torch, "_foreach_copy_", counting)
    written: list[tuple[torch.Tensor, ...]] = []
    rows = [(torch.arange(BS) + 10 * c, torch.arange(BS) * 7 + c, torch.arange(BS) * 100 + c,
             torch.randn(BS, HIDDEN, dtype=torch.bfloat16)) for c in range(4)]
    for c, (ids, pos, loc, hidden) in enumerate(rows):
        log.keep(("r",), ids, pos, loc, hidden, lambda *t: written.append(tuple(x.clone() for x in t)))
    assert len(calls) == 2 * 4, "two copies a cycle: the int64 rows together, the hidden states"
    assert sorted(calls, key=len) == [[torch.bfloat16]] * 4 + [[torch.int64] * 3] * 4
    (ids, pos, hidden, loc), = written  # forward_draft_kv_only's order, all four cycles in one write
    assert torch.equal(ids, torch.cat([r[0] for r in rows])) and torch.equal(pos, torch.cat([r[1] for r in rows]))
    assert torch.equal(loc, torch.cat([r[2] for r in rows])) and torch.equal(hidden, torch.cat([r[3] for r in rows]))
