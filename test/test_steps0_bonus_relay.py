"""Patch 0038 (0.5.17 only): under the overlap scheduler, a steps-0 decode cycle (0037) with the KV-only draft write
(0034) relays its bonus token alone. The worker builds no zero stand-ins for the draft's top-k and hidden state,
and ``FutureMap.stash`` writes only the bonus row when a payload has no top-k values, leaving the other rows as the
last full extend wrote them. Without overlap (the next batch's spec_info is the result itself) and on a verify-path
steps-0 cycle the stand-ins stay. On CPU: the patched tree's stash, and its worker methods on
test_steps0_as_decode's stand-ins; the release crashes on a bonus-only payload (its test xfails).
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest
import torch
from sglang_trees import SHOWS_THE_BUG, TreeImporter, assert_switch_default
from sglang_trees import trees  # noqa: F401 (a fixture)
from test_fused_spec_stash import Spec
from test_steps0_as_decode import BONUS_ONLY, BS, decode_batch, spec_worker, worker_defs

OVERLAP = "sglang.srt.managers.overlap_utils"
TREES = ["patched", pytest.param("pristine", marks=SHOWS_THE_BUG)]
POOL, HIDDEN = 8, 6


def test_the_switch_exists_and_defaults_on(trees, monkeypatch) -> None:
    assert_switch_default(trees.get("patched"), BONUS_ONLY, monkeypatch, default=True)


@pytest.mark.parametrize("tree_name", TREES)
def test_a_bonus_only_payload_writes_the_bonus_and_keeps_the_other_rows(trees, monkeypatch, tree_name: str) -> None:
    overlap = TreeImporter.module(trees.get(tree_name), OVERLAP)
    monkeypatch.setitem(sys.modules, "sglang.srt.speculative.spec_utils",
                        SimpleNamespace(spec_need_hidden_states=lambda: True))
    monkeypatch.setenv("SGLANG_ENABLE_FUSED_SPEC_STASH", "0")
    pool = SimpleNamespace(req_to_token=torch.zeros(POOL, 8, dtype=torch.int32))
    fm = overlap.FutureMap(torch.device("cpu"), Spec(), pool, needs_cpu_seq_lens=False)
    slots = torch.tensor([1, 4, 6])
    full = overlap.RelayPayload(bonus_tokens=torch.tensor([11, 12, 13], dtype=torch.int32),
                                topk_p=torch.rand(3, 1), topk_index=torch.tensor([[5], [6], [7]]),
                                hidden_states=torch.randn(3, HIDDEN, dtype=torch.bfloat16))
    fm.stash(slots, full)  # a prefill's full payload first, as every request's first stash is
    kept = [fm.topk_p_buf[slots].clone(), fm.topk_index_buf[slots].clone(), fm.hidden_states_buf[slots].clone()]
    try:
        fm.stash(slots[:2], overlap.RelayPayload(bonus_tokens=torch.tensor([21, 22], dtype=torch.int32)))
    except AttributeError as exc:  # the release reads the absent top-k values
        pytest.fail(f"stash refused a bonus-only payload: {exc}")
    assert fm.output_tokens_buf[slots].tolist() == [21, 22, 13]
    assert fm.output_tokens_buf.dtype == torch.int64
    for buf, before in zip((fm.topk_p_buf, fm.topk_index_buf, fm.hidden_states_buf), kept):
        assert torch.equal(buf[slots], before), "the rows a full extend wrote stay"


def _overlap_batch() -> SimpleNamespace:
    batch = decode_batch()
    batch.spec_info.future_indices = torch.arange(BS)
    return batch


@pytest.mark.parametrize("overlap,switch", [(True, True), (False, True), (True, False)])
def test_a_kv_only_steps0_decode_cycle_stubs_only_without_overlap_or_switch(trees, monkeypatch, overlap: bool,
                                                                            switch: bool) -> None:
    worker = spec_worker(worker_defs(trees.get("patched"), monkeypatch, bonus_only=switch))
    out = worker.forward_batch_generation(_overlap_batch() if overlap else decode_batch())
    assert worker.ran == ["kv-only extend"] and len(worker.target_worker.forwards) == 1
    stubbed = getattr(out.next_draft_input, "topk_index", None) is not None
    assert stubbed is not (overlap and switch)
    assert out.next_draft_input.bonus_tokens.tolist() == worker.target_worker.sampled.tolist()


@pytest.mark.parametrize("path", ["verify", "full extend"])
def test_other_steps0_cycles_keep_their_draft_outputs_under_overlap(trees, monkeypatch, path: str) -> None:
    """A verify-path steps-0 cycle still stubs after the KV-only write; a full extend writes its own outputs."""
    defs = worker_defs(trees.get("patched"), monkeypatch, kv_only=path != "full extend")
    worker = spec_worker(defs, decode_runner=None if path == "verify" else "graphs")
    out = worker.forward_batch_generation(_overlap_batch())
    if path == "verify":
        assert worker.ran == ["trivial verify input", "verify", "kv-only extend"]
        assert out.next_draft_input.topk_index.shape == (BS, 1)
    else:
        assert worker.ran == ["full extend"]
