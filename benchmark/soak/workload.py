"""The valid traffic of a soak: requests on three APIs and how their replies are judged.

A ``LoadRequest`` is one request of the load: /generate with token ids, or
/v1/completions or /v1/chat/completions with text; streaming or not; greedy
(temperature 0) or sampled. ``judge`` turns its ``Reply`` into an ``Outcome``:
success, or the class of its failure, with the latency samples of a stream
(time to the first content event, and the gaps between content events: an
EAGLE-3 step may deliver several tokens in one event, as in
``sglang.bench_serving``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from benchmark.soak.http_client import Reply

APIS = ("generate", "completions", "chat")
PATHS = {"generate": "/generate", "completions": "/v1/completions", "chat": "/v1/chat/completions"}
WORDS = ("the quick brown fox jumps over a lazy dog while seven small engines hum along the river "
         "under bright winter stars and the old lighthouse keeper counts ships").split()  # fmt: skip


@dataclass(frozen=True)
class LoadRequest:
    api: str
    prompt_len: int  # token ids for /generate, words for the OpenAI APIs
    max_tokens: int
    temperature: float
    stream: bool
    seed: int
    ignore_eos: bool = False

    def prompt_ids(self, vocab_size: int) -> list[int]:
        rng = random.Random(self.seed)
        return [rng.randrange(1, vocab_size) for _ in range(self.prompt_len)]

    def prompt_text(self) -> str:
        rng = random.Random(self.seed)
        return " ".join(rng.choice(WORDS) for _ in range(self.prompt_len))

    def payload(self, vocab_size: int, model: str, rid: str | None = None) -> dict[str, Any]:
        if self.api == "generate":
            body: dict[str, Any] = {
                "input_ids": self.prompt_ids(vocab_size),
                "sampling_params": {"max_new_tokens": self.max_tokens, "temperature": self.temperature,
                                    "ignore_eos": self.ignore_eos},
                "stream": self.stream,
            }  # fmt: skip
            if rid is not None:
                body["rid"] = rid
            return body
        body = {"model": model, "max_tokens": self.max_tokens, "temperature": self.temperature, "stream": self.stream,
                "ignore_eos": self.ignore_eos}  # fmt: skip
        if self.stream:
            body["stream_options"] = {"include_usage": True}
        if self.api == "completions":
            body["prompt"] = self.prompt_text()
        else:
            body["messages"] = [{"role": "user", "content": self.prompt_text()}]
        return body

    @property
    def path(self) -> str:
        return PATHS[self.api]


@dataclass
class Outcome:
    """How one request ended. ``error`` None is a success; ``output`` is what parity compares."""

    kind: str
    error: str | None = None
    message: str = ""
    status: int | None = None
    ttft_ms: float | None = None
    itl_ms: list[float] = field(default_factory=list)
    completion_tokens: int = 0
    output: Any = None


def mixed_requests(count: int, seed: int, max_prompt: int, max_output: int) -> list[LoadRequest]:
    """``count`` requests over the three APIs: prompt and output lengths spread over 1..max, half greedy."""
    rng = random.Random(seed)
    prompt_lens = [n for n in (4, 16, 64, 256, 1024) if n <= max_prompt] or [max_prompt]
    output_lens = [n for n in (1, 8, 32, 128, 512) if n <= max_output] or [max_output]
    return [
        LoadRequest(api=APIS[i % len(APIS)], prompt_len=rng.choice(prompt_lens), max_tokens=rng.choice(output_lens),
                    temperature=0.0 if rng.random() < 0.5 else 0.8, stream=rng.random() < 0.5,
                    seed=rng.randrange(1 << 30))  # fmt: skip
        for i in range(count)
    ]


def failure_class(reply: Reply) -> str | None:
    """None when the reply is a complete 2xx answer, else its class: hang, connection, http_NNN, stream_error."""
    if reply.timed_out:
        return "hang"
    if reply.status is None:
        return "connection"
    if reply.status >= 300:
        return f"http_{reply.status}"
    if any(isinstance(data, dict) and "error" in data for _, data in reply.events):
        return "stream_error"
    if reply.error is not None and not reply.cut:
        return "connection"
    return None


def _content_of(api: str, data: dict[str, Any]) -> tuple[bool, int | None, Any]:
    """(carries content, cumulative completion tokens if it says, cumulative or delta output)."""
    if api == "generate":
        meta = data.get("meta_info") or {}
        out = data.get("output_ids", data.get("text"))
        return bool(out), meta.get("completion_tokens"), out
    usage = data.get("usage") or {}
    choices = data.get("choices") or []
    if not choices:
        return False, usage.get("completion_tokens"), None
    choice = choices[0]
    text = choice.get("text") if api == "completions" else (choice.get("delta") or choice.get("message") or {}).get(
        "content"
    )
    return bool(text), usage.get("completion_tokens"), text


def judge(req: LoadRequest, reply: Reply, kind: str = "load") -> Outcome:
    """The outcome of one load request (a stream is judged on its events, else on its JSON body)."""
    outcome = Outcome(kind=kind, status=reply.status, error=failure_class(reply))
    if outcome.error is not None:
        outcome.message = reply.error or reply.message()
        if reply.events and outcome.error == "stream_error":
            outcome.message = str(next(d for _, d in reply.events if isinstance(d, dict) and "error" in d)["error"])
        return outcome
    if not req.stream:
        data = reply.json() or {}
        if req.api == "generate" and isinstance(data, list):  # n > 1 would answer a list
            data = data[0] if data else {}
        _, tokens, out = _content_of(req.api, data)
        outcome.completion_tokens = int(tokens or 0)
        outcome.output = out
        if req.api != "generate":
            outcome.completion_tokens = int((data.get("usage") or {}).get("completion_tokens") or 0)
        return outcome
    times: list[float] = []
    pieces: list[Any] = []
    seen = 0  # /generate streams cumulative output: an event counts when it grew
    for t, data in reply.events:
        if not isinstance(data, dict):
            continue
        has_content, tokens, out = _content_of(req.api, data)
        if tokens is not None:
            outcome.completion_tokens = int(tokens)
        if req.api == "generate":
            has_content, seen = len(out or "") > seen, max(seen, len(out or ""))
        if has_content:
            times.append(t)
            pieces.append(out)
    if not reply.events or reply.events[-1][1] != "[DONE]":
        outcome.error, outcome.message = "stream_incomplete", "the stream ended without [DONE]"
        return outcome
    if times:
        outcome.ttft_ms = (times[0] - reply.started) * 1e3
        outcome.itl_ms = [(b - a) * 1e3 for a, b in zip(times, times[1:])]
    # /generate streams cumulative output; the OpenAI APIs stream deltas.
    outcome.output = pieces[-1] if req.api == "generate" and pieces else "".join(p for p in pieces if p)
    return outcome
