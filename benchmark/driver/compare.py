"""Compare two result files (or two variants of one) figure by figure: the regression guard.

Usage:
  python benchmark/compare.py BASELINE.json NEW.json [--threshold 0.05]
  python benchmark/compare.py RESULTS.json --variants stock fork

Every figure whose value (the median of its rounds) moved by more than the threshold
is printed with its spread (min..max of the rounds' medians) on both sides. A move
counts only when it clears the spread by the threshold: even the nearest rounds of the
two sides differ by more than it (new lo > base hi * (1 + t) for a rise, new hi < base
lo * (1 - t) for a drop). A regression is a counted latency rise or throughput drop,
or a step that replayed a CUDA graph in every baseline round and not in every new one.
A move past the threshold that does not clear the spread is printed as ``noise`` and
does not fail. A figure of one round (or from a schema 1 file) has no spread: its
interval is its value, so it is judged on the threshold alone, as before rounds.
Exit status: 0 no regression, 1 regression, 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

from benchmark.core.errors import BenchError
from benchmark.driver.schema import Direction, Key, Record, ResultSet, key_label

THRESHOLD = 0.05


@dataclass(frozen=True)
class Move:
    key: Key
    base: Record
    new: Record
    regression: bool
    within_spread: bool = False  # past the threshold, but the rounds do not clear each other by it
    graph_lost: bool = False

    @property
    def direction(self) -> Direction:
        return self.base.direction

    @property
    def rel(self) -> float:
        return (self.new.value - self.base.value) / self.base.value if self.base.value else float("inf")

    @property
    def tag(self) -> str:
        if self.regression:
            return "REGRESSION"
        if self.within_spread:
            return "noise"
        return "better" if self.improved else "moved"

    def line(self) -> str:
        graph = ""
        if self.graph_lost:
            graph = "  (graph replay lost)" if self.new.graph is False else "  (graph replay lost in some runs)"
        return (f"{self.tag:>10}  {key_label(self.key)}: {self.base.value:.4g} {self.base.spread_label()} -> "
                f"{self.new.value:.4g} {self.new.spread_label()} ({self.rel:+.1%}){graph}")

    @property
    def improved(self) -> bool:
        new, base = self.new.value, self.base.value
        return ((self.direction is Direction.LOWER and new < base)
                or (self.direction is Direction.HIGHER and new > base))


@dataclass
class Comparison:
    threshold: float
    moves: list[Move] = field(default_factory=list)
    only_base: list[Key] = field(default_factory=list)
    only_new: list[Key] = field(default_factory=list)
    compared: int = 0

    @property
    def regressions(self) -> list[Move]:
        return [m for m in self.moves if m.regression]

    def report(self, base_name: str, new_name: str) -> str:
        noise = sum(m.tag == "noise" for m in self.moves)
        counted = len(self.moves) - noise
        head = (f"compare {base_name} -> {new_name}: {self.compared} figures, {counted} moved more than "
                f"{self.threshold:.0%} beyond the spread, {noise} within it (noise), {len(self.regressions)} regressions")
        lines = [head, "  (value [min..max] xN: median and range of the rounds' medians; (1 round): no spread measured)"]
        order = {"REGRESSION": 0, "better": 1, "moved": 2, "noise": 3}
        lines += [m.line() for m in sorted(self.moves, key=lambda m: (order[m.tag], m.key))]
        if self.only_base:
            lines.append(f"   missing  {len(self.only_base)} figures of {base_name} are not in {new_name}, e.g. "
                         + key_label(self.only_base[0]))
        if self.only_new:
            lines.append(f"       new  {len(self.only_new)} figures only in {new_name}")
        return "\n".join(lines)


def apart(base: Record, new: Record, threshold: float) -> bool:
    """True when the rounds' intervals are further apart than ``threshold`` (relative to the base side).

    Requiring the gap, not only the medians' move, to pass the threshold is what keeps
    chance out: with three rounds a side, all of one variant's rounds land above all of
    the other's one time in twenty by luck alone, but rarely by more than the threshold.
    """
    (base_lo, base_hi), (new_lo, new_hi) = base.interval(), new.interval()
    return new_lo > base_hi * (1 + threshold) or new_hi < base_lo * (1 - threshold)


def judge(key: Key, base: Record, new: Record, threshold: float) -> Move | None:
    """The move from ``base`` to ``new``; None when it is within the threshold and keeps its graph."""
    graph_lost = base.graph is True and new.graph is not True  # None: some rounds or runs went eager
    if base.value == 0:
        moved = new.value != 0
    else:
        moved = abs(new.value - base.value) / abs(base.value) > threshold
    if not moved and not graph_lost:
        return None
    counted = moved and apart(base, new, threshold)
    worse = {Direction.LOWER: new.value > base.value, Direction.HIGHER: new.value < base.value,
             Direction.NEUTRAL: False}[base.direction]
    return Move(key, base, new, (counted and worse) or graph_lost, moved and not counted, graph_lost)


def compare_maps(base: dict[Key, Record], new: dict[Key, Record], threshold: float = THRESHOLD,
                 metrics: tuple[str, ...] | None = None) -> Comparison:
    if metrics is not None:
        base = {k: r for k, r in base.items() if r.metric in metrics}
        new = {k: r for k, r in new.items() if r.metric in metrics}
    result = Comparison(threshold)
    for key in sorted(base.keys() & new.keys()):
        result.compared += 1
        move = judge(key, base[key], new[key], threshold)
        if move is not None:
            result.moves.append(move)
    result.only_base = sorted(base.keys() - new.keys())
    result.only_new = sorted(new.keys() - base.keys())
    return result


def compare_files(base: ResultSet, new: ResultSet, threshold: float = THRESHOLD) -> Comparison:
    return compare_maps(base.by_key(), new.by_key(), threshold)


def compare_variants(results: ResultSet, base_variant: str, new_variant: str,
                     threshold: float = THRESHOLD, metrics: tuple[str, ...] | None = None) -> Comparison:
    """``new_variant`` against ``base_variant`` in one file; keys are reported under the new variant."""
    by_key = results.by_key()
    variants = {k[0] for k in by_key}
    for name in (base_variant, new_variant):
        if name not in variants:
            raise BenchError(f"variant {name!r} is not in the results; it has {', '.join(sorted(variants)) or 'none'}")
    base = {(new_variant, *k[1:]): r for k, r in by_key.items() if k[0] == base_variant}
    new = {k: r for k, r in by_key.items() if k[0] == new_variant}
    return compare_maps(base, new, threshold, metrics)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmark/compare.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="BASELINE NEW, or one RESULTS with --variants")
    parser.add_argument("--variants", nargs=2, metavar=("BASE", "NEW"), help="compare two variants of one file")
    parser.add_argument("--threshold", type=float, default=THRESHOLD, help="relative move to report (0.05 = 5%%)")
    args = parser.parse_args(argv)
    try:
        if args.variants:
            if len(args.files) != 1:
                raise BenchError("--variants takes exactly one results file")
            comparison = compare_variants(ResultSet.load(args.files[0]), *args.variants, threshold=args.threshold)
            names = tuple(args.variants)
        else:
            if len(args.files) != 2:
                raise BenchError("give BASELINE and NEW results files (or one file with --variants)")
            base, new = (ResultSet.load(p) for p in args.files)
            comparison = compare_files(base, new, args.threshold)
            names = (str(args.files[0]), str(args.files[1]))
    except BenchError as exc:
        print(f"compare.py: error: {exc}", file=sys.stderr)
        return 2
    print(comparison.report(*names))
    return 1 if comparison.regressions else 0


if __name__ == "__main__":
    raise SystemExit(main())
