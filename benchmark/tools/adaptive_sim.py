"""Adaptive speculation's throughput policy against a simulated server, on CPU.

Runs ``ThroughputStepSlot`` (``--speculative-adaptive`` with ``"policy": "throughput"``) of one or more SGLang
trees (``--tree``: a patched checkout such as ``build/sglang``) on a fake clock: each verify's cycle costs
``base + per_step * steps`` times lognormal noise (sigma), and each of bs requests accepts drafts in a chain,
each with probability p given the one before (in the last six scenarios p alternates between 0.75 and 0.35
every 50, 150 or 500 verifies, and the reference runs each phase's best fixed step count). It prints, per
scenario, the slot's throughput as a fraction of the best fixed step count's expected throughput, and its
switches. No GPU, no model: it isolates the policy's
estimators and decisions from everything a device run mixes in (prefills, phases, the cost of a switch), so it
says how much the policy itself loses, not what a server does.

``--traffic`` asks the same of a server whose batch size moves under the policy: the batch size walks over a range
(steps of 1-2 requests, held for an exponential number of verifies), each cycle costs what kimi16's candidates
measured at that batch size on one H200 (``KIMI16_CYCLE_MS``), and the reference is an oracle that runs, at every
verify, the best step count for the batch size at hand, and never pays for a switch. It compares three slot layouts
of the config: bs 1 / 8 / 32 (as the shipped ``ks-off`` config), every bs to 8 then 12 / 16 / 24 / 32, and one slot
per CUDA-graph batch size. A switch of step count costs ``--switch-cycles`` cycles (default 1: on a GPU a switch
costs the settle results, the first cycle at the new step count, and from steps 0 a full draft extend).

    python -m benchmark.adaptive_sim --tree build/sglang [--tree OTHER] [--results 3000] [--seeds 3] [--json OUT]
    python -m benchmark.adaptive_sim --tree build/sglang --traffic [--results 6000]

The module is loaded from the tree's file with its two SGLang imports stood in (``envs``, for the default
policy, which the simulated config names anyway; ``log_info_on_rank0``, silenced), so it needs no GPU, no
SGLang install and no torch.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import math
import os
import random
import sys
import tempfile
import types
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Sequence

MODULE_FILE = Path("python/sglang/srt/speculative/adaptive_spec_params.py")
CANDIDATES = [1, 2, 3, 5, 7]  # benchmark/configs/adaptive-ks.json: K 2/3/4/6/8
BASE_S = 0.00285  # dense-8's K 4 cycle at bs 1 on one H200 (session 21), host-bound


@dataclass(frozen=True)
class Scenario:
    accept: float  # chance that a draft is accepted given the one before it was
    bs: int
    per_step_s: float  # GPU time a draft step adds to a cycle (0: host-bound)
    sigma: float  # lognormal noise of a cycle's time
    period: int = 0  # > 0: the acceptance alternates with accept_b every period verifies
    accept_b: float = 0.35

    def accept_at(self, result: int) -> float:
        return self.accept if not self.period or (result // self.period) % 2 == 0 else self.accept_b

    def label(self) -> str:
        return f"{self.accept}" if not self.period else f"{self.accept}/{self.accept_b} every {self.period}"


@dataclass
class Outcome:
    tree: str
    scenario: Scenario
    best_steps: str  # the best fixed step count (per phase where the acceptance changes)
    of_best: float  # the slot's tokens per second / the best fixed step count's (per phase)
    switches: float  # per run, mean over seeds


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def cycle_s(s: Scenario, steps: int) -> float:
    return BASE_S + s.per_step_s * steps


# The chance that a draft is accepted given the one before it was: one rate for every position, or a rate per
# position (none accepted past the last one; adaptive_replay's measured pairs).
Acceptance = float | Sequence[float]


def position_rates(accept: Acceptance, steps: int) -> list[float]:
    """The acceptance rate of each of a chain's ``steps`` draft positions that can be accepted."""
    return [accept] * steps if isinstance(accept, (int, float)) else list(accept[:steps])


def expected_tokens(accept: Acceptance, steps: int) -> float:
    tokens = reach = 1.0
    for rate in position_rates(accept, steps):
        reach *= rate
        tokens += reach
    return tokens


def best_fixed(s: Scenario) -> tuple[int, float]:
    """The step count with the most expected tokens per second, and that rate."""
    return max(((k, expected_tokens(s.accept, k) / cycle_s(s, k)) for k in CANDIDATES), key=lambda kv: kv[1])


def best_per_phase(s: Scenario, results: int) -> tuple[str, float]:
    """The best fixed step count of each acceptance phase, and the tokens per second of running each phase's
    best over ``results`` verifies."""
    accepts = [s.accept] if not s.period else [s.accept, s.accept_b]
    best = {a: best_fixed(replace(s, accept=a, period=0))[0] for a in accepts}
    tokens = seconds = 0.0
    for i in range(results):
        accept = s.accept_at(i)
        tokens += expected_tokens(accept, best[accept])
        seconds += cycle_s(s, best[accept])
    return "/".join(str(best[a]) for a in accepts), tokens / seconds


def accepted_drafts(rng: random.Random, bs: int, steps: int, accept: Acceptance) -> list[int]:
    """Each of ``bs`` requests' accepted drafts out of a chain of ``steps``, each draft accepted with its position's
    rate given the one before it was."""
    rates = position_rates(accept, steps)
    accepted = []
    for _ in range(bs):
        n = 0
        while n < len(rates) and rng.random() < rates[n]:
            n += 1
        accepted.append(n)
    return accepted


def serve(asp: Any, cfg_path: str, s: Scenario, results: int, seed: int) -> tuple[float, int]:
    """Tokens per second and switches of one slot over ``results`` verifies."""
    clock = FakeClock()
    params = asp.AdaptiveSpeculativeParams(initial_steps=3, cfg_path=cfg_path, clock=clock)
    rng = random.Random(seed)
    tokens, switches, last = 0.0, 0, None
    start = clock.now
    for result in range(results):
        steps = params.get_steps_for_batch(1)
        switches += last is not None and steps != last
        last = steps
        clock.now += cycle_s(s, steps) * math.exp(rng.gauss(0.0, s.sigma))
        accepted = accepted_drafts(rng, s.bs, steps, s.accept_at(result))
        tokens += 1 + sum(accepted) / s.bs
        params.on_verify_complete(accepted, 1)
    return tokens / (clock.now - start), switches


# kimi16 (`models kimi --layers 16 --routed-experts 96`), one H200, TP 1: each candidate's cycle in ms at steps
# 0 / 1 / 2 / 3, as its throughput slot measured it in session 32's accept-3 run
# (benchmark/results/20261204-1901-h200-tp1-kimi16-acc3-koff-margin, raw.tar.gz: calllogs/switches.txt).
KIMI16_CYCLE_MS = {1: (3.55, 4.08, 6.38, 6.89), 8: (7.03, 7.98, 11.16, 12.10), 32: (10.74, 14.38, 16.86, 19.34)}
TRAFFIC_CANDIDATES = [0, 1, 2, 3, 5, 7]
# SGLang 0.5.17's CUDA-graph batch sizes under speculation, to 32 (ServerArgs._generate_decode_cuda_graph_batch_sizes).
TRAFFIC_GRAPH_BS = list(range(1, 9)) + list(range(10, 33, 2))


def traffic_cycle_s(steps: int, bs: int) -> float:
    """kimi16's cycle at ``steps`` and ``bs`` (1-32): the measured figures, log-interpolated between batch sizes;
    steps 5 and 7 add the measured step 2 -> 3 increment per step."""
    def at(row: tuple[float, ...]) -> float:
        return row[steps] if steps <= 3 else row[3] + (steps - 3) * (row[3] - row[2])

    points = sorted(KIMI16_CYCLE_MS)
    lo = max(b for b in points if b <= bs)
    hi = min((b for b in points if b >= bs), default=lo)
    if lo == hi:
        return at(KIMI16_CYCLE_MS[lo]) / 1e3
    w = math.log(bs / lo) / math.log(hi / lo)
    return ((1 - w) * at(KIMI16_CYCLE_MS[lo]) + w * at(KIMI16_CYCLE_MS[hi])) / 1e3


def graph_bs(bs: int) -> int:
    return min(b for b in TRAFFIC_GRAPH_BS if b >= bs)


@functools.cache
def best_for_bs(accept: float, bs: int) -> int:
    return max(
        TRAFFIC_CANDIDATES, key=lambda k: expected_tokens(accept, k) / traffic_cycle_s(k, graph_bs(bs))
    )


@dataclass(frozen=True)
class Traffic:
    accept: float
    lo: int
    hi: int
    hold: float  # mean verifies between two batch-size moves

    def walk(self, results: int, seed: int) -> list[int]:
        rng = random.Random(seed)
        bs, sizes = rng.randint(self.lo, self.hi), []
        while len(sizes) < results:
            sizes += [bs] * max(1, round(rng.expovariate(1 / self.hold)))
            bs = min(self.hi, max(self.lo, bs + rng.choice((-2, -1, 1, 2))))
        return sizes[:results]


def serve_traffic(
    asp: Any, cfg_path: str, t: Traffic, sizes: list[int], seed: int, switch_cycles: float
) -> tuple[float, int]:
    """The policy's tokens per second over ``sizes`` (one batch size a verify) as a fraction of the oracle's, and
    its switches; a switch adds ``switch_cycles`` of the new step count's cycle (the oracle's are free)."""
    clock = FakeClock()
    params = asp.AdaptiveSpeculativeParams(initial_steps=3, cfg_path=cfg_path, clock=clock)
    params.set_cuda_graph_bs(TRAFFIC_GRAPH_BS)
    rng = random.Random(seed)
    tokens = seconds = oracle_tokens = oracle_seconds = 0.0
    last, switches = None, 0
    for bs in sizes:
        steps = params.get_steps_for_batch(bs)
        cycle = traffic_cycle_s(steps, graph_bs(bs))
        dt = cycle * math.exp(rng.gauss(0.0, 0.1))
        if last is not None and steps != last:
            dt += switch_cycles * cycle
            switches += 1
        last = steps
        clock.now += dt
        seconds += dt
        accepted = accepted_drafts(rng, bs, steps, t.accept)
        tokens += bs + sum(accepted)
        params.on_verify_complete(accepted, bs)
        best = best_for_bs(t.accept, bs)
        oracle_tokens += bs * expected_tokens(t.accept, best)
        oracle_seconds += traffic_cycle_s(best, graph_bs(bs))
    return (tokens / seconds) / (oracle_tokens / oracle_seconds), switches


def traffic_runs() -> list[Traffic]:
    return [Traffic(a, lo, hi, hold) for a in (0.35, 0.75) for lo, hi in ((1, 7), (4, 14), (1, 32)) for hold in (3, 30)]


# Slot layouts of the config (its batch-size keys), each with the same candidates.
TRAFFIC_LAYOUTS = {
    "1/8/32": [1, 8, 32],
    "1-8, 12/16/24/32": [*range(1, 9), 12, 16, 24, 32],
    "every graph bs": TRAFFIC_GRAPH_BS,
}


def run_traffic(trees: list[Path], results: int, seeds: int, switch_cycles: float) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for tree in trees:
            asp = load_policy(tree)
            for t in traffic_runs():
                row: dict[str, Any] = {"tree": str(tree), **asdict(t), "switch_cycles": switch_cycles}
                for name, slots in TRAFFIC_LAYOUTS.items():
                    cfg_path = str(Path(tmp) / f"{len(slots)}.json")
                    entries = {str(b): {"candidate_steps": TRAFFIC_CANDIDATES} for b in slots}
                    Path(cfg_path).write_text(json.dumps({"policy": "throughput", **entries}))
                    runs = [
                        serve_traffic(asp, cfg_path, t, t.walk(results, 100 + seed), seed, switch_cycles)
                        for seed in range(seeds)
                    ]
                    row[name] = sum(r[0] for r in runs) / seeds
                    row[f"{name} switches per 1000"] = sum(r[1] for r in runs) / seeds * 1000 / results
                row["oracle steps"] = "/".join(str(best_for_bs(t.accept, b)) for b in (t.lo, (t.lo + t.hi) // 2, t.hi))
                rows.append(row)
    return rows


def traffic_table(rows: list[dict[str, Any]]) -> str:
    names = list(TRAFFIC_LAYOUTS)
    out = [
        "| tree | accept | bs range | mean hold (verifies) | oracle's steps (low / mid / high bs) | "
        + " | ".join(f"slots {n}: of oracle (switches per 1000)" for n in names)
        + " |",
        "|---|---|---|---|---|" + "---|" * len(names),
    ]
    for r in rows:
        cells = " | ".join(f"{r[n]:.3f} ({r[f'{n} switches per 1000']:.0f})" for n in names)
        out.append(f"| `{r['tree']}` | {r['accept']} | {r['lo']}-{r['hi']} | {r['hold']:g} | {r['oracle steps']} | {cells} |")
    return "\n".join(out)


def scenarios() -> list[Scenario]:
    steady = [Scenario(*v) for v in itertools.product((0.35, 0.75), (1, 64), (0.0, 0.0003), (0.1, 0.3))]
    changing = [Scenario(0.75, bs, 0.0003, 0.1, period) for period in (50, 150, 500) for bs in (1, 64)]
    return steady + changing


class _EnvPolicy:
    def get(self) -> str:
        return os.environ.get("SGLANG_SPEC_ADAPTIVE_POLICY", "accept_len")


def load_policy(tree: Path) -> types.ModuleType:
    """The tree's adaptive_spec_params, its ``sglang.srt`` imports stood in while it loads."""
    stand_ins = {
        "sglang.srt.environ": types.SimpleNamespace(
            envs=types.SimpleNamespace(SGLANG_SPEC_ADAPTIVE_POLICY=_EnvPolicy())
        ),
        "sglang.srt.utils": types.SimpleNamespace(log_info_on_rank0=lambda logger, msg: None),
    }
    saved = {name: sys.modules.get(name) for name in stand_ins}
    module = types.ModuleType(f"adaptive_spec_params_of_{tree.name}")
    try:
        sys.modules.update(stand_ins)
        path = tree / MODULE_FILE
        exec(compile(path.read_text(), str(path), "exec"), module.__dict__)
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
    return module


def run(trees: list[Path], results: int, seeds: int, knobs: dict[str, Any] | None = None) -> list[Outcome]:
    outcomes = []
    with tempfile.TemporaryDirectory() as tmp:
        cfg_path = str(Path(tmp) / "adaptive.json")
        Path(cfg_path).write_text(
            json.dumps({"policy": "throughput", "1": {"candidate_steps": CANDIDATES, **(knobs or {})}})
        )
        for tree in trees:
            asp = load_policy(tree)
            for s in scenarios():
                steps, rate = best_per_phase(s, results)
                runs = [serve(asp, cfg_path, s, results, seed) for seed in range(seeds)]
                outcomes.append(
                    Outcome(
                        str(tree), s, steps, sum(r[0] for r in runs) / seeds / rate, sum(r[1] for r in runs) / seeds
                    )
                )
    return outcomes


def table(outcomes: list[Outcome], trees: list[Path]) -> str:
    head = (
        "| accept | bs | ms per draft step | cycle noise | best fixed steps | "
        + " | ".join(f"`{t}`: of best, switches" for t in trees)
        + " |"
    )
    rows = [head, "|" + "---|" * (5 + len(trees))]
    for s in scenarios():
        mine = [o for o in outcomes if o.scenario == s]
        cells = " | ".join(f"{o.of_best:.3f}, {o.switches:.0f}" for o in mine)
        rows.append(f"| {s.label()} | {s.bs} | {s.per_step_s * 1e3:.1f} | {s.sigma} | {mine[0].best_steps} | {cells} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--tree",
        type=Path,
        action="append",
        required=True,
        help="an SGLang checkout whose adaptive_spec_params to run (repeat to compare)",
    )
    ap.add_argument("--results", type=int, default=3000, help="verify results per run (default 3000)")
    ap.add_argument("--seeds", type=int, default=3, help="runs per scenario, averaged (default 3)")
    ap.add_argument("--json", type=Path, help="also write every outcome here")
    ap.add_argument(
        "--slot-config",
        type=json.loads,
        default={},
        metavar="JSON",
        help="knobs added to the slot's adaptive config, e.g. '{\"sample_window\": 64}'",
    )
    ap.add_argument(
        "--traffic",
        action="store_true",
        help="the batch size moves under the policy (kimi16's measured cycles); compared with a per-bs oracle",
    )
    ap.add_argument(
        "--switch-cycles",
        type=float,
        default=1.0,
        help="with --traffic: what a step-count switch costs, in cycles of the new step count (default 1)",
    )
    args = ap.parse_args(argv)
    if args.traffic:
        rows = run_traffic(args.tree, args.results, args.seeds, args.switch_cycles)
        print(traffic_table(rows))
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
        return 0
    outcomes = run(args.tree, args.results, args.seeds, args.slot_config)
    print(table(outcomes, args.tree))
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
