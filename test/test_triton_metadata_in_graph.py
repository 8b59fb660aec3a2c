"""Patch 0017: the Triton backend's decode, target-verify and draft-extend graph metadata is filled in the graph.

With ``SGLANG_ENABLE_TRITON_METADATA_IN_GRAPH`` on, ``init_forward_metadata_in_graph`` (run inside
the CUDA-graph capture) must fill kv_indptr, kv_indices, qo_indptr, mask_indptr and the kv splits
exactly as the eager replay preparation did, and the replay preparation must leave those buffers
alone while still copying the verify tree mask (a new tensor every batch). Draft extend, captured
with no extend lengths in its spec info, must read them from the batch's extend_seq_lens (the graph
buffer replays refill). Replay preparation skips the fill only for the modes whose capture ran the
hook. With the switch off, or for the multi-step draft, nothing changes. The methods run on CPU
tensors from the patched trees: 0.5.17 and its port to 0.5.23 (0016 there), where the kv indices come
from ``KVIndexTranslator.pack_read_stream`` with the iteration's plan; the kv-indices Triton kernel
(0.5.17) and a static pool's translator (0.5.23) are replaced by a reference gather. The pristine
releases fill nothing in the graph: the fill checks fail there.
"""

from __future__ import annotations

import ast
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from sglang_trees import PATCHED, PATCHED_AND_PRISTINE, find_def, load_defs, source
from sglang_trees import trees  # noqa: F401 (a fixture)

BACKEND = "sglang.srt.layers.attention.triton_backend"
# Every method the fill runs through on either release; a tree lacks some (0.5.23 has no
# _translate_cuda_graph_shared_pool_locs, 0.5.17 no _init_forward_metadata_out_graph, a pristine
# tree none of the patch's own).
METHODS = ["_metadata_in_graph_for", "init_forward_metadata_in_graph", "init_forward_metadata_out_graph",
           "_init_forward_metadata_out_graph", "_verify_custom_mask", "_target_verify_num_tokens_per_req",
           "_update_target_verify_buffers", "_update_decode_kv_buffers", "_update_draft_extend_buffers",
           "_apply_cuda_graph_metadata", "_fill_kv_indptr_and_indices", "get_num_kv_splits",
           "_translate_cuda_graph_shared_pool_locs", "_fill_cuda_graph_swa_out_cache_loc"]
MAX_BS, CONTEXT, K = 4, 64, 4
POISON = -7


class Mode:
    """A forward mode (ForwardMode is an IntEnum: equal and hashable by value)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mode) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def is_decode_or_idle(self) -> bool:
        return self.name == "decode"

    def is_target_verify(self) -> bool:
        return self.name == "verify"

    def is_draft_extend_v2(self) -> bool:
        return self.name == "draft_extend"

    def is_dllm_extend(self) -> bool:
        return False


def gather(req_to_token: torch.Tensor, req_pool_indices: torch.Tensor, seq_lens: torch.Tensor,
           kv_indptr: torch.Tensor, kv_indices: torch.Tensor) -> None:
    """Each request's first ``seq_lens`` token slots from its ``req_to_token`` row, at ``kv_indptr``."""
    for i in range(int(seq_lens.numel())):
        start, n = int(kv_indptr[i]), int(seq_lens[i])
        kv_indices[start:start + n] = req_to_token[int(req_pool_indices[i]), :n]


class KvIndicesKernel:
    """0.5.17's ``create_flashinfer_kv_indices_triton[(bs,)](...)`` as a gather on CPU."""

    def __getitem__(self, grid: Any):
        def launch(req_to_token, req_pool_indices, seq_lens, kv_indptr, kv_start, kv_indices, stride):
            gather(req_to_token, req_pool_indices, seq_lens[: int(grid[0])], kv_indptr, kv_indices)
        return launch


class StaticPoolTranslator:
    """0.5.23's ``KVIndexTranslator`` on a static pool (the one the in-graph fill is for): the read
    stream is the ``req_to_token`` rows, whatever the plan."""

    is_translating = False

    def __init__(self, req_to_token: torch.Tensor) -> None:
        self.req_to_token = req_to_token

    def pack_read_stream(self, plan: Any, *, req_pool_indices: torch.Tensor, seq_lens: torch.Tensor,
                         indptr: torch.Tensor, out: torch.Tensor, **_: Any) -> bool:
        gather(self.req_to_token, req_pool_indices, seq_lens, indptr, out)
        return False


def backend_methods(tree: Path) -> set[str]:
    """The names TritonAttnBackend defines in ``tree``."""
    return {n.name for n in find_def(tree, BACKEND, "TritonAttnBackend").body if isinstance(n, ast.FunctionDef)}


def backend(tree: Path, in_graph: bool) -> SimpleNamespace:
    methods = [m for m in METHODS if m in backend_methods(tree)]
    defs = load_defs(source(tree, BACKEND), [f"TritonAttnBackend.{m}" for m in methods],
                     extra={"create_flashinfer_kv_indices_triton": KvIndicesKernel(),
                            # not reached here (no sliding window, static kv splits)
                            "get_num_kv_splits_triton": None, "update_sliding_window_buffer": None,
                            "IdSpaceKind": None})
    req_to_token = torch.arange(MAX_BS * CONTEXT, dtype=torch.int32).view(MAX_BS, CONTEXT)
    b = SimpleNamespace(
        metadata_in_graph=in_graph, _modes_filled_in_graph=set(), device="cpu", dcp_size=1, sliding_window_size=None,
        use_sliding_window_kv_pool=False, _translate_kv_loc=None, num_draft_tokens=K,
        speculative_num_steps=K - 1, static_kv_splits=True, device_core_count=0, enable_deterministic=False,
        max_kv_splits=8, req_to_token=req_to_token, kv_index_translator=StaticPoolTranslator(req_to_token),
        target_verify_num_tokens_per_req=K, dllm_attention=None,  # 0.5.23
        cuda_graph_uneven_batch=torch.zeros(1, dtype=torch.int32),
        kv_indptr=torch.zeros(MAX_BS + 1, dtype=torch.int32), qo_indptr=torch.zeros(MAX_BS + 1, dtype=torch.int32),
        mask_indptr=torch.zeros(MAX_BS + 1, dtype=torch.int64),
        cuda_graph_kv_indices=torch.zeros(MAX_BS * CONTEXT, dtype=torch.int32),
        cuda_graph_num_kv_splits=torch.zeros(MAX_BS, dtype=torch.int32), window_kv_indptr=None,
        _verify_mask=SimpleNamespace(buffer=torch.zeros(MAX_BS * K * (CONTEXT + K), dtype=torch.bool)))
    # A pristine tree's hook is AttentionBackend's no-op.
    b.init_forward_metadata_in_graph = lambda forward_batch: None
    for name in methods:
        setattr(b, name, types.MethodType(defs[f"TritonAttnBackend.{name}"], b))
    return b


def batch(mode: str, spec: bool) -> SimpleNamespace:
    seq_lens = torch.tensor([5, 9, 1, 13], dtype=torch.int64)
    spec_info = None
    if spec:
        spec_info = SimpleNamespace(draft_token_num=K, num_tokens_per_req=K,  # 0.5.17, 0.5.23
                                    custom_mask=torch.ones(37, dtype=torch.bool),
                                    extend_seq_lens_tensor=torch.full((MAX_BS,), K, dtype=torch.int32))
    return SimpleNamespace(batch_size=MAX_BS, forward_mode=Mode(mode), spec_info=spec_info, seq_lens=seq_lens,
                           req_pool_indices=torch.tensor([2, 0, 3, 1]), encoder_lens=None, seq_lens_sum=None,
                           out_cache_loc=None, extend_seq_lens=torch.tensor([2, 3, 1, 4], dtype=torch.int32),
                           kv_loc_plan=None)


def captured_draft_extend(b: SimpleNamespace) -> SimpleNamespace:
    """A draft-extend batch as the runner captures it: spec info without extend lengths, the lengths in
    the batch's extend_seq_lens (its graph buffer); at replay the runner sets spec info's tensor to it."""
    fb = batch("draft_extend", spec=True)
    fb.spec_info = SimpleNamespace(draft_token_num=K)
    return fb


def replayed_draft_extend() -> SimpleNamespace:
    fb = batch("draft_extend", spec=True)
    fb.spec_info.extend_seq_lens_tensor = fb.extend_seq_lens
    return fb


BUFFERS = ("kv_indptr", "qo_indptr", "mask_indptr", "cuda_graph_kv_indices", "cuda_graph_num_kv_splits")


def poison(b: SimpleNamespace) -> None:
    """Every buffer the fill writes set to POISON; indptr[0] stays 0, as the backend allocates it."""
    for name in BUFFERS:
        getattr(b, name).fill_(POISON)
    b.kv_indptr[0] = b.mask_indptr[0] = 0
    b._verify_mask.buffer.zero_()


def snapshot(b: SimpleNamespace) -> dict[str, torch.Tensor]:
    return {name: getattr(b, name).clone() for name in (*BUFFERS,)} | {"mask": b._verify_mask.buffer.clone()}


@pytest.mark.parametrize("tree_name", PATCHED_AND_PRISTINE)
@pytest.mark.parametrize("mode,spec", [("decode", False), ("verify", True)])
def test_the_in_graph_hook_fills_what_replay_preparation_filled(trees, tree_name: str, mode: str, spec: bool) -> None:
    tree = trees.get(tree_name)
    eager = backend(tree, in_graph=False)
    poison(eager)
    eager.init_forward_metadata_out_graph(batch(mode, spec))  # replay preparation, switch off
    expected = snapshot(eager)

    graphed = backend(tree, in_graph=True)
    graphed.init_forward_metadata_in_graph(batch(mode, spec))  # the capture records the fill
    poison(graphed)
    before = snapshot(graphed)
    graphed.init_forward_metadata_out_graph(batch(mode, spec))  # replay preparation, switch on
    untouched = snapshot(graphed)
    for name in BUFFERS:
        assert torch.equal(untouched[name], before[name]), f"replay preparation still filled {name}"
    assert torch.equal(untouched["mask"], expected["mask"]), "the tree mask must still be copied before replay"

    graphed.init_forward_metadata_in_graph(batch(mode, spec))  # what the captured graph replays
    filled = snapshot(graphed)
    for name in (*BUFFERS, "mask"):
        assert torch.equal(filled[name], expected[name]), name
    assert not bool((expected["cuda_graph_kv_indices"][: int(expected["kv_indptr"][MAX_BS])] == POISON).any())


def in_graph_hook_writes(tree: Path, in_graph: bool, mode: str, spec: bool) -> bool:
    """Whether ``init_forward_metadata_in_graph`` changed any buffer."""
    b = backend(tree, in_graph=in_graph)
    poison(b)
    before = snapshot(b)
    b.init_forward_metadata_in_graph(batch(mode, spec))
    return not all(torch.equal(v, before[k]) for k, v in snapshot(b).items())


@pytest.mark.parametrize("tree_name", PATCHED_AND_PRISTINE)
@pytest.mark.parametrize("mode,spec", [("decode", False), ("verify", True)])
def test_switched_off_the_in_graph_hook_does_nothing(trees, tree_name: str, mode: str, spec: bool) -> None:
    assert not in_graph_hook_writes(trees.get(tree_name), False, mode, spec)
    assert in_graph_hook_writes(trees.get(tree_name), True, mode, spec)  # the same call switched on does


@pytest.mark.parametrize("tree_name", PATCHED)
def test_the_multi_step_draft_keeps_the_eager_fill(trees, tree_name: str) -> None:
    assert not in_graph_hook_writes(trees.get(tree_name), True, "decode", True)


@pytest.mark.parametrize("tree_name", PATCHED_AND_PRISTINE)
def test_draft_extend_reads_the_extend_lengths_buffer_in_the_graph(trees, tree_name: str) -> None:
    tree = trees.get(tree_name)
    eager = backend(tree, in_graph=False)
    poison(eager)
    eager.init_forward_metadata_out_graph(replayed_draft_extend())  # replay preparation, switch off
    expected = snapshot(eager)
    graphed = backend(tree, in_graph=True)
    graphed.init_forward_metadata_in_graph(captured_draft_extend(graphed))  # the capture records the fill
    poison(graphed)
    before = snapshot(graphed)
    graphed.init_forward_metadata_out_graph(replayed_draft_extend())  # replay preparation, switch on
    assert all(torch.equal(v, before[k]) for k, v in snapshot(graphed).items())
    graphed.init_forward_metadata_in_graph(captured_draft_extend(graphed))
    filled = snapshot(graphed)
    for name in ("kv_indptr", "qo_indptr", "cuda_graph_kv_indices"):
        assert torch.equal(filled[name], expected[name]), name
    # prefix lengths are seq_lens - extend lengths: 3, 6, 0, 9
    assert expected["kv_indptr"].tolist() == [0, 3, 9, 9, 18]


@pytest.mark.parametrize("tree_name", PATCHED)
def test_the_switch_defaults_on_and_turns_off(trees, tree_name: str, monkeypatch) -> None:
    """On by default since its GPU parity and speed runs on 0.5.17 (benchmark/results/*-metadata-in-graph-0017)."""
    from sglang_trees import TreeImporter

    envs = TreeImporter.module(trees.get(tree_name), "sglang.srt.environ").envs
    monkeypatch.delenv("SGLANG_ENABLE_TRITON_METADATA_IN_GRAPH", raising=False)
    assert envs.SGLANG_ENABLE_TRITON_METADATA_IN_GRAPH.get() is True
    monkeypatch.setenv("SGLANG_ENABLE_TRITON_METADATA_IN_GRAPH", "false")
    assert envs.SGLANG_ENABLE_TRITON_METADATA_IN_GRAPH.get() is False


@pytest.mark.parametrize("tree_name", PATCHED)
def test_a_mode_whose_capture_never_ran_the_hook_keeps_the_eager_fill(trees, tree_name: str) -> None:
    """A runner that does not call the in-graph hook (e.g. another draft-extend runner) must still get
    its metadata from replay preparation, switch on or not."""
    tree = trees.get(tree_name)
    eager = backend(tree, in_graph=False)
    poison(eager)
    eager.init_forward_metadata_out_graph(replayed_draft_extend())
    graphed = backend(tree, in_graph=True)
    poison(graphed)
    graphed.init_forward_metadata_out_graph(replayed_draft_extend())
    assert all(torch.equal(v, snapshot(eager)[k]) for k, v in snapshot(graphed).items())
