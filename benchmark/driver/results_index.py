"""The index of the committed runs: ``benchmark/results/INDEX.md``, generated from the run folders.

A run folder is a folder of ``benchmark/results/`` (benchmark runs) or of ``benchmark/results/gate/``
(the GPU gate's runs) named ``YYYYMMDD-HHMM-<gpu>-<name>``. Its row gives the date, GPU and name
from the folder name, what it is from its README's first heading, and a few headline figures:

* a ``benchmark/run.py`` ``results.json``: the first end-to-end tokens/s ratios, last variant over
  the first (or EAGLE-3 over no speculation where one variant ran); per-step runs: the first verify
  latency ratios; and the errors it recorded;
* the attention benchmark's ``results.json``: its correctness checks that passed;
* a gate's ``summary.json``: its engine cases that passed, and those whose greedy output matched.

Regenerate it after committing or changing a run (a test fails while it is stale):

  python -m benchmark.results_index          # writes benchmark/results/INDEX.md
  python -m benchmark.results_index --check  # exit 1 when INDEX.md differs from what it would write
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.driver.schema import READABLE, ResultSet
from benchmark.driver.summary import points, ratio, variants

RESULTS = Path(__file__).resolve().parents[1] / "results"
INDEX = "INDEX.md"
GATE = "gate"
RUN_NAME = re.compile(r"^(\d{4})(\d{2})(\d{2})-(\d{2})(\d{2})-([a-z0-9]+)-(.+)$")
ATTN_SCHEMA = "sglang-fastpath-attn/"
FIGURES = 3  # headline figures a row shows


@dataclass(frozen=True)
class Run:
    """One row of the index."""

    path: str  # relative to benchmark/results/
    date: str
    gpu: str
    name: str
    title: str
    variants: str
    figures: str

    def row(self) -> str:
        cells = [self.date, self.gpu, f"[{self.name}]({self.path}/)", self.title, self.variants, self.figures]
        return "| " + " | ".join(cell.replace("|", "\\|") or "-" for cell in cells) + " |"


def run_folders(root: Path) -> list[Path]:
    """The run folders under ``root`` and ``root/gate``, each list in name (date) order."""
    return [folder for parent in (root, root / GATE) if parent.is_dir()
            for folder in sorted(parent.iterdir()) if folder.is_dir() and RUN_NAME.match(folder.name)]


def heading(folder: Path) -> str:
    """The README's first ``# `` heading, without the ``#``; empty without one."""
    readme = folder / "README.md"
    lines = readme.read_text().splitlines() if readme.is_file() else []
    return next((line[2:].strip() for line in lines if line.startswith("# ")), "")


def _bs_label(config: str, bs: int) -> str:
    return f"{config} bs {bs}"


def bench_figures(results: ResultSet) -> tuple[list[str], list[str]]:
    """(variants, headline figures) of a ``benchmark/run.py`` result set."""
    names = variants(results)
    figures: list[str] = []
    if len(names) > 1:
        base, new = names[0], names[-1]
        rows = points(results, ("tokens_per_s",))
        spec_first = sorted(rows.items(), key=lambda item: (item[0][2] != "e2e_spec", item[0]))
        for (config, _, mode, _, _, _, bs), by_variant in spec_first:
            moved = ratio(by_variant, base, new)
            if moved is not None:
                figures.append(f"{new}/{base} {mode} {_bs_label(config, bs)}: {moved:.2f}x tok/s")
        if not figures:
            for (config, _, mode, k, _, _, bs), by_variant in sorted(points(results, ("latency_ms",)).items()):
                moved = ratio(by_variant, base, new)
                if mode == "verify" and moved is not None:
                    figures.append(f"{new}/{base} verify k {k} {_bs_label(config, bs)}: {moved:.2f}x latency")
    else:
        speeds: dict[tuple[str, int], dict[str, float]] = {}
        for (config, _, mode, _, _, _, bs), by_variant in sorted(points(results, ("tokens_per_s",)).items()):
            speeds.setdefault((config, bs), {})[mode] = next(iter(by_variant.values())).value
        for (config, bs), by_mode in sorted(speeds.items()):
            if by_mode.get("e2e_nospec") and "e2e_spec" in by_mode:
                figures.append(f"EAGLE-3 / no spec {_bs_label(config, bs)}: "
                               f"{by_mode['e2e_spec'] / by_mode['e2e_nospec']:.2f}x tok/s")
    figures = figures[:FIGURES]
    if results.errors:
        figures.append(f"{len(results.errors)} error{'s' if len(results.errors) > 1 else ''}")
    return names, figures


def attn_figures(data: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(variants, figures) of the attention benchmark's ``results.json``."""
    checks = data.get("checks", [])
    names = list(dict.fromkeys(r["variant"] for r in data.get("records", [])))
    return names, [f"{sum(bool(c.get('ok')) for c in checks)}/{len(checks)} checks ok"]


def gate_figures(summary: dict[str, Any]) -> list[str]:
    """A gate's ``summary.json``: engine cases that passed, and parity where it was judged."""
    cases = summary.get("cases", [])
    if all("ok" in c for c in cases):
        figures = [f"{sum(bool(c['ok']) for c in cases)}/{len(cases)} engine cases ok"]
    else:  # the first gate's summary has no ok field
        figures = [f"{len(cases)} engine cases"]
    judged = [c for c in cases if c.get("greedy_equals_no_spec") is not None]
    if judged:
        same = sum(bool(c["greedy_equals_no_spec"]) for c in judged)
        figures.append(f"greedy = no spec in {same}/{len(judged)}")
    return figures


def describe(folder: Path, root: Path) -> Run:
    """The index row of one run folder."""
    match = RUN_NAME.match(folder.name)
    assert match, folder
    year, month, day, hour, minute, gpu, name = match.groups()
    names: list[str] = []
    figures: list[str] = []
    results, summary = folder / "results.json", folder / "summary.json"
    if results.is_file():
        data = json.loads(results.read_text())
        schema = str(data.get("schema", ""))
        if schema in READABLE:
            names, figures = bench_figures(ResultSet.from_dict(data, str(results)))
        elif schema.startswith(ATTN_SCHEMA):
            names, figures = attn_figures(data)
    elif summary.is_file():
        figures = gate_figures(json.loads(summary.read_text()))
    return Run(folder.relative_to(root).as_posix(), f"{year}-{month}-{day} {hour}:{minute}", gpu, name,
               heading(folder), " vs ".join(names), "; ".join(figures))


def render(root: Path = RESULTS) -> str:
    """INDEX.md's text for the run folders under ``root``."""
    head = ["| date | GPU | run | what | variants | headline (last / first variant, named) |",
            "| --- | --- | --- | --- | --- | --- |"]
    runs = [describe(folder, root) for folder in run_folders(root)]
    bench = [run.row() for run in runs if not run.path.startswith(f"{GATE}/")]
    gate = [run.row() for run in runs if run.path.startswith(f"{GATE}/")]
    lines = ["# Committed runs",
             "",
             "Generated by `python -m benchmark.results_index` from each run folder's README heading and",
             "`results.json` (a gate's `summary.json`); do not edit by hand. Ratios are the last variant over",
             "the first at one point (config, batch size); where one variant ran, EAGLE-3 over no speculation.",
             "",
             "## Benchmark runs",
             "",
             *head, *bench,
             "",
             f"## GPU gate runs (`{GATE}/`)",
             "",
             *head, *gate]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmark.results_index", description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=RESULTS, help="the results folder (default: benchmark/results)")
    parser.add_argument("--check", action="store_true", help="exit 1 when INDEX.md is not up to date; write nothing")
    args = parser.parse_args(argv)
    index = args.root / INDEX
    text = render(args.root)
    if args.check:
        if not index.is_file() or index.read_text() != text:
            print(f"{index} is stale: run python -m benchmark.results_index", file=sys.stderr)
            return 1
        return 0
    index.write_text(text)
    print(f"wrote {index}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
