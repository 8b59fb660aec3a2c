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

    python -m benchmark.adaptive_sim --tree build/sglang [--tree OTHER] [--results 3000] [--seeds 3] [--json OUT]

The module is loaded from the tree's file with its two SGLang imports stood in (``envs``, for the default
policy, which the simulated config names anyway; ``log_info_on_rank0``, silenced), so it needs no GPU, no
SGLang install and no torch.
"""

from __future__ import annotations

import argparse
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
from typing import Any

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


def expected_tokens(accept: float, steps: int) -> float:
    return sum(accept**j for j in range(steps + 1))


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
        accepted = []
        for _ in range(s.bs):
            n = 0
            while n < steps and rng.random() < s.accept_at(result):
                n += 1
            accepted.append(n)
        tokens += 1 + sum(accepted) / s.bs
        params.on_verify_complete(accepted, 1)
    return tokens / (clock.now - start), switches


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
    args = ap.parse_args(argv)
    outcomes = run(args.tree, args.results, args.seeds, args.slot_config)
    print(table(outcomes, args.tree))
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
