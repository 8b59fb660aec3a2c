"""Compare two result files (or two variants of one) figure by figure: the regression guard.

Usage:
  python benchmark/compare.py BASELINE.json NEW.json [--threshold 0.05]
  python benchmark/compare.py RESULTS.json --variants stock fork

Every figure whose value moved by more than the threshold is printed. A regression is
a latency up, or a throughput down, by more than the threshold, or a step that
replayed a CUDA graph in the baseline and no longer does. Exit status: 0 no
regression, 1 regression, 2 usage error.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import the package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from benchmark.errors import BenchError  # noqa: E402
from benchmark.schema import Direction, Key, Record, ResultSet, key_label  # noqa: E402

THRESHOLD = 0.05


@dataclass(frozen=True)
class Move:
    key: Key
    base: float
    new: float
    direction: Direction
    regression: bool
    graph_lost: bool = False

    @property
    def rel(self) -> float:
        return (self.new - self.base) / self.base if self.base else float("inf")

    def line(self) -> str:
        tag = "REGRESSION" if self.regression else ("better" if self.improved else "moved")
        graph = "  (graph replay lost)" if self.graph_lost else ""
        return f"{tag:>10}  {key_label(self.key)}: {self.base:.4g} -> {self.new:.4g} ({self.rel:+.1%}){graph}"

    @property
    def improved(self) -> bool:
        return ((self.direction is Direction.LOWER and self.new < self.base)
                or (self.direction is Direction.HIGHER and self.new > self.base))


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
        lines = [f"compare {base_name} -> {new_name}: {self.compared} figures, "
                 f"{len(self.moves)} moved more than {self.threshold:.0%}, {len(self.regressions)} regressions"]
        lines += [m.line() for m in sorted(self.moves, key=lambda m: (not m.regression, m.key))]
        if self.only_base:
            lines.append(f"   missing  {len(self.only_base)} figures of {base_name} are not in {new_name}, e.g. "
                         + key_label(self.only_base[0]))
        if self.only_new:
            lines.append(f"       new  {len(self.only_new)} figures only in {new_name}")
        return "\n".join(lines)


def judge(key: Key, base: Record, new: Record, threshold: float) -> Move | None:
    """The move from ``base`` to ``new``, or None when it is within the threshold and keeps its graph."""
    graph_lost = base.graph is True and new.graph is False
    if base.value == 0:
        moved = new.value != 0
    else:
        moved = abs(new.value - base.value) / abs(base.value) > threshold
    if not moved and not graph_lost:
        return None
    worse = {Direction.LOWER: new.value > base.value, Direction.HIGHER: new.value < base.value,
             Direction.NEUTRAL: False}[base.direction]
    return Move(key, base.value, new.value, base.direction, (moved and worse) or graph_lost, graph_lost)


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
