"""Folds the per-round records of one figure into one record: median of rounds plus their spread.

A round is one fresh process per variant; the plan runs the variants of a configuration
alternately (A B A B ...), so every round of stock has a fork round next to it in time.
Each round yields one median per figure. The merged record keeps every round's median
(``rounds``, in round order), reports their median as ``value`` and their min/max as
``lo``/``hi``: the between-process spread that a single run cannot show.
"""

from __future__ import annotations

from dataclasses import replace
from statistics import median

from benchmark.driver.schema import Key, Record


def merged_graph(flags: list[bool | None]) -> bool | None:
    """True/False when every round agreed; None when rounds (or runs within one) took different paths."""
    return flags[0] if flags and all(f is flags[0] for f in flags) else None


def _median_of(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return median(present) if present else None


def merge(rounds: list[tuple[int, Record]]) -> Record:
    """One figure's records, tagged with their round number, as one record."""
    ordered = [r for _round, r in sorted(rounds, key=lambda item: item[0])]
    values = [r.value for r in ordered]
    first = ordered[0]
    extra = dict(first.extra)
    if len(ordered) > 1:
        extra["round_numbers"] = [n for n, _r in sorted(rounds, key=lambda item: item[0])]
        extra["round_graphs"] = [r.graph for r in ordered]
    return replace(first, value=median(values), rounds=values, lo=min(values), hi=max(values),
                   graph=merged_graph([r.graph for r in ordered]), p20=_median_of([r.p20 for r in ordered]),
                   p80=_median_of([r.p80 for r in ordered]), n=sum(r.n for r in ordered), extra=extra)


def merge_rounds(tagged: list[tuple[int, Record]]) -> list[Record]:
    """Every figure's rounds merged, in the order the figures first appeared."""
    by_key: dict[Key, list[tuple[int, Record]]] = {}
    for number, record in tagged:
        by_key.setdefault(record.key(), []).append((number, record))
    return [merge(items) for items in by_key.values()]
