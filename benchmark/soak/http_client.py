"""A small asyncio HTTP/1.1 client for loopback servers: whole replies and SSE streams.

Standard library only (the GPU host's site has no guarantee of aiohttp in this
process), one connection per request (``Connection: close``), so that hundreds
of requests can be in flight at once and a client can cut a stream by closing
its socket. Only loopback hosts are accepted: the soak never sends traffic
anywhere else.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

LOOPBACK = ("127.0.0.1", "localhost", "::1")


class NotLoopback(ValueError):
    """The URL names a host other than this machine."""


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        parts = urlsplit(url)
        if parts.scheme != "http" or parts.hostname not in LOOPBACK:
            raise NotLoopback(f"{url}: only http:// on a loopback host ({', '.join(LOOPBACK)}) is allowed")
        return cls(parts.hostname, parts.port or 80)


@dataclass
class Reply:
    """What came back for one request.

    ``status`` is None when no status line arrived (connection refused or
    reset, or the timeout ran out first: ``timed_out``). ``events`` holds the
    parsed ``data:`` payloads of an SSE stream with their arrival times
    (``time.monotonic``); ``cut`` is True when the client closed the stream on
    purpose.
    """

    status: int | None = None
    body: bytes = b""
    started: float = 0.0
    finished: float = 0.0
    events: list[tuple[float, Any]] = field(default_factory=list)
    error: str | None = None
    timed_out: bool = False
    cut: bool = False

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def message(self) -> str:
        """The error message of a JSON error reply (SGLang's and OpenAI's shapes), else the body's start."""
        data = self.json()
        if isinstance(data, dict):
            err = data.get("error", data)
            if isinstance(err, dict) and "message" in err:
                return str(err["message"])
            if isinstance(data.get("message"), str):
                return data["message"]
        return self.body[:300].decode("utf-8", "replace")


def encode_request(ep: Endpoint, method: str, path: str, body: bytes | None, content_type: str) -> bytes:
    head = [f"{method} {path} HTTP/1.1", f"Host: {ep.host}:{ep.port}", "Connection: close", "Accept: */*"]
    if body is not None:
        head += [f"Content-Type: {content_type}", f"Content-Length: {len(body)}"]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + (body or b"")


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionError("the server closed the connection before answering")
    status = int(status_line.split()[1])
    headers: dict[str, str] = {}
    while True:
        line = (await reader.readline()).decode("latin-1").strip()
        if not line:
            return status, headers
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()


async def _body_chunks(reader: asyncio.StreamReader, headers: dict[str, str]):
    """The body as it arrives: chunked, by Content-Length, or until the server closes."""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                return
            chunk = await reader.readexactly(size)
            await reader.readexactly(2)
            yield chunk
    elif "content-length" in headers:
        left = int(headers["content-length"])
        if left:
            yield await reader.readexactly(left)
    else:
        while chunk := await reader.read(65536):
            yield chunk


def _sse_payload(line: bytes) -> Any:
    text = line[len(b"data:") :].strip()
    if text == b"[DONE]":
        return "[DONE]"
    try:
        return json.loads(text)
    except ValueError:
        return {"unparsed": text[:200].decode("utf-8", "replace")}


async def _exchange(reply: Reply, ep: Endpoint, request: bytes, cut_after: int | None) -> None:
    reader, writer = await asyncio.open_connection(ep.host, ep.port, limit=1 << 24)
    try:
        writer.write(request)
        await writer.drain()
        reply.status, headers = await _read_head(reader)
        streaming = headers.get("content-type", "").startswith("text/event-stream")
        pending = b""
        async for chunk in _body_chunks(reader, headers):
            if not streaming:
                reply.body += chunk
                continue
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.startswith(b"data:"):
                    reply.events.append((time.monotonic(), _sse_payload(line)))
            if cut_after is not None and len(reply.events) >= cut_after:
                reply.cut = True
                return
    finally:
        writer.close()
        try:
            await asyncio.wait_for(writer.wait_closed(), 2)
        except (OSError, asyncio.TimeoutError):
            pass


async def call(
    ep: Endpoint,
    method: str,
    path: str,
    body: bytes | None = None,
    *,
    timeout: float,
    content_type: str = "application/json",
    cut_after: int | None = None,
) -> Reply:
    """Send one request and read the reply within ``timeout`` seconds; never raises for I/O.

    ``cut_after`` closes the connection once that many SSE events arrived (a
    client that goes away mid-stream).
    """
    reply = Reply(started=time.monotonic())
    try:
        await asyncio.wait_for(_exchange(reply, ep, encode_request(ep, method, path, body, content_type), cut_after), timeout)
    except asyncio.TimeoutError:
        reply.timed_out = True
        reply.error = f"no complete reply within {timeout:.0f} s"
    except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError, IndexError) as e:
        reply.error = f"{type(e).__name__}: {e}"
    reply.finished = time.monotonic()
    return reply


async def post_json(ep: Endpoint, path: str, payload: Any, *, timeout: float, cut_after: int | None = None) -> Reply:
    return await call(ep, "POST", path, json.dumps(payload).encode(), timeout=timeout, cut_after=cut_after)


async def get(ep: Endpoint, path: str, *, timeout: float) -> Reply:
    return await call(ep, "GET", path, timeout=timeout)
