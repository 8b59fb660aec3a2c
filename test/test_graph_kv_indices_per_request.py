"""Patch 0029: the Triton backend's CUDA-graph kv indices are sized per request, not per query token, on CPU.

Every graphed mode (decode, target verify, draft extend) fills ``cuda_graph_kv_indices`` with each request's
cached prefix once (``_fill_kv_indptr_and_indices``: a cumulative sum of the requests' lengths), whatever its
number of query tokens. 0.5.17 sized the buffer by ``max_num_tokens`` (max_bs x K for a verify or draft-extend
runner) times the context length: K times what it can hold, per runner. For a long context that is the bulk
of the graph memory: at 256k tokens, bs 64 and K 4 one verify runner's int64 indices took 537 MB where 134 MB
hold every request's prefix. ``init_cuda_graph_state`` of the patched tree runs here on the stand-in backends
of ``test_shared_graph_state``; the pristine release's size fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from sglang_trees import SHOWS_THE_BUG
from sglang_trees import trees  # noqa: F401 (a fixture)
from test_shared_graph_state import CONTEXT, K_MAX, storage, verify_state

TREES = ["patched", pytest.param("pristine", marks=SHOWS_THE_BUG)]


@pytest.mark.parametrize("tree_name", TREES)
@pytest.mark.parametrize("draft", [False, True], ids=["target-verify", "draft-extend"])
def test_kv_indices_hold_max_bs_prefixes_whatever_k(trees, tree_name: str, draft: bool) -> None:
    tree: Path = trees.get(tree_name)
    for k in (1, 4, 8):
        state = verify_state(tree, {}, False, 4, k, draft=draft)
        # max_bs prefixes of the context length, with room for the widest verify's drafts.
        assert state.cuda_graph_kv_indices.numel() == 4 * (CONTEXT + K_MAX), k
        assert state.cuda_graph_kv_indices.dtype == torch.int64


@pytest.mark.parametrize("tree_name", TREES)
def test_shared_states_alias_one_per_request_buffer(trees, tree_name: str) -> None:
    tree, buffers = trees.get(tree_name), {}
    states = [verify_state(tree, buffers, True, 4, k) for k in (4, 2, 3, 6, 8)]
    assert len({storage(s.cuda_graph_kv_indices) for s in states}) == 1
    assert states[0].cuda_graph_kv_indices.untyped_storage().nbytes() == 4 * (CONTEXT + K_MAX) * 8
