"""Patch 0027: target-verify CUDA graphs pack the EAGLE-3 aux hidden states into one shared buffer when asked, on CPU.

A verify forward with ``CaptureHiddenMode.FULL`` hands the draft the target's aux hidden states packed into
``[tokens, 3 * hidden]``. Inside a CUDA-graph capture that packed tensor comes from the graph memory pool and stays
alive as the graph's output, once per captured batch size and, with ``--speculative-adaptive``, per draft width (352
MiB of the dense-8 K set's graph memory by the buffer shapes, ``docs/graph-memory-k-set.md`` step D). With
``SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN`` every verify capture packs into a view of one process-wide buffer per feature
width instead. ``LogitsProcessor._get_hidden_states_to_store`` runs here from the patched 0.5.17 tree on CPU tensors,
with the capture state, the switch and SGLang's named buffers (``runtime_context.get_buffer``) stood in. The pristine
release packs each capture on its own: the sharing checks fail there.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import pytest
import torch
from sglang_trees import SHOWS_THE_BUG, load_defs, source
from sglang_trees import trees  # noqa: F401 (a fixture)

LOGITS = "sglang.srt.layers.logits_processor"
AUX = "sglang.srt.layers.aux_hidden_states"
HIDDEN = 8
PATCHED_0517 = ["patched", pytest.param("pristine", marks=SHOWS_THE_BUG)]


class Mode:
    def __init__(self, name: str) -> None:
        self.name = name

    def is_target_verify(self) -> bool:
        return self.name == "target_verify"


FULL = SimpleNamespace(need_capture=lambda: True, is_full=lambda: True, is_last=lambda: False)


class Switch:
    def __init__(self, on: bool) -> None:
        self.on = on

    def get(self) -> bool:
        return self.on


def store_fn(tree: Path, switch: bool, buffers: dict) -> Callable[..., torch.Tensor]:
    """``_get_hidden_states_to_store`` of the tree, as a function of (aux hidden states, forward mode)."""
    pack = load_defs(source(tree, AUX), ["pack_aux_hidden_states"])["pack_aux_hidden_states"]
    extra = {"pack_aux_hidden_states": pack, "get_buffer": lambda key, make: buffers.setdefault(key, make()),
             "envs": SimpleNamespace(SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN=Switch(switch))}
    names = ["LogitsProcessor._get_hidden_states_to_store"]
    if "def pack_verify_aux_hidden_states" in source(tree, LOGITS).read_text():
        names.insert(0, "pack_verify_aux_hidden_states")
    method = load_defs(source(tree, LOGITS), names, extra=extra)["LogitsProcessor._get_hidden_states_to_store"]

    def store(aux: Any, mode: str) -> torch.Tensor:
        metadata = SimpleNamespace(capture_hidden_mode=FULL, forward_mode=Mode(mode))
        return method(None, torch.zeros(1), None, aux, torch.zeros(1), None, None, None, metadata)

    return store


def aux(rows: int, seed: int) -> list[torch.Tensor]:
    """Three captured layers' hidden states of ``rows`` tokens (Llama's list form)."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(rows, HIDDEN, generator=g, dtype=torch.bfloat16) for _ in range(3)]


@pytest.fixture
def capturing(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)


def storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


@pytest.mark.parametrize("tree_name", PATCHED_0517)
def test_verify_captures_of_every_bs_and_width_pack_into_one_buffer(trees, tree_name: str, capturing) -> None:
    buffers: dict = {}
    store = store_fn(trees.get(tree_name), True, buffers)
    first = aux(64 * 8, 0)  # the widest capture first (bs 64, K 8), as a runner captures its largest bs first
    out = store(first, "target_verify")
    assert torch.equal(out, torch.cat(first, dim=-1))
    later = [store(aux(bs * k, bs + k), "target_verify") for bs, k in ((32, 8), (64, 4), (1, 2))]
    assert {storage(t) for t in later} == {storage(out)}
    assert [t.shape for t in later] == [(256, 3 * HIDDEN), (256, 3 * HIDDEN), (2, 3 * HIDDEN)]
    assert torch.equal(later[-1], torch.cat(aux(2, 3), dim=-1))


@pytest.mark.parametrize("tree_name", PATCHED_0517)
def test_a_packed_tensor_is_copied_into_the_buffer(trees, tree_name: str, capturing) -> None:
    """DeepSeek/Kimi pack with ``AuxHiddenStatePacker``: one ``[tokens, 3 * hidden]`` tensor."""
    buffers: dict = {}
    store = store_fn(trees.get(tree_name), True, buffers)
    a = store(torch.cat(aux(16, 1), dim=-1), "target_verify")
    packed = torch.cat(aux(8, 2), dim=-1)
    b = store(packed, "target_verify")
    assert storage(b) == storage(a) and torch.equal(b, packed) and b.data_ptr() != packed.data_ptr()


@pytest.mark.parametrize("tree_name", PATCHED_0517)
def test_a_capture_past_the_buffer_gets_a_new_one_and_the_old_keeps_its_rows(trees, tree_name: str, capturing) -> None:
    buffers: dict = {}
    store = store_fn(trees.get(tree_name), True, buffers)
    small_input = aux(4, 5)
    small = store(small_input, "target_verify")
    big = store(aux(32, 6), "target_verify")
    assert storage(big) != storage(small) and big.shape[0] == 32
    assert torch.equal(small, torch.cat(small_input, dim=-1))
    assert storage(store(aux(16, 7), "target_verify")) == storage(big)


@pytest.mark.parametrize("tree_name", ["patched", "pristine"])
@pytest.mark.parametrize("switch,capture,mode", [(False, True, "target_verify"), (True, False, "target_verify"),
                                                 (True, True, "draft_extend"), (True, True, "extend")])
def test_off_outside_capture_or_outside_verify_each_call_packs_its_own(trees, monkeypatch, tree_name: str,
                                                                      switch: bool, capture: bool, mode: str) -> None:
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: capture)
    buffers: dict = {}
    store = store_fn(trees.get(tree_name), switch, buffers)
    a, b = store(aux(8, 1), mode), store(aux(8, 2), mode)
    assert storage(a) != storage(b) and torch.equal(b, torch.cat(aux(8, 2), dim=-1))
    assert not buffers


def test_a_batch_returning_hidden_states_gets_its_own_copy(trees) -> None:
    """Its D2H copy runs on the copy stream, overlapping the next verify that rewrites the shared buffer."""
    worker = "sglang.srt.speculative.eagle_worker_v2"
    own = load_defs(source(trees.get("patched"), worker), ["EAGLEWorkerV2._own_verify_hidden_states"])[
        "EAGLEWorkerV2._own_verify_hidden_states"]
    shared = torch.cat(aux(4, 1), dim=-1)
    result = SimpleNamespace(logits_output=SimpleNamespace(hidden_states=shared[:2]))
    own(result)
    copy = result.logits_output.hidden_states
    assert storage(copy) != storage(shared) and torch.equal(copy, shared[:2])
    shared.zero_()  # the next verify's replay
    assert not torch.equal(copy, shared[:2])
    own(SimpleNamespace(logits_output=None))  # an idle batch has no logits output
