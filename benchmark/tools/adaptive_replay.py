"""The throughput policy replayed against a device run's own per-result cycle times, on CPU.

``adaptive_sim`` draws each cycle's noise from a lognormal; a GPU host does not: session 41's dense8-miss65 run
(``benchmark/results/20261205-1600-h100-tp1-dense8-miss65-koff-off-samples/slot-samples.txt``, patch 0051's debug
lines) shows bursts of slow results, 1.3-7x a candidate's steady cycle and decaying over a few to 50 results, on
14% (bs 1) to 41% (bs 64) of them, whatever step count ran. This tool keeps that record's disturbance and replays it
under any policy tree: from one slot's samples it takes each step count's steady cycle (the lower quartile of its
samples past the settling ones) and the sequence of each sample's ratio to its step count's steady cycle, in the
order recorded. A replayed result at step count s then costs ``steady[s] * ratio[i]``: the same disturbance at the
same place in the run, whichever chain the policy picked; the first ``SETTLE`` results after a switch into s cost
``steady[s]`` times the median ratio of the record's settling samples at s (what a switch costs there, the draft
extend after steps 0 included), or 1 where the record has none. Each of ``bs`` requests accepts a chain of drafts with
a measured rate per draft position.

It prints each tree's tokens per second as a fraction of the best fixed step count's under the same disturbance, the
share of results at each step count and the switches. Like ``adaptive_sim`` it isolates the policy: the cost of a
switch is the record's, whatever the step count switched from.

    python -m benchmark.tools.adaptive_replay --tree build/sglang [--tree OTHER] --samples FILE [--slot "bs 1"]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmark.tools.adaptive_sim import FakeClock, accepted_drafts, expected_tokens, load_policy

LINE = re.compile(r"slot \((?P<slot>.*?)\): steps (?P<steps>\d+), result (?P<place>\d+) since the switch, "
                  r"(?P<ms>[\d.]+) ms after the last")
# The dense8-miss65 pair's acceptance by draft position (given the draft before was accepted), as its bs-1 slot
# measured it in session 41: steps 1 / 2 / 3 at 1.31-1.36 / 1.44-1.50 / 1.43-1.50 tokens a cycle.
MISS65_RATES = (0.33, 0.45, 0.1, 0.1, 0.1, 0.1, 0.1)
SETTLE = 2  # the policy's settle_batches: samples at or before this place time the switch, not the chain


@dataclass(frozen=True)
class Record:
    """One slot's replayable disturbance: each step count's steady cycle (s), each result's ratio to it, and the
    median ratio of a step count's settling results (the cost of switching to it)."""
    steady_s: dict[int, float]
    ratios: list[float]
    switch_ratio: dict[int, float] = field(default_factory=dict)


def read_record(path: Path, slot: str) -> Record:
    """``slot``'s samples of a 0051 debug log (or a file of its lines)."""
    lines = [m for m in map(LINE.search, path.read_text().splitlines()) if m and m["slot"] == slot]
    samples = [(int(m["steps"]), float(m["ms"]) / 1e3) for m in lines if int(m["place"]) > SETTLE]
    if not samples:
        raise SystemExit(f"{path}: no samples of slot {slot!r} past place {SETTLE}")
    steady = {}
    for steps in {s for s, _ in samples}:
        times = sorted(t for s, t in samples if s == steps)
        steady[steps] = times[(len(times) - 1) // 4]
    settling: dict[int, list[float]] = {}
    for m in lines:
        steps = int(m["steps"])
        if int(m["place"]) <= SETTLE and steps in steady:
            settling.setdefault(steps, []).append(float(m["ms"]) / 1e3 / steady[steps])
    switch_ratio = {s: sorted(v)[(len(v) - 1) // 2] for s, v in settling.items()}
    return Record(steady, [t / steady[s] for s, t in samples], switch_ratio)


def best_fixed_steps(record: Record, rates: tuple[float, ...]) -> tuple[int, float]:
    """The step count with the most expected tokens per steady second, and those tokens per second (one request)."""
    return max(((s, expected_tokens(rates, s) / t) for s, t in record.steady_s.items()), key=lambda kv: kv[1])


@dataclass
class Replay:
    of_best: float
    share: dict[int, float]
    switches: int


def replay(asp: Any, record: Record, rates: tuple[float, ...], bs: int, results: int, seed: int) -> Replay:
    """One run of ``results`` verifies of a slot on ``record``'s steady cycles and disturbance."""
    candidates = sorted(record.steady_s)
    with tempfile.TemporaryDirectory() as tmp:
        cfg_path = Path(tmp) / "adaptive.json"
        cfg_path.write_text(json.dumps({"policy": "throughput",
                                        str(bs): {"candidate_steps": candidates}}))
        clock = FakeClock()
        params = asp.AdaptiveSpeculativeParams(initial_steps=candidates[-1], cfg_path=str(cfg_path), clock=clock)
    rng = random.Random(seed)
    tokens = seconds = ratio_sum = 0.0
    ran: Counter = Counter()
    last, switches, since_switch = None, 0, SETTLE + 1
    for i in range(results):
        steps = params.get_steps_for_batch(bs)
        ran[steps] += 1
        if last is not None and steps != last:
            switches += 1
            since_switch = 0
        since_switch += 1
        last = steps
        ratio = record.ratios[i % len(record.ratios)]
        ratio_sum += ratio
        if since_switch <= SETTLE:
            ratio = record.switch_ratio.get(steps, 1.0)
        dt = record.steady_s[steps] * ratio
        clock.now += dt
        seconds += dt
        accepted = accepted_drafts(rng, bs, steps, rates)
        tokens += bs + sum(accepted)
        params.on_verify_complete(accepted, bs)
    best = bs * best_fixed_steps(record, rates)[1] / ratio_sum * results
    return Replay((tokens / seconds) / best, {s: ran[s] / results for s in sorted(ran)}, switches)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", type=Path, action="append", required=True,
                    help="an SGLang checkout whose adaptive_spec_params to run (repeat to compare)")
    ap.add_argument("--samples", type=Path, required=True, help="a log with patch 0051's per-result debug lines")
    ap.add_argument("--slot", default="bs 1", help='the slot to replay, as its lines name it (default "bs 1")')
    ap.add_argument("--rates", default=",".join(map(str, MISS65_RATES)),
                    help="acceptance by draft position, comma-separated (default: the dense8-miss65 pair's)")
    ap.add_argument("--results", type=int, default=3000, help="verifies a run (default 3000)")
    ap.add_argument("--seeds", type=int, default=5, help="runs a tree, averaged (default 5)")
    args = ap.parse_args(argv)
    record = read_record(args.samples, args.slot)
    rates = tuple(float(r) for r in args.rates.split(","))
    bs = int(args.slot.split()[-1])
    best = best_fixed_steps(record, rates)[0]
    print(f"slot {args.slot}: steady cycle (ms) " + ", ".join(
        f"steps {s} {t * 1e3:.2f} x {expected_tokens(rates, s):.2f} tok" for s, t in sorted(record.steady_s.items()))
        + f"; best fixed: steps {best}; {len(record.ratios)} recorded results, "
        f"{sum(r > 1.3 for r in record.ratios) / len(record.ratios):.0%} over 1.3x steady")
    print("| tree | of best fixed | results at each step count | switches per 1000 |")
    print("|---|---|---|---|")
    for tree in args.tree:
        asp = load_policy(tree)
        runs = [replay(asp, record, rates, bs, args.results, seed) for seed in range(args.seeds)]
        share: Counter = Counter()
        for r in runs:
            share.update({s: v / len(runs) for s, v in r.share.items()})
        print(f"| `{tree}` | {sum(r.of_best for r in runs) / len(runs):.3f} | "
              + ", ".join(f"{s}: {v:.0%}" for s, v in sorted(share.items()))
              + f" | {sum(r.switches for r in runs) / len(runs) * 1000 / args.results:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
