"""A streamed /generate request rejected while it is validated gets a 4xx, not a 200 (patch 0013).

Runs the tree's own ``generate_request`` (0.5.17) or ``serve_generate_request`` (0.5.23), executed
from its source with ``load_defs``, against a stand-in tokenizer manager whose
``generate_request`` is an async generator like the real one: it raises ``ValueError`` before
its first output when the request is bad (patch 0004's out-of-vocabulary check, say), or yields
chunks. Pristine trees answer the bad request with a 200 event stream whose only event is the
error (xfail strict there); the patched ones answer it with the error response and its status.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from sglang_trees import PATCHED, PATCHED_AND_PRISTINE, load_defs, source, trees  # noqa: F401

HTTP_SERVER = "sglang.srt.entrypoints.http_server"
ERROR = "input_ids[0] = 8202 is out of vocabulary"


@dataclass
class Reply:
    kind: str  # "error", "stream" or "plain"
    status: int
    body: Any = None


@dataclass
class Manager:
    """``tokenizer_manager.generate_request``: chunks, or a ValueError after ``fail_after`` of them."""

    chunks: list[dict] = field(default_factory=lambda: [{"text": "a"}, {"text": "ab"}])
    fail_after: int | None = None
    started: int = 0

    async def generate_request(self, obj: Any, request: Any):
        self.started += 1
        for i, chunk in enumerate(self.chunks):
            if self.fail_after == i:
                raise ValueError(ERROR)
            yield chunk
        if self.fail_after == len(self.chunks):
            raise ValueError(ERROR)

    def create_abort_task(self, obj: Any) -> None:
        return None


class Request:
    headers: dict = {}

    def __init__(self, disconnected: bool = False) -> None:
        self.disconnected = disconnected

    async def is_disconnected(self) -> bool:
        return self.disconnected


def _handler(tree, manager: Manager):
    """The tree's streaming /generate handler bound to stand-ins for FastAPI and the server state."""
    path = source(tree, HTTP_SERVER)
    name = "serve_generate_request" if "async def serve_generate_request" in path.read_text() else "generate_request"

    def streaming(content, media_type=None, background=None):
        return Reply("stream", 200, content)

    extra = {
        "app": SimpleNamespace(api_route=lambda *a, **k: (lambda fn: fn)),
        "envs": SimpleNamespace(SGLANG_ENABLE_REQUEST_HEADER_OVERRIDES=SimpleNamespace(get=lambda: False)),
        "_global_state": SimpleNamespace(tokenizer_manager=manager),
        "StreamingResponse": streaming,
        "Response": lambda status_code=200, **k: Reply("plain", status_code),
        "_create_error_response": lambda e: Reply("error", getattr(e, "status_code", 400), {"error": {"message": str(e)}}),
        "orjson_response": lambda ret: Reply("plain", 200, ret),
        "dumps_json": lambda obj: repr(obj).encode(),
        "logger": SimpleNamespace(error=lambda *a, **k: None, info=lambda *a, **k: None),
        "apply_header_overrides": lambda *a: None,
        "SGLangORJSONResponse": object,  # the route decorator's response_class
    }
    return load_defs(path, [name], extra)[name]


async def _drain(reply: Reply) -> list[bytes]:
    return [chunk async for chunk in reply.body]


def _serve(tree, manager: Manager, request: Request | None = None) -> tuple[Reply, list[bytes]]:
    handler = _handler(tree, manager)
    obj = SimpleNamespace(stream=True, rid="r1")

    async def go():
        reply = await handler(obj, request or Request())
        return reply, (await _drain(reply) if reply.kind == "stream" else [])

    return asyncio.run(go())


@pytest.mark.parametrize("tree_name", PATCHED_AND_PRISTINE)
def test_a_stream_rejected_before_its_first_chunk_gets_a_400(trees, tree_name: str) -> None:
    reply, events = _serve(trees.get(tree_name), Manager(fail_after=0))
    assert (reply.kind, reply.status) == ("error", 400), f"got a {reply.status} {reply.kind} with {events}"
    assert ERROR in reply.body["error"]["message"]


@pytest.mark.parametrize("tree_name", PATCHED)
def test_a_good_stream_sends_every_chunk_once_then_done(trees, tree_name: str) -> None:
    manager = Manager()
    reply, events = _serve(trees.get(tree_name), manager)
    assert (reply.kind, reply.status, manager.started) == ("stream", 200, 1)
    assert events == [b"data: {'text': 'a'}\n\n", b"data: {'text': 'ab'}\n\n", b"data: [DONE]\n\n"]


@pytest.mark.parametrize("tree_name", PATCHED)
def test_an_error_after_the_first_chunk_stays_in_the_stream(trees, tree_name: str) -> None:
    reply, events = _serve(trees.get(tree_name), Manager(fail_after=1))
    assert (reply.kind, reply.status) == ("stream", 200)
    assert events[0] == b"data: {'text': 'a'}\n\n" and ERROR in events[1].decode() and events[-1] == b"data: [DONE]\n\n"


@pytest.mark.parametrize("tree_name", PATCHED)
def test_a_client_gone_before_the_first_chunk_gets_no_error_body(trees, tree_name: str) -> None:
    reply, _ = _serve(trees.get(tree_name), Manager(fail_after=0), Request(disconnected=True))
    assert (reply.kind, reply.status) == ("plain", 499)
