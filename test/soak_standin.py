"""A stand-in for a SGLang server, for testing the soak harness on CPU (loopback only).

Speaks the subset of SGLang's HTTP API the soak uses (/health, /v1/models,
/get_model_info, /metrics, /v1/loads, /generate, /v1/completions, /v1/chat/completions,
/abort_request, /flush_cache), validates input the way the patched fork does
(400 with a message naming the problem), and "generates" tokens that are a
pure function of the prompt when greedy, one SSE event per token. It keeps
``sglang:num_used_tokens`` as the sum of prompt + output tokens of the
requests in flight.

``--misbehave`` makes it fail in one of the ways the soak must catch:
``error500`` (type errors in sampling params answered 500, as unpatched
0.5.17), ``leak`` (a stream cut by its client never gives its tokens back),
``stale_gauge`` (the /metrics gauge keeps its peak while /v1/loads is right),
``crash_on_oov`` (an out-of-vocabulary id kills the process, as the CUDA
assert kills the scheduler), ``parity`` (greedy output depends on how many
requests are in flight).

Run as ``python soak_standin.py --port N [--misbehave MODE]``; it also stands
in for ``python -m sglang.launch_server`` (it accepts and ignores the other
launch arguments) when put first on PYTHONPATH as ``sglang/launch_server.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

VOCAB = 512
CONTEXT = 256
SESSION_TYPES = {"id": str, "rid": str, "offset": int, "replace": bool, "drop_previous_output": bool}
MODEL = "standin-model"
MAX_RUNNING_REQUESTS = 48  # what 0.5.17 resolves for a speculative server by default
SAMPLING_TYPES = {"max_new_tokens": int, "min_new_tokens": int, "n": int, "top_k": int, "temperature": float,
                  "top_p": float, "stop_token_ids": list, "ignore_eos": bool, "logit_bias": dict,
                  "sampling_seed": int}  # fmt: skip


class BadRequest(Exception):
    """Answered with 400 and this message."""


class State:
    def __init__(self, misbehave: str | None, model_dir: Path) -> None:
        self.misbehave = misbehave
        self.model_dir = model_dir
        self.used = 0
        self.peak = 0
        self.leaked = 0
        self.in_flight = 0
        self.aborted: set[str] = set()


def check_sampling(sp: Any, misbehave: str | None) -> dict[str, Any]:
    if not isinstance(sp, dict):
        raise BadRequest("sampling_params must be an object")
    for name, value in sp.items():
        kind = SAMPLING_TYPES.get(name)
        if kind is None:
            raise BadRequest(f"unknown sampling param {name!r}")
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) if kind is float else isinstance(value, kind)
        if value is not None and (not ok or (kind is int and isinstance(value, bool))):
            if misbehave == "error500":
                raise TypeError(f"{name}")
            raise BadRequest(f"{name} must be {kind.__name__}, got {value!r}")
    if sp.get("n", 1) < 1:
        raise BadRequest(f"n must be at least 1, got {sp['n']}")
    if sp.get("max_new_tokens", 0) is not None and sp.get("max_new_tokens", 0) < 0:
        raise BadRequest("max_new_tokens must be at least 0")
    if not 0 < sp.get("top_p", 1.0) <= 1:
        raise BadRequest(f"top_p must be in (0, 1], got {sp['top_p']}")
    if sp.get("temperature", 0.0) < 0:
        raise BadRequest(f"temperature must be non-negative, got {sp['temperature']}")
    top_k = sp.get("top_k", -1)
    if top_k != -1 and top_k < 1:
        raise BadRequest(f"top_k must be -1 (disable) or at least 1, got {top_k}")
    for tid in sp.get("stop_token_ids") or []:
        if not isinstance(tid, int) or isinstance(tid, bool):
            raise BadRequest(f"stop_token_ids must be a list of token ids, got {sp['stop_token_ids']!r}")
        if not 0 <= tid < VOCAB:
            raise BadRequest(f"stop_token_ids has out-of-vocabulary id {tid}")
    for key, bias in (sp.get("logit_bias") or {}).items():
        if not 0 <= int(key) < VOCAB:
            raise BadRequest(f"logit_bias key {key} out of range")
        if not isinstance(bias, (int, float)) or isinstance(bias, bool):
            raise BadRequest(f"logit_bias[{key!r}] must be a finite number, got {bias!r}")
    return sp


def check_fields_for_scheduler(body: dict[str, Any]) -> None:
    """The /generate fields patch 0015 checks before the scheduler sees them."""
    embeds = body.get("input_embeds")
    if embeds is not None and body.get("text") is None and body.get("input_ids") is None:
        if not embeds or not embeds[0]:
            raise BadRequest("input_embeds cannot be empty.")
        # Launched without --disable-radix-cache, as the soak launches it: this comes before the
        # width check (input_embeds[i] must be a list of hidden_size numbers).
        raise BadRequest("input_embeds is provided while disable_radix_cache is False.")
    start = body.get("logprob_start_len", -1)
    if body.get("return_logprob") and (not isinstance(start, int) or start < -1):
        raise BadRequest(f"logprob_start_len must be -1 (output tokens only) or a prompt position >= 0, got {start!r}")
    session = body.get("session_params")
    if session is not None:
        if not isinstance(session, dict):
            raise BadRequest("session_params must be an object.")
        for name, value in session.items():
            if name not in SESSION_TYPES:
                raise BadRequest(f"session_params has an unknown field {name!r}.")
            if value is not None and not isinstance(value, SESSION_TYPES[name]):
                raise BadRequest(f"session_params.{name} must be {SESSION_TYPES[name].__name__} or null, got {value!r}")
    if len(body.get("token_ids_logprob") or []) > VOCAB:
        raise BadRequest(f"token_ids_logprob has more ids than the vocab size ({VOCAB})")


def check_ids(ids: list[Any], state: State) -> list[int]:
    if not ids:
        raise BadRequest("input_ids cannot be empty")
    for i, tid in enumerate(ids):
        if not isinstance(tid, int) or not 0 <= tid < VOCAB:
            if state.misbehave == "crash_on_oov":
                os._exit(70)
            raise BadRequest(f"input_ids[{i}] = {tid} is out of vocabulary (vocab size {VOCAB})")
    if len(ids) >= CONTEXT:
        raise BadRequest(f"The input ({len(ids)} tokens) is longer than the model's context length ({CONTEXT} tokens)")
    return ids


def check_top_logprobs(count: Any) -> None:
    if count is not None and not 0 <= count <= VOCAB:
        raise BadRequest(f"top_logprobs_num must be in [0, {VOCAB}], got {count}")


def text_ids(text: str) -> list[int]:
    return [1 + (sum(map(ord, word)) % (VOCAB - 1)) for word in text.split()] or [1]


def tokens_for(prompt: list[int], count: int, temperature: float, state: State) -> list[int]:
    if temperature > 0:
        return [random.randrange(VOCAB) for _ in range(count)]
    shift = state.in_flight if state.misbehave == "parity" else 0
    seed = sum(prompt) * 31 + len(prompt)
    return [(seed * (k + 7) + shift) % VOCAB for k in range(count)]


def parse_generate(body: dict[str, Any], state: State) -> tuple[list[int], dict[str, Any]]:
    sp = check_sampling(body.get("sampling_params") or {}, state.misbehave)
    for flag, option in (("return_hidden_states", "--enable-return-hidden-states"),
                         ("custom_logit_processor", "--enable-custom-logit-processor")):
        if body.get(flag):
            raise BadRequest(f"{flag} is not enabled on this server ({option})")
    if body.get("lora_path"):
        raise BadRequest("LoRA is not enabled on this server")
    check_top_logprobs(body.get("top_logprobs_num"))
    check_fields_for_scheduler(body)
    for tid in body.get("token_ids_logprob") or []:
        if not 0 <= tid < VOCAB:
            raise BadRequest(f"token_ids_logprob contains out-of-vocabulary token id {tid}")
    if body.get("input_ids") is not None:
        ids = body["input_ids"]
        if ids and isinstance(ids[0], list):
            for row in ids:
                check_ids(row, state)
            raise BadRequest("batches are not served by the stand-in")
        ids = check_ids(ids, state)
    else:
        ids = text_ids(body.get("text") or "")
    if len(ids) + (sp.get("max_new_tokens") or 0) > CONTEXT:
        raise BadRequest(f"Requested token count exceeds the model's maximum context length of {CONTEXT} tokens")
    return ids, sp


def parse_openai(path: str, body: dict[str, Any], state: State) -> tuple[list[int], dict[str, Any]]:
    if body.get("max_tokens", 16) <= 0:
        raise BadRequest("max_tokens must be positive")
    sp = {"max_new_tokens": body.get("max_tokens", 16), "temperature": body.get("temperature", 1.0),
          "top_p": body.get("top_p", 1.0), "n": body.get("n", 1)}  # fmt: skip
    check_sampling(sp, state.misbehave)
    check_top_logprobs(body.get("top_logprobs") if path.endswith("/chat/completions") else body.get("logprobs"))
    if path.endswith("/chat/completions"):
        messages = body.get("messages") or []
        if not messages:
            raise BadRequest("Messages cannot be empty.")
        if any(m.get("role") not in ("system", "user", "assistant") for m in messages):
            raise BadRequest("unknown message role")
        ids = text_ids(" ".join(str(m.get("content", "")) for m in messages))
    else:
        prompt = body.get("prompt")
        if not prompt:
            raise BadRequest("Prompt cannot be empty")
        ids = check_ids(prompt, state) if isinstance(prompt, list) else text_ids(prompt)
    if len(ids) + sp["max_new_tokens"] > CONTEXT:
        raise BadRequest(f"Requested token count exceeds the model's maximum context length of {CONTEXT} tokens")
    return ids, sp


class Http:
    """One connection: read the request, answer it, close."""

    def __init__(self, state: State, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.state, self.reader, self.writer = state, reader, writer

    async def reply(self, status: int, payload: Any, content_type: str = "application/json") -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        head = f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {len(data)}\r\n\r\n"
        self.writer.write(head.encode() + data)
        await self.writer.drain()

    async def event(self, payload: Any) -> None:
        data = b"data: " + (payload if isinstance(payload, bytes) else json.dumps(payload).encode()) + b"\n\n"
        self.writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        await self.writer.drain()

    async def serve(self) -> None:
        request_line = await self.reader.readline()
        method, path, _ = request_line.decode("latin-1").split(" ", 2)
        headers = {}
        while (line := (await self.reader.readline()).decode("latin-1").strip()):
            name, _, value = line.partition(":")
            headers[name.lower()] = value.strip()
        raw = await self.reader.readexactly(int(headers.get("content-length", 0)))
        try:
            await self.route(method, path, headers, raw)
        except BadRequest as e:
            await self.reply(400, {"object": "error", "message": str(e), "code": 400})
        except (ConnectionError, OSError):
            pass
        except Exception as e:  # noqa: BLE001 (a server's last resort, as FastAPI's)
            await self.reply(500, {"detail": f"Internal Server Error: {type(e).__name__}"})

    async def route(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> None:
        s = self.state
        if path == "/health":
            return await self.reply(200, b"", "text/plain")
        if path == "/v1/models":
            return await self.reply(200, {"data": [{"id": MODEL, "max_model_len": CONTEXT}]})
        if path == "/get_model_info":
            return await self.reply(200, {"model_path": str(s.model_dir)})
        if path == "/server_info":
            return await self.reply(200, {"max_running_requests": MAX_RUNNING_REQUESTS, "version": "stand-in"})
        if path == "/metrics":
            gauge = s.peak if s.misbehave == "stale_gauge" else s.used + s.leaked
            text = f'sglang:num_used_tokens{{model_name="{MODEL}"}} {float(gauge)}\n'
            return await self.reply(200, text.encode(), "text/plain")
        if path.startswith("/v1/loads"):
            return await self.reply(200, {"loads": [{"dp_rank": 0, "num_used_tokens": s.used + s.leaked}]})
        if path == "/flush_cache":
            return await self.reply(200, b"Cache flushed.", "text/plain")
        if not headers.get("content-type", "").startswith("application/json"):
            raise BadRequest("JSON body required (Content-Type: application/json)")
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise BadRequest(f"JSON decode error: {e}") from None
        if not isinstance(body, dict):
            raise BadRequest("JSON decode error: expected an object")
        if path == "/abort_request":
            s.aborted.add(body.get("rid"))
            return await self.reply(200, b"", "text/plain")
        if path == "/generate":
            ids, sp = parse_generate(body, s)
        elif path in ("/v1/completions", "/v1/chat/completions"):
            ids, sp = parse_openai(path, body, s)
        else:
            return await self.reply(404, {"detail": "Not Found"})
        await self.generate(path, body, ids, sp)

    async def generate(self, path: str, body: dict[str, Any], ids: list[int], sp: dict[str, Any]) -> None:
        s = self.state
        count = sp.get("max_new_tokens") or 0
        out = tokens_for(ids, count, sp.get("temperature") or 0.0, s)
        stream, rid = bool(body.get("stream")), body.get("rid")
        held = len(ids)
        s.used += held
        s.in_flight += 1
        cut = False
        try:
            if stream:
                self.writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            for k in range(len(out)):
                if rid in s.aborted:
                    out = out[:k]
                    break
                await asyncio.sleep(0.002)
                s.used += 1
                held += 1
                s.peak = max(s.peak, s.used)
                if stream:
                    await self.event(self.chunk(path, out[: k + 1], out[k]))
            if stream:
                await self.event({"choices": [], "usage": {"completion_tokens": len(out)}})
                await self.event(b"[DONE]")
                self.writer.write(b"0\r\n\r\n")
                await self.writer.drain()
            else:
                await self.reply(200, self.whole(path, out))
        except (ConnectionError, OSError):
            cut = True
            raise
        finally:
            s.in_flight -= 1
            s.used -= held
            if cut and s.misbehave == "leak":
                s.leaked += held

    @staticmethod
    def chunk(path: str, so_far: list[int], last: int) -> dict[str, Any]:
        if path == "/generate":
            return {"text": None, "output_ids": so_far, "meta_info": {"completion_tokens": len(so_far)}}
        if path == "/v1/completions":
            return {"choices": [{"index": 0, "text": f" t{last}"}]}
        return {"choices": [{"index": 0, "delta": {"content": f" t{last}"}}]}

    @staticmethod
    def whole(path: str, out: list[int]) -> dict[str, Any]:
        text = "".join(f" t{t}" for t in out)
        if path == "/generate":
            return {"text": text, "output_ids": out, "meta_info": {"completion_tokens": len(out)}}
        usage = {"completion_tokens": len(out)}
        if path == "/v1/completions":
            return {"choices": [{"index": 0, "text": text}], "usage": usage}
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}], "usage": usage}


async def serve(port: int, misbehave: str | None) -> None:
    model_dir = Path(tempfile.mkdtemp(prefix="standin-model-"))
    (model_dir / "config.json").write_text(json.dumps({"vocab_size": VOCAB}))
    state = State(misbehave, model_dir)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await Http(state, reader, writer).serve()
        except (ConnectionError, OSError, ValueError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=4096, limit=1 << 24)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--misbehave", choices=["error500", "leak", "stale_gauge", "crash_on_oov", "parity"])
    args, _ = p.parse_known_args(argv)  # the other launch_server arguments are ignored
    misbehave = args.misbehave or os.environ.get("STANDIN_MISBEHAVE") or None
    asyncio.run(serve(args.port, misbehave))


if __name__ == "__main__":
    sys.exit(main())
