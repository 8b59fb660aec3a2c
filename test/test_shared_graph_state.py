"""Patch 0026: the Triton backend's CUDA-graph state is aliased across graph runners when asked, on CPU.

With ``--speculative-adaptive`` every runtime state builds its own target-verify, draft-extend and
multi-step draft runners, and each ``init_cuda_graph_state`` allocated its own split-KV partials
(``attn_logits``, ``attn_lse``) and kv-indices buffers, sized by that state's K. With
``SGLANG_TRITON_SHARED_GRAPH_STATE`` the partials of one shape are one process-wide buffer for every
runner, kv indices one per role (target / draft, verify-decode / multi-step), first sized for the widest
verify any state may capture (``max_speculative_num_draft_tokens``) so that later states add nothing.
``init_cuda_graph_state`` of both backend classes runs here from the patched 0.5.17 tree on stand-in
backends with CPU tensors; SGLang's process-level named buffers (``runtime_context.get_buffer``) are a
dict. The pristine release allocates per runner: the sharing checks fail there.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import pytest
import torch
from sglang_trees import SHOWS_THE_BUG, TreeImporter, load_defs, source
from sglang_trees import trees  # noqa: F401 (a fixture)

BACKEND = "sglang.srt.layers.attention.triton_backend"
SWITCH = "SGLANG_TRITON_SHARED_GRAPH_STATE"
HEADS, SPLITS, HEAD_DIM, CONTEXT = 2, 4, 8, 16
K_MAX = 8  # the widest verify of the adaptive K set 2/3/4/6/8
PATCHED_0517 = ["patched", pytest.param("pristine", marks=SHOWS_THE_BUG)]


def loaded(tree: Path, name: str, buffers: dict) -> Callable[..., None]:
    """``name`` of the tree's Triton backend, with its named-buffer registry stood in by ``buffers``."""
    extra = {"maybe_create_verify_mask": lambda **_: None,
             "get_buffer": lambda key, make: buffers.setdefault(key, make()),
             "draft_kv_indices_buffer_width": lambda max_bs, topk, context: max_bs * topk * context}
    names = [name]
    if "_graph_state_buffer" in source(tree, BACKEND).read_text():
        names.insert(0, "_graph_state_buffer")
    return load_defs(source(tree, BACKEND), names, extra=extra)[name]


def attn_backend(init: Callable[..., None], shared: bool, draft: bool = False, skip_prefill: bool = False,
                 topk: int = 0) -> Any:
    """A stand-in ``TritonAttnBackend`` with the fields ``init_cuda_graph_state`` reads. ``topk`` 0 (no EAGLE
    topk) keeps the split-KV partials at the runner's max_num_tokens rows, as before patch 0042."""
    b = SimpleNamespace(
        num_head=HEADS, max_kv_splits=SPLITS, v_head_dim=HEAD_DIM, swa_v_head_dim=None, device="cpu", topk=topk,
        max_context_len=CONTEXT, is_draft_runner=draft, skip_prefill=skip_prefill, num_draft_tokens=4,
        sliding_window_size=None, use_sliding_window_kv_pool=False, _translate_kv_loc=None,
        share_graph_state=shared, max_graph_rows_per_req=K_MAX, max_graph_rows=lambda max_bs: None,
    )
    b.init_cuda_graph_state = init.__get__(b)
    return b


def verify_state(tree: Path, buffers: dict, shared: bool, max_bs: int, k: int, draft: bool = False,
                 topk: int = 0) -> Any:
    """One adaptive state's target-verify (or draft-extend, ``draft``) backend after its graph state init."""
    b = attn_backend(loaded(tree, "TritonAttnBackend.init_cuda_graph_state", buffers), shared, draft, topk=topk)
    b.init_cuda_graph_state(max_bs, max_bs * k)
    return b


def multi_step_state(tree: Path, buffers: dict, shared: bool, max_bs: int, steps: int) -> Any:
    """One adaptive state's multi-step draft backend (topk 1) after its graph state init."""
    init = loaded(tree, "TritonAttnBackend.init_cuda_graph_state", buffers)
    steps_init = loaded(tree, "TritonMultiStepDraftBackend.init_cuda_graph_state", buffers)
    m = SimpleNamespace(topk=1, speculative_num_steps=steps, max_context_len=CONTEXT, device="cpu",
                        attn_backends=[attn_backend(init, shared, draft=True, skip_prefill=True, topk=1)
                                       for _ in range(steps - 1)])
    m.init_cuda_graph_state = steps_init.__get__(m)
    m.init_cuda_graph_state(max_bs, max_bs)
    return m


def storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


@pytest.mark.parametrize("tree_name", ["patched", "pristine"])
def test_switched_off_each_runner_keeps_its_own_state(trees, tree_name: str) -> None:
    tree, buffers = trees.get(tree_name), {}
    states = [verify_state(tree, buffers, False, 4, k) for k in (4, 2, 8)]
    for field in ("cuda_graph_attn_logits", "cuda_graph_attn_lse", "cuda_graph_kv_indices"):
        assert len({storage(getattr(s, field)) for s in states}) == 3
    assert states[2].cuda_graph_attn_logits.shape == (32, HEADS, SPLITS, HEAD_DIM)
    assert not buffers


@pytest.mark.parametrize("tree_name", PATCHED_0517)
def test_switched_on_every_k_state_aliases_one_set_sized_for_the_widest(trees, tree_name: str) -> None:
    tree, buffers = trees.get(tree_name), {}
    states = [verify_state(tree, buffers, True, 4, k) for k in (4, 2, 3, 6, 8)]  # startup K first
    for field in ("cuda_graph_attn_logits", "cuda_graph_attn_lse", "cuda_graph_kv_indices"):
        assert len({storage(getattr(s, field)) for s in states}) == 1, field
    # Each state sees the shape it asked for; the first allocation already covered K 8 at bs 4.
    assert [s.cuda_graph_attn_logits.shape[0] for s in states] == [16, 8, 12, 24, 32]
    assert states[0].cuda_graph_attn_logits.untyped_storage().nbytes() == 32 * HEADS * SPLITS * HEAD_DIM * 4
    assert states[4].cuda_graph_kv_indices.numel() == 4 * (CONTEXT + K_MAX)  # per request (0029)


@pytest.mark.parametrize("tree_name", PATCHED_0517)
def test_kv_indices_are_aliased_per_role_and_partials_per_shape(trees, tree_name: str) -> None:
    tree, buffers = trees.get(tree_name), {}
    target = verify_state(tree, buffers, True, 4, 4)
    draft_extend = verify_state(tree, buffers, True, 4, 4, draft=True)
    # One attention call's partials are dead once it returns: any runner of the same head shape may alias them.
    assert storage(draft_extend.cuda_graph_attn_logits) == storage(target.cuda_graph_attn_logits)
    # kv indices live through a whole forward: the target's and the draft's must stay apart.
    assert storage(draft_extend.cuda_graph_kv_indices) != storage(target.cuda_graph_kv_indices)
    other_shape = attn_backend(loaded(tree, "TritonAttnBackend.init_cuda_graph_state", buffers), True)
    other_shape.v_head_dim = HEAD_DIM * 2
    other_shape.init_cuda_graph_state(4, 16)
    assert storage(other_shape.cuda_graph_attn_logits) != storage(target.cuda_graph_attn_logits)


@pytest.mark.parametrize("tree_name", PATCHED_0517)
def test_a_state_wider_than_the_first_buffer_gets_a_new_one_and_the_old_stays_valid(trees, tree_name: str) -> None:
    tree, buffers = trees.get(tree_name), {}
    small = verify_state(tree, buffers, True, 4, 4)
    small.cuda_graph_attn_logits.fill_(3.0)
    big = verify_state(tree, buffers, True, 16, 8)  # a bs past the first state's, K 8: 128 rows
    assert big.cuda_graph_attn_logits.shape[0] == 128
    assert storage(big.cuda_graph_attn_logits) != storage(small.cuda_graph_attn_logits)
    assert torch.all(small.cuda_graph_attn_logits == 3.0)  # the captured graph's buffer is untouched
    later = verify_state(tree, buffers, True, 8, 2)
    assert storage(later.cuda_graph_attn_logits) == storage(big.cuda_graph_attn_logits)


@pytest.mark.parametrize("tree_name", PATCHED_0517)
def test_multi_step_draft_states_alias_their_kv_indices_and_step_partials(trees, tree_name: str) -> None:
    tree, buffers = trees.get(tree_name), {}
    states = [multi_step_state(tree, buffers, True, 4, steps) for steps in (3, 2, 5, 7)]
    assert len({storage(m.cuda_graph_kv_indices) for m in states}) == 1
    assert [m.cuda_graph_kv_indices.shape[0] for m in states] == [3, 2, 5, 7]
    steps = [b for m in states for b in m.attn_backends]
    assert len({storage(b.cuda_graph_attn_logits) for b in steps}) == 1
    # Each step backend reads its own row of its state's kv indices.
    kv_indices = states[2].cuda_graph_kv_indices
    assert [storage(b.cuda_graph_kv_indices) for b in states[2].attn_backends] == [storage(kv_indices)] * 4
    assert [b.cuda_graph_kv_indices.data_ptr() for b in states[2].attn_backends] == [
        states[2].cuda_graph_kv_indices[i].data_ptr() for i in range(4)]


@pytest.mark.parametrize(
    "switch,tbo,pdmux,expected",
    [("1", False, False, True), ("0", False, False, False), ("1", True, False, False), ("1", False, True, False)],
)
def test_the_switch_is_off_by_default_and_ignored_with_tbo_or_pdmux(trees, monkeypatch, switch: str, tbo: bool,
                                                                     pdmux: bool, expected: bool) -> None:
    tree = trees.get("patched")
    envs = TreeImporter.module(tree, "sglang.srt.environ").envs
    monkeypatch.delenv(SWITCH, raising=False)
    assert envs.SGLANG_TRITON_SHARED_GRAPH_STATE.get() is False
    monkeypatch.setenv(SWITCH, switch)
    shares = load_defs(source(tree, BACKEND), ["_shares_graph_state"], extra={"envs": envs})["_shares_graph_state"]
    args = SimpleNamespace(enable_two_batch_overlap=tbo, enable_pdmux=pdmux)
    assert shares(args) is expected
