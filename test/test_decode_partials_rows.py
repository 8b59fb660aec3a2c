"""Patch 0042: the Triton backend's CUDA-graph split-KV partials hold decode rows, not verify rows.

``TritonAttnBackend.init_cuda_graph_state`` sized ``attn_logits`` / ``attn_lse`` (and the SWA logits) for
the calling runner's ``max_num_tokens``: max_bs x K for a target-verify or draft-extend runner. Only decode
forwards read them (verify and draft extend run the extend kernels, and their ``ForwardMetadata`` carries
``attn_logits=None``), with at most topk rows a request under EAGLE speculation. On kimi16 (64 heads, 8
splits, 512-wide values: 1.05 MB a row) that is 268 MB for a K-4 verify runner at bs 64 and 537 MB for the
adaptive K-8 state, against 67 MB for the 64 rows a decode forward can use.

``init_cuda_graph_state`` runs here from the 0.5.17 trees on stand-in backends with CPU tensors (the helpers
of test_shared_graph_state.py). The pristine release sizes K x max_bs rows: those checks xfail there. The
assumption the patch rests on, that only decode metadata carries the graph partials, is read from the trees'
own source: 0.5.17, patched and pristine, and the pristine 0.5.23 (for a port).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from sglang_trees import SHOWS_THE_BUG, source
from sglang_trees import trees  # noqa: F401 (a fixture)
from test_shared_graph_state import BACKEND, HEAD_DIM, HEADS, SPLITS, multi_step_state, storage, verify_state

PATCHED_0517 = ["patched", pytest.param("pristine", marks=SHOWS_THE_BUG)]
ROW_BYTES = HEADS * SPLITS * HEAD_DIM * 4
KS = (8, 4, 2, 3, 6)  # the adaptive K set, widest first (patch 0028)


@pytest.mark.parametrize("tree_name", PATCHED_0517)
@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("draft", [False, True])
@pytest.mark.parametrize("topk", [1, 4])
def test_verify_and_draft_extend_runners_hold_the_rows_a_decode_forward_uses(trees, tree_name: str, shared: bool,
                                                                             draft: bool, topk: int) -> None:
    tree, buffers, max_bs = trees.get(tree_name), {}, 16
    for k in KS:
        b = verify_state(tree, buffers, shared, max_bs, k, draft=draft, topk=topk)
        rows = min(max_bs * k, max_bs * topk)
        assert b.cuda_graph_attn_logits.shape == (rows, HEADS, SPLITS, HEAD_DIM), f"K {k}"
        assert b.cuda_graph_attn_lse.shape == (rows, HEADS, SPLITS), f"K {k}"


@pytest.mark.parametrize("tree_name", PATCHED_0517)
def test_the_k_states_share_one_buffer_of_decode_rows(trees, tree_name: str) -> None:
    """Every K state's verify runner aliases one buffer, first sized for bs x topk rows, not K 8's."""
    tree, buffers, max_bs = trees.get(tree_name), {}, 64
    states = [verify_state(tree, buffers, True, max_bs, k, topk=1) for k in (4, *KS)]  # the start-up K first
    assert len({storage(s.cuda_graph_attn_logits) for s in states}) == 1
    partials = buffers["triton_graph_state"][("attn_logits", HEADS, SPLITS, HEAD_DIM)]
    assert partials.numel() * 4 == max_bs * ROW_BYTES


@pytest.mark.parametrize("tree_name", ["patched", "pristine"])
def test_multi_step_draft_and_backends_without_eagle_topk_keep_max_num_tokens(trees, tree_name: str) -> None:
    tree = trees.get(tree_name)
    for m in (multi_step_state(tree, {}, shared, 8, 3) for shared in (False, True)):
        assert [b.cuda_graph_attn_logits.shape[0] for b in m.attn_backends] == [8, 8]
    for shared in (False, True):  # NGRAM or dLLM: topk 0, rows as the runner asks
        b = verify_state(tree, {}, shared, 8, 4, topk=0)
        assert b.cuda_graph_attn_logits.shape[0] == 32


def _metadata_partials(tree: Path) -> list[tuple[str, str]]:
    """(the enclosing if's test, the attn_logits value) of each ``ForwardMetadata(...)`` built in the Triton
    backend's graph paths (``self.cuda_graph_*`` kv indices or partials)."""
    text = source(tree, BACKEND).read_text()
    module = ast.parse(text)
    parents = {child: node for node in ast.walk(module) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(module):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ForwardMetadata"):
            continue
        kwargs = {kw.arg: ast.unparse(kw.value) for kw in node.keywords}
        if "cuda_graph" not in " ".join(kwargs.values()):
            continue
        branch, child = parents[node], node
        while not isinstance(branch, ast.If):
            branch, child = parents[branch], branch
        test = ast.unparse(branch.test)
        found.append((test if child in branch.body else f"not ({test})", kwargs.get("attn_logits", "")))
    return found


@pytest.mark.parametrize("tree_name", ["patched", "pristine", "upstream_pristine"])
def test_only_decode_metadata_carries_the_graph_partials(trees, tree_name: str) -> None:
    found = _metadata_partials(trees.get(tree_name))
    carrying = [test for test, logits in found if "cuda_graph_attn_logits" in logits]
    assert carrying, "no graph metadata carries the partials: the reading of the source is out of date"
    for test in carrying:
        assert "is_decode_or_idle()" in test and not test.startswith("not ("), test
    others = {test: logits for test, logits in found if "cuda_graph_attn_logits" not in logits}
    assert any("is_target_verify()" in t for t in others) and any("is_draft_extend" in t for t in others)
    for test, logits in others.items():
        assert logits == "None", (test, logits)
