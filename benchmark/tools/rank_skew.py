"""How much of a collective's GPU time is the transfer and how much is waiting for the other rank.

Usage:
  python benchmark/rank_skew.py TRACE_DIR... [--json OUT.json]

A collective kernel starts on each rank when that rank's stream reaches it and ends
when every rank's data has arrived, so on the rank that arrives first its duration
includes the wait for the last one. In a profiled run of SGLang (one trace per TP
rank in the folder, ``*-TP-<r>.trace.json.gz``) the i-th collective kernel of a
category is the same collective on every rank: every rank issues the same sequence.
For each such collective the shortest duration over the ranks is an upper bound of
its transfer time (the last rank to arrive waits least); the rest of each rank's
duration is waiting. Summed per category (``trace_summary.kernel_category``: NCCL and
custom all-reduce, all-gather):

  count, total_us per rank, transfer_us (sum of the per-collective minimum), and
  wait_us per rank (total - transfer): the cost of the ranks drifting apart, which
  a faster link does not remove.

Exit status: 0 done, 2 a folder without two ranks' traces or with unequal sequences.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from benchmark.core.errors import BenchError
from benchmark.tools.trace_summary import kernel_category, load_trace, trace_files

COLLECTIVES = ("nccl_allreduce", "custom_allreduce", "nccl_allgather", "nccl_other")
_RANK = re.compile(r"TP-(\d+)")


def collective_durations(events: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Per collective category, the durations (µs) of its kernels in start order."""
    found: dict[str, list[tuple[float, float]]] = {c: [] for c in COLLECTIVES}
    for e in events:
        if e.get("ph") != "X" or e.get("cat") != "kernel":
            continue
        category = kernel_category(str(e.get("name", "")), "kernel")
        if category in found:
            found[category].append((float(e["ts"]), float(e.get("dur", 0.0))))
    return {c: [d for _, d in sorted(v)] for c, v in found.items()}


def skew(per_rank: dict[int, dict[str, list[float]]]) -> dict[str, dict[str, Any]]:
    """Transfer vs wait per collective category over the ranks' aligned sequences."""
    if len(per_rank) < 2:
        raise BenchError(f"need the traces of at least two ranks, got {sorted(per_rank)}")
    ranks = sorted(per_rank)
    out: dict[str, dict[str, Any]] = {}
    for category in COLLECTIVES:
        seqs = [per_rank[r][category] for r in ranks]
        counts = {len(s) for s in seqs}
        if counts == {0}:
            continue
        if len(counts) != 1:
            raise BenchError(f"{category}: ranks saw {[len(s) for s in seqs]} kernels; the sequences do not align")
        transfer = sum(min(ds) for ds in zip(*seqs))
        totals = {str(r): round(sum(s), 1) for r, s in zip(ranks, seqs)}
        out[category] = {"count": len(seqs[0]), "total_us": totals, "transfer_us": round(transfer, 1),
                         "wait_us": {r: round(t - transfer, 1) for r, t in totals.items()},
                         "transfer_us_per_call": round(transfer / len(seqs[0]), 2)}
    return out


def durations_of_folder(folder: Path) -> dict[int, dict[str, list[float]]]:
    """Per TP rank (from the file name), ``collective_durations`` of its trace."""
    per_rank: dict[int, dict[str, list[float]]] = {}
    for path in trace_files(folder):
        match = _RANK.search(path.name)
        if match:
            per_rank[int(match.group(1))] = collective_durations(load_trace(path))
    return per_rank


def table(label: str, result: dict[str, dict[str, Any]]) -> str:
    lines = [f"== {label}", f"  {'collective':<17}{'count':>7}{'transfer ms':>13}{'per call us':>13}  wait ms by rank"]
    for category, row in result.items():
        waits = ", ".join(f"TP{r} {w / 1e3:.3f}" for r, w in row["wait_us"].items())
        lines.append(f"  {category:<17}{row['count']:>7}{row['transfer_us'] / 1e3:>13.3f}"
                     f"{row['transfer_us_per_call']:>13.1f}  {waits}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="benchmark/rank_skew.py", description=__doc__.splitlines()[0])
    p.add_argument("folders", nargs="+", type=Path, help="profile output folders, one trace per TP rank")
    p.add_argument("--json", type=Path, help="write every folder's result here")
    p.add_argument("--durations", type=Path,
                   help="also write each folder's per-rank collective kernel durations (the raw input, µs)")
    args = p.parse_args(argv)
    try:
        durations = {str(f): durations_of_folder(f) for f in args.folders}
        results = {f: skew(per_rank) for f, per_rank in durations.items()}
    except (BenchError, OSError, ValueError) as exc:
        print(f"rank_skew.py: error: {exc}", file=sys.stderr)
        return 2
    if args.durations:
        args.durations.write_text(json.dumps(durations) + "\n")
    for folder, result in results.items():
        print(table(folder, result))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
