"""The rate of each of a server's decode log intervals, per decode phase: was a run steady, or did it swing?

SGLang logs a ``Decode batch`` line every 40 decode steps with the interval's ``gen throughput (token/s)``. A run
whose mean rate looks low can be uniformly slow or swing between its normal rate and a much lower one; only the
intervals tell. Session 42 met the second kind: a held off-path run at 0.77x plain decode whose intervals went
323-521 tok/s while the same process's plain decode held 521-529, and a steady one of the same config at 0.98x.

A phase is a run of consecutive ``Decode batch`` lines of one engine (a ``server_args=`` line starts the next
engine) with the same ``#running-req`` and a growing ``#token`` (it falls when the next batch starts); its first
interval (which holds the batch's prefill and first steps) is dropped. Per phase: the engine's index, the running
requests, whether it logged ``speculation off``, the interval count, the rates' median (and over the median of the
log's first engine at the same running requests: in a benchmark log, plain decode), and their lowest and highest
tenth. ``swings`` marks a phase whose lowest tenth is below ``--swing`` (default 0.85) of its highest tenth::

    python -m benchmark.tools.interval_rates LOG [LOG ...] [--min-intervals 4] [--swing 0.85] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

_DECODE = re.compile(r"Decode batch, #running-req: (\d+), #token: (\d+),.*?gen throughput \(token/s\): ([\d.]+)")


@dataclass(frozen=True)
class Phase:
    engine: int  # 0 for the log's first engine, then one more at each server_args= line
    running: int  # #running-req
    off: bool  # every interval logged "speculation off"
    rates: tuple[float, ...]  # tok/s of each interval, the first one dropped

    @property
    def median(self) -> float:
        return statistics.median(self.rates)

    def tenth(self, high: bool) -> float:
        ordered = sorted(self.rates)
        k = max(0, len(ordered) // 10)
        return ordered[-1 - k] if high else ordered[k]

    def swings(self, threshold: float) -> bool:
        return self.tenth(high=False) < threshold * self.tenth(high=True)


def phases(lines: list[str]) -> list[Phase]:
    """The decode phases of a log's lines, in order."""
    out: list[Phase] = []
    engine, key, rates, offs, tokens = -1, None, [], [], -1

    def close() -> None:
        if key is not None and len(rates) > 1:
            out.append(Phase(engine=key[0], running=key[1], off=all(offs[1:]), rates=tuple(rates[1:])))

    for line in lines:
        if "server_args=" in line:
            close()
            engine, key, rates, offs = engine + 1, None, [], []
            continue
        m = _DECODE.search(line)
        if not m:
            continue
        this = (max(engine, 0), int(m[1]))
        if this != key or int(m[2]) < tokens:  # fewer tokens in the pool: the next run's batch
            close()
            key, rates, offs = this, [], []
        tokens = int(m[2])
        rates.append(float(m[3]))
        offs.append("speculation off" in line)
    close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmark.tools.interval_rates",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("logs", nargs="+", type=Path, help="server or benchmark logs (logs/e2e-*.log)")
    p.add_argument("--min-intervals", type=int, default=4, help="skip phases with fewer intervals (default 4)")
    p.add_argument("--swing", type=float, default=0.85,
                   help="a phase swings when its lowest tenth is below this fraction of its highest (default 0.85)")
    p.add_argument("--json", type=Path, help="also write every phase here")
    args = p.parse_args(argv)
    rows = []
    for log in args.logs:
        if not log.is_file():
            print(f"interval_rates: {log}: no such file", file=sys.stderr)
            return 2
        found = [ph for ph in phases(log.read_text(errors="replace").splitlines())
                 if len(ph.rates) >= args.min_intervals]
        for ph in found:
            first = [f.median for f in found if f.engine == 0 and f.running == ph.running]
            rows.append({"log": str(log), **asdict(ph), "median": ph.median, "low_tenth": ph.tenth(False),
                         "high_tenth": ph.tenth(True), "swings": ph.swings(args.swing),
                         "of_engine0": ph.median / statistics.median(first) if first else None})
    print("| log | engine | running | off | intervals | median tok/s | of engine 0 | lowest tenth | highest tenth "
          "| swings |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        of0 = "-" if r["of_engine0"] is None else f"{r['of_engine0']:.3f}"
        print(f"| {Path(r['log']).name} | {r['engine']} | {r['running']} | {'yes' if r['off'] else 'no'} | "
              f"{len(r['rates'])} | {r['median']:.1f} | {of0} | {r['low_tenth']:.1f} | {r['high_tenth']:.1f} | "
              f"{'**yes**' if r['swings'] else 'no'} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
