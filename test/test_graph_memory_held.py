"""Patch 0040 (0.5.17 only): a CUDA graph capture's log line also gives what the capture keeps.

"Capture target verify CUDA graph end ... mem usage=X GB" is the drop in free device memory across the capture, which
also depends on the caching allocator's free memory before it: one H200, the same build and arguments, read 0.99 GB
in one start and 0.74 GB in another, stock 0.28 GB
(``benchmark/results/20261204-1702-h200-tp1-kimi16-verify-graph-memory/``). With the patch the line adds the change in
the shared graph pool's reserved bytes and in the bytes allocated outside it, read from ``torch.cuda.memory_snapshot``.
Here, on CPU with a stand-in snapshot: how segments are counted, the log text, and the line the target capture
writes. The release logs only the free-memory drop (its tests xfail).
"""

from __future__ import annotations

import logging
import sys
import types
from typing import Any

import pytest
import torch
from sglang_trees import SHOWS_THE_BUG, TreeImporter
from sglang_trees import trees  # noqa: F401 (a fixture)
from test_capture_failure import Capture, capture_decode_graph, target_model_runner

MODULE = "sglang.srt.model_executor.graph_memory_usage"
SHARED_POOL = "sglang.srt.model_executor.runner_utils.pool"
TREES = ["patched", pytest.param("pristine", marks=SHOWS_THE_BUG)]
POOL = (0, 7)
GIB = 1 << 30


def segment(pool: tuple[int, int], total: int, allocated: int, device: int = 0) -> dict[str, Any]:
    return {"device": device, "segment_pool_id": pool, "total_size": total, "allocated_size": allocated}


def memory_usage(trees: Any, tree_name: str) -> Any:
    module = TreeImporter.module(trees.get(tree_name), MODULE)
    if not hasattr(module, "graph_memory_held"):
        pytest.fail("the release has no graph_memory_held")
    return module


def on_cuda(monkeypatch: pytest.MonkeyPatch, snapshots: list[list[dict[str, Any]]]) -> None:
    """torch.cuda reports itself available and answers each memory_snapshot() with the next of ``snapshots``."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_allocator_backend", lambda: "native")
    monkeypatch.setattr(torch.cuda, "memory_snapshot", lambda: snapshots.pop(0))


@pytest.mark.parametrize("tree_name", TREES)
def test_the_pool_counts_its_reserved_bytes_and_the_rest_their_allocated_bytes(trees, tree_name: str,
                                                                               monkeypatch) -> None:
    mod = memory_usage(trees, tree_name)
    on_cuda(monkeypatch, [[
        segment(POOL, total=6 * GIB, allocated=1 * GIB),  # the graph pool: all of it is the graphs', used or not
        segment((0, 0), total=40 * GIB, allocated=38 * GIB),  # weights, buffers: only what is allocated
        segment((0, 0), total=2 * GIB, allocated=0),  # cached free memory: not held by anything
        segment(POOL, total=5 * GIB, allocated=5 * GIB, device=1),  # another GPU's
    ]])
    assert mod.graph_memory_held("cuda", 0, POOL) == (6 * GIB, 38 * GIB)


def shared_pool(monkeypatch: pytest.MonkeyPatch, pool: tuple[int, int] | None) -> None:
    """The process's shared graph pool, as ``runner_utils.pool`` answers it (a stand-in module: the real package
    imports every runner)."""
    stand_in = types.ModuleType(SHARED_POOL)
    stand_in.get_global_graph_memory_pool = lambda: pool
    monkeypatch.setitem(sys.modules, SHARED_POOL, stand_in)


@pytest.mark.parametrize("tree_name", TREES)
def test_by_default_the_shared_pool_counts_and_before_the_first_capture_there_is_none(trees, tree_name: str,
                                                                                      monkeypatch) -> None:
    mod = memory_usage(trees, tree_name)
    snapshot = [segment(POOL, total=2 * GIB, allocated=0), segment((0, 0), total=4 * GIB, allocated=3 * GIB)]
    on_cuda(monkeypatch, [list(snapshot), list(snapshot)])
    shared_pool(monkeypatch, None)
    assert mod.graph_memory_held("cuda", 0) == (0, 3 * GIB)
    shared_pool(monkeypatch, POOL)
    assert mod.graph_memory_held("cuda", 0) == (2 * GIB, 3 * GIB)


class _Garbage:
    """Stands for a tensor held only by a reference cycle: freed by a garbage collection, not before."""

    def __init__(self) -> None:
        self.cycle = self


@pytest.mark.parametrize("tree_name", ["patched"])
def test_unreachable_objects_are_collected_before_the_snapshot_is_read(trees, tree_name: str, monkeypatch) -> None:
    """A capture's freeze_gc() collects garbage inside the window; tensors already unreachable before it would then
    read as buffers the capture freed (session 36: -0.40 to -0.53 GB on every EAGLE-3 engine's first capture). So each
    reading collects first: here a cycle made unreachable before the reading is gone when the snapshot is taken."""
    import gc
    import weakref

    mod = memory_usage(trees, tree_name)
    garbage = _Garbage()
    alive = weakref.ref(garbage)
    del garbage
    seen: list[bool] = []

    def snapshot() -> list[dict[str, Any]]:
        seen.append(alive() is not None)
        return [segment(POOL, 4 * GIB, GIB)]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_allocator_backend", lambda: "native")
    monkeypatch.setattr(torch.cuda, "memory_snapshot", snapshot)
    gc.disable()  # no automatic collection in between: only the reading's own can free the cycle
    try:
        assert alive() is not None
        assert mod.graph_memory_held("cuda", 0, POOL) == (4 * GIB, 0)
    finally:
        gc.enable()
    assert seen == [False]


@pytest.mark.parametrize("tree_name", TREES)
def test_nothing_is_read_off_cuda(trees, tree_name: str, monkeypatch) -> None:
    mod = memory_usage(trees, tree_name)
    on_cuda(monkeypatch, [])  # a snapshot would pop from an empty list
    assert mod.graph_memory_held("npu", 0, POOL) is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert mod.graph_memory_held("cuda", 0, POOL) is None


@pytest.mark.parametrize("tree_name", TREES)
def test_an_allocator_it_cannot_read_gives_nothing_and_raises_nothing(trees, tree_name: str, monkeypatch) -> None:
    """``backend:cudaMallocAsync`` (whose snapshot raises by design) or a snapshot that fails: the capture's log line
    loses its breakdown, start-up goes on."""
    mod = memory_usage(trees, tree_name)
    on_cuda(monkeypatch, [])
    monkeypatch.setattr(torch.cuda, "get_allocator_backend", lambda: "cudaMallocAsync")
    assert mod.graph_memory_held("cuda", 0, POOL) is None
    monkeypatch.setattr(torch.cuda, "get_allocator_backend", lambda: "native")

    def broken() -> list[dict[str, Any]]:
        raise RuntimeError("Calling snapshot with backend:cudaMallocAsync is not meaningful")
    monkeypatch.setattr(torch.cuda, "memory_snapshot", broken)
    assert mod.graph_memory_held("cuda", 0, POOL) is None
    monkeypatch.setattr(torch.cuda, "memory_snapshot", lambda: [{"device": 0}])  # a field missing
    assert mod.graph_memory_held("cuda", 0, POOL) is None


@pytest.mark.parametrize("tree_name", TREES)
def test_the_log_text_gives_both_changes_or_nothing(trees, tree_name: str) -> None:
    mod = memory_usage(trees, tree_name)
    before, after = (0, 40 * GIB), (GIB // 8, 40 * GIB + 5 * GIB // 8)
    assert mod.describe_graph_memory_held(before, after) == " (graph pool grew +0.12 GB, buffers +0.62 GB)"
    assert mod.describe_graph_memory_held(None, after) == ""
    assert mod.describe_graph_memory_held(before, None) == ""


@pytest.mark.parametrize("tree_name", TREES)
def test_the_target_capture_line_says_what_the_capture_kept(trees, tree_name: str, monkeypatch, caplog) -> None:
    """The free-memory drop (here 0: the stand-in says 10 GB free throughout, as when the capture's buffers come
    out of cached free memory) and, beside it, the pool's and the buffers' growth."""
    cap = Capture(trees.get(tree_name), monkeypatch)
    on_cuda(monkeypatch, [[segment((0, 0), total=42 * GIB, allocated=40 * GIB)],
                          [segment((0, 0), total=42 * GIB, allocated=40 * GIB + GIB // 2),
                           segment(POOL, total=GIB // 4, allocated=0)]])
    shared_pool(monkeypatch, POOL)
    setup = capture_decode_graph(cap.tree, cap.gf)
    with caplog.at_level(logging.INFO, logger="test_capture_failure"):
        setup(model_runner=target_model_runner(cap.runner_cls("target", fails=False)))
    (line,) = [r.getMessage() for r in caplog.records if "CUDA graph end" in r.getMessage()]
    assert "mem usage=0.00 GB (graph pool grew +0.25 GB, buffers +0.50 GB), avail mem=10.00 GB." in line, line
