"""One soak run against one server: load and faults for a fixed time, then the after-drain checks.

Order: read the idle KV usage; run the parity prompts one at a time; then,
for ``duration_s``, ``clients`` coroutines each send mixed valid requests
back to back while a fault task sends the parity prompts again (concurrently,
inside the load), cuts streams mid-way, aborts running requests through
``/abort_request``, sends every bad input once and fires one burst of
``burst`` requests at once. New requests stop at the deadline; the ones in
flight finish (each has ``request_timeout_s``). Then: ``/health``, one fresh
greedy request, the KV usage (``/v1/loads`` and the ``/metrics`` gauge)
polled back to its idle value for up to ``drain_timeout_s``, and if it is not
back, polled again after ``/flush_cache`` (which frees the radix cache, locked
nodes too: what it frees was held by the cache, what it does not was lost by
the allocator); and, when the soak started the server, its process tree and
log.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from benchmark.soak.bad_inputs import BadInput, BadInputResult, bad_inputs, verdict
from benchmark.soak.http_client import Endpoint, call, get, post_json
from benchmark.soak.report import AfterDrain, summarize
from benchmark.soak.server import KvReading, LaunchedServer, ServerFacts, kv_reading
from benchmark.soak.workload import LoadRequest, Outcome, judge, mixed_requests


@dataclass(frozen=True)
class SoakConfig:
    duration_s: float = 300.0
    clients: int = 64
    burst: int = 1000
    parity_prompts: int = 16
    disconnects: int = 16
    aborts: int = 8
    max_prompt: int = 1024
    max_output: int = 512
    request_timeout_s: float = 120.0
    drain_timeout_s: float = 60.0
    max_requests: int = 200_000
    seed: int = 14
    bad_inputs: bool = True  # off: load and faults only (a stock server dies on some of them)


def parity_requests(config: SoakConfig) -> list[LoadRequest]:
    return [LoadRequest("generate", prompt_len=16 + 8 * i, max_tokens=32, temperature=0.0, stream=False,
                        seed=10_000 + i) for i in range(config.parity_prompts)]  # fmt: skip


class Soak:
    """The state of one run: the server, what it knows about it, and every outcome so far."""

    def __init__(self, ep: Endpoint, facts: ServerFacts, config: SoakConfig) -> None:
        self.ep, self.facts, self.config = ep, facts, config
        self.outcomes: list[Outcome] = []
        self.bad: list[BadInputResult] = []
        self.sent = 0
        self.deadline = 0.0

    async def send(self, req: LoadRequest, kind: str, rid: str | None = None, cut_after: int | None = None) -> Outcome:
        self.sent += 1
        payload = req.payload(self.facts.vocab_size, self.facts.model, rid)
        reply = await post_json(self.ep, req.path, payload, timeout=self.config.request_timeout_s, cut_after=cut_after)
        outcome = judge(req, reply, kind)
        if reply.cut:
            outcome.error = None
        self.outcomes.append(outcome)
        return outcome

    def _open(self) -> bool:
        return time.monotonic() < self.deadline and self.sent < self.config.max_requests

    async def client(self, requests: itertools.cycle) -> None:
        while self._open():
            outcome = await self.send(next(requests), "load")
            if outcome.error == "connection":  # the server is gone: count, but do not spin
                await asyncio.sleep(0.5)

    async def disconnect(self, i: int) -> None:
        out = min(256, self.facts.context_len // 2)
        req = LoadRequest("generate" if i % 2 else "completions", 16, out, 0.8, True, seed=20_000 + i, ignore_eos=True)
        await self.send(req, "disconnect", cut_after=2 + i % 3)

    async def abort(self, i: int) -> None:
        rid = f"soak-abort-{uuid.uuid4().hex}"
        req = LoadRequest("generate", 64, self.config.max_output, 0.8, False, seed=30_000 + i, ignore_eos=True)
        running = asyncio.create_task(self.send(req, "abort", rid=rid))
        await asyncio.sleep(0.2 + 0.1 * (i % 4))
        reply = await post_json(self.ep, "/abort_request", {"rid": rid}, timeout=30)
        self.outcomes.append(Outcome(kind="abort_call", status=reply.status,
                                     error=None if reply.status == 200 else f"http_{reply.status}" if reply.status
                                     else "hang" if reply.timed_out else "connection"))  # fmt: skip
        await running

    async def bad_input(self, case: BadInput) -> None:
        self.sent += 1
        reply = await call(self.ep, "POST", case.path, case.body, timeout=self.config.request_timeout_s,
                           content_type=case.content_type)  # fmt: skip
        self.bad.append(verdict(case, reply))

    async def burst(self) -> None:
        reqs = [LoadRequest("generate" if i % 2 else "completions", 8, 8, 0.0 if i % 3 else 0.8, False, seed=40_000 + i)
                for i in range(self.config.burst)]  # fmt: skip
        await asyncio.gather(*(self.send(r, "burst") for r in reqs))

    async def faults(self, parity: list[LoadRequest]) -> list[Outcome]:
        """Everything done to the server inside the load window; returns the parity outcomes under load."""
        c = self.config
        await asyncio.sleep(min(1.0, c.duration_s / 10))
        under_load = asyncio.gather(*(self.send(r, "parity") for r in parity))
        spread = max(c.duration_s / 3, 0.1)
        tasks = [self.disconnect(i) for i in range(c.disconnects)] + [self.abort(i) for i in range(c.aborts)]
        cases = bad_inputs(self.facts.vocab_size, self.facts.context_len, self.facts.model) if c.bad_inputs else []

        async def staggered(coro, delay: float):
            await asyncio.sleep(delay)
            await coro

        n = len(tasks) + len(cases)
        jobs = [staggered(job, spread * k / max(n, 1)) for k, job in enumerate(tasks + [self.bad_input(x) for x in cases])]
        jobs.append(staggered(self.burst(), c.duration_s / 2))
        results, *_ = await asyncio.gather(under_load, *jobs)
        return list(results)

    async def settle(self, idle: KvReading, timeout_s: float) -> KvReading:
        """Poll the KV usage until both readings are back at their idle values, or ``timeout_s`` ran out."""
        limit = time.monotonic() + timeout_s
        while True:
            now = await kv_reading(self.ep)
            back = all(n is None or i is None or n <= i for n, i in ((now.loads, idle.loads), (now.gauge, idle.gauge)))
            if back or time.monotonic() > limit:
                return now
            await asyncio.sleep(1.0)

    async def after_drain(self, idle: KvReading, server: LaunchedServer | None) -> AfterDrain:
        after = AfterDrain(kv_idle=idle)
        after.health_status = (await get(self.ep, "/health", timeout=30)).status
        fresh = await self.send(LoadRequest("generate", 16, 16, 0.0, False, seed=50_000), "fresh")
        after.fresh_greedy_ok = fresh.error is None and bool(fresh.output)
        after.kv_after_drain = await self.settle(idle, self.config.drain_timeout_s)
        after.kv_after_flush = after.kv_after_drain
        if after.kv_after_drain != idle:  # what /flush_cache frees is the radix cache's (locked nodes too)
            await post_json(self.ep, "/flush_cache", {}, timeout=30)
            after.kv_after_flush = await self.settle(idle, self.config.drain_timeout_s)
        if server is not None:
            after.dead_processes = server.dead_processes()
            after.exited_helpers = server.exited_helpers()
            after.log_findings = server.log_findings()
        return after


async def run_soak(ep: Endpoint, facts: ServerFacts, config: SoakConfig,
                   server: LaunchedServer | None = None) -> dict[str, Any]:  # fmt: skip
    """One soak against the server at ``ep``; the soak.json record of it."""
    soak = Soak(ep, facts, config)
    idle = await kv_reading(ep)
    parity = parity_requests(config)
    alone = [await soak.send(r, "parity") for r in parity]
    requests = itertools.cycle(mixed_requests(512, config.seed, min(config.max_prompt, facts.context_len // 4),
                                              config.max_output))  # fmt: skip
    soak.deadline = time.monotonic() + config.duration_s
    start = time.monotonic()
    clients = [soak.client(requests) for _ in range(config.clients)]
    under_load, *_ = await asyncio.gather(soak.faults(parity), *clients)
    load_wall = time.monotonic() - start
    after = await soak.after_drain(idle, server)
    pairs = [
        {"prompt": i, "equal": a.error is None and b.error is None and a.output == b.output,
         "alone": _head(a), "under_load": _head(b)}
        for i, (a, b) in enumerate(zip(alone, under_load))
    ]  # fmt: skip
    run_config = {**asdict(config), **asdict(facts)}
    return summarize(soak.outcomes, soak.bad, after, pairs, load_wall, run_config)


def _head(outcome: Outcome) -> Any:
    """What a parity record keeps of one output: its error, or its first tokens."""
    if outcome.error is not None:
        return {"error": outcome.error, "message": outcome.message[:200]}
    return outcome.output[:16] if isinstance(outcome.output, (list, str)) else outcome.output
