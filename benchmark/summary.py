"""The side-by-side table a run prints: each point's figure per variant, the ratio, the floor.

One line per (config, backend, mode, k, topk, bs) and metric latency_ms or
tokens_per_s; ``G`` after a latency means every timed step replayed a CUDA graph,
``E`` that none did. The ratio is the last variant over the first.
"""

from __future__ import annotations

from collections import defaultdict

from benchmark.schema import Record, ResultSet

SHOWN = ("latency_ms", "tokens_per_s", "accept_len")


def _flag(record: Record) -> str:
    return {True: "G", False: "E"}.get(record.graph, " ") if record.metric == "latency_ms" else " "


def table(results: ResultSet) -> str:
    variants = list(dict.fromkeys(r.variant for r in results.records))
    rows: dict[tuple, dict[str, Record]] = defaultdict(dict)
    for r in results.records:
        if r.metric in SHOWN:
            rows[(r.config, r.backend, r.mode, r.k, r.topk, r.metric, r.bs)][r.variant] = r
    if not rows:
        return "no figures measured"
    head = f"{'config':<9}{'backend':<11}{'mode':<13}{'k':>2}{'tk':>3}{'bs':>4} {'metric':<13}"
    head += "".join(f"{v[:12]:>14}" for v in variants)
    head += f"{'ratio':>8}{'floor ms':>10}"
    lines = [head]
    for (config, backend, mode, k, topk, metric, bs), by_variant in sorted(rows.items()):
        line = f"{config:<9}{backend:<11}{mode:<13}{k:>2}{topk:>3}{bs:>4} {metric:<13}"
        for v in variants:
            r = by_variant.get(v)
            line += f"{r.value:>12.4g} {_flag(r)}" if r else f"{'-':>14}"
        first, last = by_variant.get(variants[0]), by_variant.get(variants[-1])
        ratio = last.value / first.value if first and last and first.value and len(variants) > 1 else None
        line += f"{ratio:>8.3f}" if ratio is not None else f"{'':>8}"
        floor = next((r.floor_ms for r in by_variant.values() if r.floor_ms is not None), None)
        line += f"{floor:>10.4f}" if floor is not None else ""
        lines.append(line)
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
