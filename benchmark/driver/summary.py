"""The side-by-side table a run prints: each point's figure per variant, its spread, the ratio, the floor.

One line per (config, backend, mode, k, topk, bs) and metric latency_ms, tokens_per_s,
decode_tokens_per_s, accept_len, and where the e2e engines were profiled gpu_bound_ratio,
share_of_gpu_bound, decode_share_of_gpu_bound and timed_gpu_idle_frac.
``G`` after a latency means every timed step of every round replayed a CUDA graph, ``E``
that none did. ``range`` is the spread of the rounds' medians
(max - min) relative to the figure; ``-`` where one round was measured. The ratio is
the last variant over the first; the verdict beside it is ``compare.judge``'s: a move
past the threshold that also clears both spreads (``WORSE``/``better``), one that does
not (``noise``), or nothing.
"""

from __future__ import annotations

from collections import defaultdict

from benchmark.driver.compare import THRESHOLD, Move, judge
from benchmark.driver.schema import Record, ResultSet

SHOWN = ("latency_ms", "tokens_per_s", "decode_tokens_per_s", "accept_len", "gpu_bound_ratio", "share_of_gpu_bound",
         "decode_share_of_gpu_bound", "timed_gpu_idle_frac")
VERDICTS = {"REGRESSION": "WORSE", "better": "better", "noise": "noise", "moved": "moved"}


def _flag(record: Record) -> str:
    return {True: "G", False: "E"}.get(record.graph, " ") if record.metric == "latency_ms" else " "


def _range(record: Record) -> str:
    lo, hi = record.interval()
    if len(record.rounds) < 2 or not record.value:
        return "-"
    return f"{(hi - lo) / abs(record.value):.1%}"


def _verdict(move: Move | None) -> str:
    if move is None:
        return ""
    return "GRAPH LOST" if move.graph_lost else VERDICTS[move.tag]


Point = tuple[str, str, str, int, int, str, int]  # config, backend, mode, k, topk, metric, bs


def variants(results: ResultSet) -> list[str]:
    """The variants in the order they were first recorded: the first is the base of every ratio."""
    return list(dict.fromkeys(r.variant for r in results.records))


def points(results: ResultSet, metrics: tuple[str, ...] = SHOWN) -> dict[Point, dict[str, Record]]:
    """The records of ``metrics`` by point (the table's row), then by variant."""
    rows: dict[Point, dict[str, Record]] = defaultdict(dict)
    for r in results.records:
        if r.metric in metrics:
            rows[(r.config, r.backend, r.mode, r.k, r.topk, r.metric, r.bs)][r.variant] = r
    return rows


def ratio(by_variant: dict[str, Record], base: str, new: str) -> float | None:
    """``new``'s figure over ``base``'s at one point; None where either is missing or the base is 0."""
    first, last = by_variant.get(base), by_variant.get(new)
    return last.value / first.value if first and last and first.value else None


def table(results: ResultSet, threshold: float = THRESHOLD) -> str:
    names = variants(results)
    rows = points(results)
    if not rows:
        return "no figures measured"
    head = f"{'config':<9}{'backend':<11}{'mode':<13}{'k':>2}{'tk':>3}{'bs':>4} {'metric':<26}"
    head += "".join(f"{v[:12]:>13}{'range':>7}" for v in names)
    head += f"{'ratio':>8} {'verdict':<11}{'floor ms':>9}"
    lines = [head]
    for (config, backend, mode, k, topk, metric, bs), by_variant in sorted(rows.items()):
        line = f"{config:<9}{backend:<11}{mode:<13}{k:>2}{topk:>3}{bs:>4} {metric:<26}"
        for v in names:
            r = by_variant.get(v)
            line += f"{r.value:>11.4g} {_flag(r)}{_range(r):>7}" if r else f"{'-':>13}{'':>7}"
        moved = ratio(by_variant, names[0], names[-1]) if len(names) > 1 else None
        if moved is not None:
            first, last = by_variant[names[0]], by_variant[names[-1]]
            line += f"{moved:>8.3f} {_verdict(judge(last.key(), first, last, threshold)):<11}"
        else:
            line += f"{'':>8} {'':<11}"
        floor = next((r.floor_ms for r in by_variant.values() if r.floor_ms is not None), None)
        line += f"{floor:>9.4f}" if floor is not None else ""
        lines.append(line.rstrip())
    return "\n".join(lines)


def failures(results: ResultSet, limit: int = 20) -> str:
    """The first errors, one line each (the full text is in results.json and the logs)."""
    lines = []
    for e in results.errors[:limit]:
        message = str(e.get("error", "")).strip().splitlines()
        lines.append(f"  {e.get('job', '?')}: {e.get('where', '')}: {message[-1] if message else ''}")
    if len(results.errors) > limit:
        lines.append(f"  ... {len(results.errors) - limit} more in results.json")
    return "\n".join(lines)
