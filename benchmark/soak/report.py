"""soak.json: what one soak run saw, and whether it met the targets.

``summarize`` folds the outcomes of every request, the bad-input verdicts and
the after-drain checks into one flat record with the fields issue 14 asks for
(``requests``, ``completed``, ``errors_by_class``, ``unexpected_errors``,
``bad_inputs_tried``, ``bad_inputs_rejected_4xx``, ``leaked_tokens``,
``parity_mismatches``, ``ttft_p50/p99_ms``, ``itl_p50/p99_ms``,
``tokens_per_s``) and a list of ``failures`` in words; ``passed`` is True
when that list is empty.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from benchmark.soak.bad_inputs import BadInputResult
from benchmark.soak.server import KvReading
from benchmark.soak.workload import Outcome

# Kinds of request whose every failure is unexpected (valid input, nothing done to them).
STRICT_KINDS = ("load", "parity", "burst", "disconnect", "fresh")
# An aborted request may end in a 4xx; only these classes are unexpected for it.
SEVERE = ("hang", "connection", "stream_incomplete")
# Log findings that fail a run (tracebacks are reported only: some are logged for handled client errors).
FAILING_LOG_FINDINGS = ("memory_leak_warnings", "device_asserts")
NO_READING = KvReading(None, None)


@dataclass
class AfterDrain:
    """The checks once the load has drained."""

    kv_idle: KvReading = NO_READING
    kv_after_drain: KvReading = NO_READING
    kv_after_flush: KvReading = NO_READING
    health_status: int | None = None
    fresh_greedy_ok: bool = False
    dead_processes: list[str] = field(default_factory=list)  # "pid name" of the server's own processes
    exited_helpers: list[str] = field(default_factory=list)  # other descendants that exited: not a failure
    log_findings: dict[str, int] = field(default_factory=dict)


def excess(now: float | None, idle: float | None) -> float | None:
    """Tokens in use above the idle value (never negative); None when either reading is missing."""
    return None if now is None or idle is None else max(0.0, now - idle)


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0..100), linear between ranks; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def is_unexpected(outcome: Outcome) -> bool:
    if outcome.error is None:
        return False
    if outcome.kind in STRICT_KINDS:
        return True
    return outcome.error in SEVERE or outcome.error.startswith("http_5")


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def summarize(
    outcomes: list[Outcome],
    bad: list[BadInputResult],
    after: AfterDrain,
    parity: list[dict[str, Any]],
    load_wall_s: float,
    config: dict[str, Any],
) -> dict[str, Any]:
    errors = Counter(o.error for o in outcomes if o.error is not None)
    errors.update(f"bad_input_{b.verdict}" for b in bad if b.verdict == "unexpected")
    unexpected = sum(map(is_unexpected, outcomes)) + sum(b.verdict == "unexpected" for b in bad)
    load = [o for o in outcomes if o.kind == "load" and o.error is None]
    ttft = [o.ttft_ms for o in load if o.ttft_ms is not None]
    itl = [gap for o in load for gap in o.itl_ms]
    idle, drained, flushed = after.kv_idle, after.kv_after_drain, after.kv_after_flush
    mismatches = [p for p in parity if not p["equal"]]
    wrongly_accepted = [b.name for b in bad if b.must_reject and b.verdict == "accepted"]
    unnamed = [b.name for b in bad if b.verdict.startswith("rejected") and not b.names_problem]
    record: dict[str, Any] = {
        "requests": len(outcomes) + len(bad),
        "completed": sum(o.error is None for o in outcomes),
        "errors_by_class": dict(sorted(errors.items())),
        "unexpected_errors": unexpected,
        "bad_inputs_tried": len(bad),
        "bad_inputs_rejected_4xx": sum(b.verdict == "rejected_4xx" for b in bad),
        "bad_inputs_rejected_in_stream": sum(b.verdict == "rejected_in_stream" for b in bad),
        "bad_inputs_accepted_wrongly": wrongly_accepted,
        "bad_inputs_message_misses_problem": unnamed,
        "leaked_tokens": excess(drained.value, idle.value),
        "leaked_tokens_after_flush": excess(flushed.value, idle.value),
        "leaked_tokens_gauge": excess(drained.gauge, idle.gauge),
        "parity_checked": len(parity),
        "parity_mismatches": len(mismatches),
        "ttft_p50_ms": _round(percentile(ttft, 50)),
        "ttft_p99_ms": _round(percentile(ttft, 99)),
        "itl_p50_ms": _round(percentile(itl, 50)),
        "itl_p99_ms": _round(percentile(itl, 99)),
        "tokens_per_s": _round(sum(o.completion_tokens for o in load) / load_wall_s if load_wall_s > 0 else None, 1),
        "load_wall_s": round(load_wall_s, 2),
        "after_drain": asdict(after),
        "bad_inputs": [asdict(b) for b in bad],
        "parity": mismatches[:20],
        "config": config,
    }
    record["failures"] = failures(record, after)
    record["passed"] = not record["failures"]
    return record


def failures(record: dict[str, Any], after: AfterDrain) -> list[str]:
    """The targets this run missed, in words."""
    out: list[str] = []
    if record["unexpected_errors"]:
        out.append(f"{record['unexpected_errors']} unexpected errors: {record['errors_by_class']}")
    if record["bad_inputs_accepted_wrongly"]:
        out.append(f"bad inputs answered 2xx: {record['bad_inputs_accepted_wrongly']}")
    if record["bad_inputs_message_misses_problem"]:
        out.append(f"rejections whose message does not name the problem: {record['bad_inputs_message_misses_problem']}")
    if record["leaked_tokens"] is None:
        out.append("KV usage unknown (neither /v1/loads nor sglang:num_used_tokens on /metrics answered)")
    elif record["leaked_tokens"] > 0:
        out.append(f"{record['leaked_tokens']:.0f} KV tokens still used after the drain (idle: {after.kv_idle.value}; "
                   f"after /flush_cache: {record['leaked_tokens_after_flush']} above idle)")  # fmt: skip
    if record["leaked_tokens_gauge"] and not record["leaked_tokens"]:
        out.append(f"the sglang:num_used_tokens gauge still reads {record['leaked_tokens_gauge']:.0f} above idle "
                   f"after the drain while /v1/loads is back at idle (a stale gauge)")  # fmt: skip
    if record["parity_mismatches"]:
        out.append(f"{record['parity_mismatches']} greedy outputs under load differ from the same prompt alone")
    if after.health_status != 200:
        out.append(f"/health answered {after.health_status} after the drain")
    if not after.fresh_greedy_ok:
        out.append("a fresh greedy request after the drain failed")
    if after.dead_processes:
        out.append(f"server processes died: {after.dead_processes}")
    for name in FAILING_LOG_FINDINGS:
        if after.log_findings.get(name):
            out.append(f"server log: {after.log_findings[name]} {name.replace('_', ' ')}")
    return out
