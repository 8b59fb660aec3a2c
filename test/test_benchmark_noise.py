"""Noise: a seeded fake worker whose numbers move between processes, as on the GPU.

Both variants run the same code here, so every stock-vs-fork move is noise. The old
harness (one process per variant, judged on the 5% threshold alone) flags some of it as
regressions; interleaved rounds judged against their spread do not, and a real 20%
regression on one config is still caught. Also: rounds run A B A B, warm-up blocks are
dropped, and the merge keeps every round's median.
"""

from __future__ import annotations

import inspect
import json
import random
import sys
import textwrap
from pathlib import Path

import pytest
from test_benchmark_orchestrate import make_world

from benchmark.driver import compare, run
from benchmark.driver.rounds import merge, merge_rounds
from benchmark.driver.schema import Record, ResultSet

# slow: seeded fake worker processes run round after round through the orchestrator, about 16 s on 2 cores (test/README.md).
pytestmark = pytest.mark.slow

PROCESS_NOISE = 0.05  # each process is up to 5% slower or faster than another, on every point
POINT_NOISE = 0.03  # and each point of it up to 3% more
MODES = (("decode", 1), ("verify", 2), ("verify", 4))
CONFIGS = ("tp1", "tp2-pcie")
BS = (1, 8, 64)


def step_ms(seed: int, variant: str, config: str, rnd: int, mode: str, bs: int, k: int) -> float:
    """A step's median in one process: a smooth cost times the process's and the point's luck."""
    process = random.Random(f"{seed}|{variant}|{config}|{rnd}").uniform(1 - PROCESS_NOISE, 1 + PROCESS_NOISE)
    point = random.Random(f"{seed}|{variant}|{config}|{rnd}|{mode}|{bs}|{k}").uniform(1 - POINT_NOISE, 1 + POINT_NOISE)
    return (1.0 + 0.02 * bs * k) * process * point


def simulate(seed: int, rounds: int, slower: float = 1.0) -> ResultSet:
    """The records the harness would merge; the fork is ``slower`` on tp2-pcie."""
    tagged = []
    for config in CONFIGS:
        for rnd in range(1, rounds + 1):
            for variant in ("stock", "fork"):
                effect = slower if (variant, config) == ("fork", "tp2-pcie") else 1.0
                tagged += [(rnd, Record(variant, config, "triton", mode, bs, k, int(mode == "verify"), "latency_ms",
                                        step_ms(seed, variant, config, rnd, mode, bs, k) * effect, graph=True))
                           for bs in BS for mode, k in MODES]
    return ResultSet(records=merge_rounds(tagged))


@pytest.fixture
def world(tmp_path: Path) -> dict:
    return make_world(tmp_path)


def regressions(results: ResultSet) -> list[compare.Move]:
    return compare.compare_variants(results, "stock", "fork").regressions


def test_rounds_judged_on_their_spread_rarely_cry_wolf():
    seeds = range(200)
    one_shot = sum(bool(regressions(simulate(s, 1))) for s in seeds) / len(seeds)
    three = sum(bool(regressions(simulate(s, 3))) for s in seeds) / len(seeds)
    assert one_shot > 0.5  # the old harness: most runs flag a regression in code that did not change
    assert three < 0.05


def test_rounds_still_catch_a_real_twenty_percent_regression():
    seeds = range(100)
    caught = [sum(m.key[1] == "tp2-pcie" for m in regressions(simulate(s, 3, slower=1.2))) for s in seeds]
    assert min(caught) > 0  # never missed outright
    assert sum(c == len(BS) * len(MODES) for c in caught) / len(seeds) > 0.9  # every figure of it, nearly always


def test_merge_keeps_each_round_median_and_spread():
    rounds = [(2, Record("fork", "tp1", "triton", "decode", 1, 1, 0, "latency_ms", 1.2, graph=True, n=10)),
              (1, Record("fork", "tp1", "triton", "decode", 1, 1, 0, "latency_ms", 1.0, graph=True, n=10)),
              (3, Record("fork", "tp1", "triton", "decode", 1, 1, 0, "latency_ms", 1.1, graph=False, n=10))]
    merged = merge(rounds)
    assert (merged.value, merged.rounds, merged.lo, merged.hi, merged.n) == (1.1, [1.0, 1.2, 1.1], 1.0, 1.2, 30)
    assert merged.graph is None and merged.extra["round_graphs"] == [True, True, False]


# The worker process gets the repository on PYTHONPATH from the orchestrator; step_ms comes as its source.
FAKE_NOISY_WORKER = textwrap.dedent('''
    import json, os, random, sys
    from benchmark.core.spec import point_blocks
    PROCESS_NOISE, POINT_NOISE = {process_noise!r}, {point_noise!r}
    {step_ms}
    args = sys.argv
    spec = json.load(open(args[args.index("--spec") + 1]))
    out = args[args.index("--out") + 1]
    noise = json.load(open(os.path.join(spec["models"], "noise.json")))
    with open(os.path.join(spec["models"], "order.log"), "a") as log:
        log.write(f"{{spec['config']}} {{spec['variant']}} r{{spec['round']}}\\n")
    effect = noise["slower"].get(spec["variant"] + " " + spec["config"], 1.0)
    m = spec["micro"]
    with open(out, "a") as f:
        for bs, warmup in point_blocks(m["bs"], m["warmup_block"]):
            for mode, k, topk in [("decode", 1, 0)] + [("verify", k, t) for t in m["topks"] for k in m["ks"]]:
                value = step_ms(noise["seed"], spec["variant"], spec["config"], spec["round"], mode, bs, k) * effect
                line = {{"type": "record", "mode": mode, "bs": bs, "k": k, "topk": topk, "metric": "latency_ms",
                        "value": value * (5 if warmup else 1), "graph": True, "ctx": m["ctx"], "n": m["iters"]}}
                f.write(json.dumps({{**line, **({{"warmup": True}} if warmup else {{}})}}) + "\\n")
''')


def _bench(world: dict, tmp_path: Path, *, seed: int, repeats: int, slower: dict | None = None,
           extra: tuple[str, ...] = ()) -> tuple[int, Path]:
    """One run of the harness on the noisy fake worker; (exit status, results folder)."""
    (world["models"] / "noise.json").write_text(json.dumps({"seed": seed, "slower": slower or {}}))
    (world["models"] / "order.log").unlink(missing_ok=True)
    fake = tmp_path / "fake_noisy_worker.py"
    fake.write_text(FAKE_NOISY_WORKER.format(process_noise=PROCESS_NOISE, point_noise=POINT_NOISE,
                                             step_ms=inspect.getsource(step_ms)))
    name = f"s{seed}-r{repeats}-{len(slower or {})}"
    code = run.main(["--kinds", "micro", "--configs", ",".join(CONFIGS), "--backends", "triton", "--bs", "1,8,64",
                     "--ks", "2,4", "--topks", "1", "--repeats", str(repeats), "--gpus", "2",
                     "--models", str(world["models"]), "--out", str(world["out"]), "--name", name,
                     "--variant", f"stock={world['sites']['stock']}", "--variant", f"fork={world['sites']['fork']}",
                     "--no-plot", "--bandwidth", "4.8e12", "--worker", f"{sys.executable} {fake}", *extra])
    (out_dir,) = world["out"].glob(f"*-{name}")
    return code, out_dir


def test_rounds_alternate_a_b_a_b_and_warmup_blocks_are_dropped(world, tmp_path, capsys):
    code, out_dir = _bench(world, tmp_path, seed=1, repeats=3)
    assert code == 0
    order = (world["models"] / "order.log").read_text().splitlines()
    for config in CONFIGS:
        assert [ln.split(" ", 1)[1] for ln in order if ln.startswith(config + " ")] == [
            "stock r1", "fork r1", "stock r2", "fork r2", "stock r3", "fork r3"]
    results = ResultSet.load(out_dir)
    assert len(results.records) == 2 * len(CONFIGS) * len(BS) * len(MODES)
    for r in results.records:  # every figure: three rounds in order, none of them a (5x slower) warm-up
        assert r.rounds == [step_ms(1, r.variant, r.config, n, r.mode, r.bs, r.k) for n in (1, 2, 3)]
        assert r.lo == min(r.rounds) and r.hi == max(r.rounds) and r.value == sorted(r.rounds)[1]
    assert {p["warmup_records"] for p in results.processes} == {len(MODES)}  # bs 1, every runner
    assert {p["job"] for p in results.processes} >= {"micro-stock-tp1-triton-r1", "micro-fork-tp2-pcie-triton-r3"}
    raw = (out_dir / "raw" / "micro-fork-tp1-triton-r2.jsonl").read_text()
    assert raw.count('"warmup": true') == len(MODES)  # kept in raw/, left out of results.json
    printed = capsys.readouterr().out
    assert "range" in printed and "compare stock -> fork: 18 figures" in printed


def test_the_one_shot_harness_flags_noise_that_rounds_call_noise(world, tmp_path, capsys):
    code, one_shot = _bench(world, tmp_path, seed=3, repeats=1)
    false_alarms = regressions(ResultSet.load(one_shot))
    assert code == 0 and false_alarms  # the old way: one process per variant, the threshold alone
    code, rounds = _bench(world, tmp_path, seed=3, repeats=3)
    comparison = compare.compare_variants(ResultSet.load(rounds), "stock", "fork")
    assert code == 0 and not comparison.regressions
    assert any(m.tag == "noise" for m in comparison.moves)  # the same moves, now shown as noise
    printed = capsys.readouterr().out
    assert " noise " in printed and "REGRESSION" not in printed.split("compare stock -> fork")[-1]


def test_the_guard_passes_noise_and_fails_a_real_regression(world, tmp_path, capsys):
    _code, baseline = _bench(world, tmp_path, seed=5, repeats=3)
    _code, one_shot_base = _bench(world, tmp_path, seed=5, repeats=1)
    guard = ("--compare", str(baseline / "results.json"))
    assert _bench(world, tmp_path, seed=6, repeats=3, extra=guard)[0] == 0  # another day, same code
    one_shot_guard = ("--compare", str(one_shot_base / "results.json"))
    assert _bench(world, tmp_path, seed=6, repeats=1, extra=one_shot_guard)[0] == 1  # the old guard: false alarm
    capsys.readouterr()
    code, _out = _bench(world, tmp_path, seed=7, repeats=3, slower={"fork tp2-pcie": 1.2}, extra=guard)
    assert code == 1
    report = capsys.readouterr().out.split("compare " + str(baseline / "results.json"))[-1]
    flagged = [ln for ln in report.splitlines() if ln.strip().startswith("REGRESSION")]
    assert len(flagged) == len(BS) * len(MODES) and all("fork tp2-pcie triton" in ln for ln in flagged)
