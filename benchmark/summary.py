"""The side-by-side table a run prints: each point's figure per variant, its spread, the ratio, the floor.

One line per (config, backend, mode, k, topk, bs) and metric latency_ms, tokens_per_s
or accept_len. ``G`` after a latency means every timed step of every round replayed a
CUDA graph, ``E`` that none did. ``range`` is the spread of the rounds' medians
(max - min) relative to the figure; ``-`` where one round was measured. The ratio is
the last variant over the first; the verdict beside it is ``compare.judge``'s: a move
past the threshold that also clears both spreads (``WORSE``/``better``), one that does
not (``noise``), or nothing.
"""

from __future__ import annotations

from collections import defaultdict

from benchmark.compare import THRESHOLD, Move, judge
from benchmark.schema import Record, ResultSet

SHOWN = ("latency_ms", "tokens_per_s", "accept_len")
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


def table(results: ResultSet, threshold: float = THRESHOLD) -> str:
    variants = list(dict.fromkeys(r.variant for r in results.records))
    rows: dict[tuple, dict[str, Record]] = defaultdict(dict)
    for r in results.records:
        if r.metric in SHOWN:
            rows[(r.config, r.backend, r.mode, r.k, r.topk, r.metric, r.bs)][r.variant] = r
    if not rows:
        return "no figures measured"
    head = f"{'config':<9}{'backend':<11}{'mode':<13}{'k':>2}{'tk':>3}{'bs':>4} {'metric':<13}"
    head += "".join(f"{v[:12]:>13}{'range':>7}" for v in variants)
    head += f"{'ratio':>8} {'verdict':<11}{'floor ms':>9}"
    lines = [head]
    for (config, backend, mode, k, topk, metric, bs), by_variant in sorted(rows.items()):
        line = f"{config:<9}{backend:<11}{mode:<13}{k:>2}{topk:>3}{bs:>4} {metric:<13}"
        for v in variants:
            r = by_variant.get(v)
            line += f"{r.value:>11.4g} {_flag(r)}{_range(r):>7}" if r else f"{'-':>13}{'':>7}"
        first, last = by_variant.get(variants[0]), by_variant.get(variants[-1])
        if first and last and first.value and len(variants) > 1:
            line += f"{last.value / first.value:>8.3f} {_verdict(judge(last.key(), first, last, threshold)):<11}"
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
