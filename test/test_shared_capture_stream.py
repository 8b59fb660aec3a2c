"""Patch 0024: every CUDA graph runner captures on one stream when asked, on CPU.

``parallel_state.graph_capture`` of the patched 0.5.17 tree runs with stand-in TP and PP groups
whose ``graph_capture`` behaves as 0.5.17's ``GroupCoordinator.graph_capture``: a new stream when it
is given none. The runners share one graph memory pool, but PyTorch's caching allocator reuses a
freed block only on the stream it was allocated on, so a new stream per runner keeps every runner's
temporaries (and its warm-up's cached blocks) to itself. With ``SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM``
every capture gets the same stream, SGLang's named process-level stream ``cuda_graph_capture``
(``runtime_context.get_stream``, stood in here); without it, each its own (0.5.17's behaviour); a
stream passed in (the PD-multiplexing path) is used as given either way.
"""

from __future__ import annotations

import contextlib
import itertools
from types import SimpleNamespace
from typing import Any, Iterator

import pytest
from sglang_trees import TreeImporter
from sglang_trees import trees  # noqa: F401 (a fixture)

PARALLEL_STATE = "sglang.srt.distributed.parallel_state"
SWITCH = "SGLANG_CUDA_GRAPH_SHARED_CAPTURE_STREAM"
SHARED = "cuda_graph_capture"  # the name the shared capture stream has among SGLang's named streams


class FakeStream:
    ids = itertools.count()

    def __init__(self) -> None:
        self.id = next(self.ids)


class FakeGroup:
    """``GroupCoordinator.graph_capture`` as 0.5.17 has it: a new stream unless given one or a context."""

    device_module = SimpleNamespace(Stream=FakeStream)

    def __init__(self) -> None:
        self.streams: list[FakeStream] = []

    @contextlib.contextmanager
    def graph_capture(self, graph_capture_context: Any = None, stream: Any = None) -> Iterator[Any]:
        if graph_capture_context is None:
            graph_capture_context = SimpleNamespace(stream=stream if stream is not None else FakeStream())
        self.streams.append(graph_capture_context.stream)
        yield graph_capture_context


@pytest.fixture
def ps(trees, monkeypatch) -> Any:
    module = TreeImporter.module(trees.get("patched"), PARALLEL_STATE)
    tp, pp = FakeGroup(), FakeGroup()
    monkeypatch.setattr(module, "get_tp_group", lambda: tp)
    monkeypatch.setattr(module, "get_pp_group", lambda: pp)
    for name in ("_DCP", "_ATTN_TP", "_MOE_EP", "_MOE_TP"):
        monkeypatch.setattr(module, name, None, raising=False)
    named: dict[str, FakeStream] = {}  # SGLang's process-level named streams (runtime_context.get_stream)
    monkeypatch.setattr(module, "get_stream", lambda name: named.setdefault(name, FakeStream()))
    monkeypatch.setattr(module, "named_streams", named, raising=False)
    return module


def capture_streams(ps: Any, runners: int, stream: Any = None) -> list[Any]:
    """The stream each of ``runners`` captures ran on (as a runner's ``capture()`` enters it)."""
    streams = []
    for _ in range(runners):
        with ps.graph_capture(stream=stream) as context:
            streams.append(context.stream)
    return streams


def test_by_default_each_runner_captures_on_a_new_stream(ps, monkeypatch) -> None:
    monkeypatch.delenv(SWITCH, raising=False)
    streams = capture_streams(ps, 4)
    assert len({s.id for s in streams}) == 4
    assert SHARED not in ps.named_streams


def test_with_the_switch_every_runner_captures_on_one_stream(ps, monkeypatch) -> None:
    monkeypatch.setenv(SWITCH, "1")
    streams = capture_streams(ps, 4)  # e.g. verify, draft decode, draft extend, an adaptive state's
    assert len({s.id for s in streams}) == 1
    assert streams[0] is ps.named_streams[SHARED]
    assert ps.get_pp_group().streams == streams  # the PP group joins the TP group's context


def test_a_stream_passed_in_is_used_as_given(ps, monkeypatch) -> None:
    monkeypatch.setenv(SWITCH, "1")
    own = FakeStream()
    assert capture_streams(ps, 2, stream=own) == [own, own]
    assert SHARED not in ps.named_streams
