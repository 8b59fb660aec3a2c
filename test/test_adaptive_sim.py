"""benchmark/adaptive_sim.py: the throughput policy against a simulated server, on the patched 0.5.17 tree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sglang_trees import trees  # noqa: F401 (a fixture)

from benchmark.tools import adaptive_sim


def test_the_best_fixed_step_count_follows_the_cycle_cost() -> None:
    host_bound = adaptive_sim.Scenario(accept=0.35, bs=1, per_step_s=0.0, sigma=0.1)
    gpu_bound = adaptive_sim.Scenario(accept=0.35, bs=1, per_step_s=0.0003, sigma=0.1)
    assert adaptive_sim.best_fixed(host_bound)[0] == 7  # every extra draft is free: the longest chain
    assert adaptive_sim.best_fixed(gpu_bound)[0] == 1
    assert adaptive_sim.expected_tokens(0.5, 2) == pytest.approx(1.75)


def test_a_run_reports_every_scenario_as_a_fraction_of_the_best_fixed_chain(trees, tmp_path: Path, capsys) -> None:
    out = tmp_path / "sim.json"
    assert adaptive_sim.main(["--tree", str(trees.get("patched")), "--results", "300", "--seeds", "1",
                              "--json", str(out)]) == 0
    outcomes = json.loads(out.read_text())
    assert len(outcomes) == len(adaptive_sim.scenarios()) == 22
    # a policy cannot beat the best fixed chain by much (one seed's luck), and must not collapse
    assert all(0.5 < o["of_best"] < 1.15 for o in outcomes), outcomes
    assert capsys.readouterr().out.count("\n| 0.") == 22


def test_the_traffic_cost_model_is_the_measured_kimi16_cycles() -> None:
    for bs, row in adaptive_sim.KIMI16_CYCLE_MS.items():
        assert [round(adaptive_sim.traffic_cycle_s(s, bs) * 1e3, 6) for s in range(4)] == list(row)
    for bs in (1, 5, 8, 20, 32):
        cycles = [adaptive_sim.traffic_cycle_s(s, bs) for s in adaptive_sim.TRAFFIC_CANDIDATES]
        assert cycles == sorted(cycles), (bs, cycles)  # more drafts never cost less
    assert adaptive_sim.traffic_cycle_s(0, 1) < adaptive_sim.traffic_cycle_s(0, 4) < adaptive_sim.traffic_cycle_s(0, 8)
    # the oracle's choice moves with the batch size, or the traffic runs would test nothing
    assert len({adaptive_sim.best_for_bs(0.75, bs) for bs in range(1, 33)}) > 1
    sizes = adaptive_sim.Traffic(0.75, 4, 14, 3).walk(2000, seed=1)
    assert len(sizes) == 2000 and min(sizes) >= 4 and max(sizes) <= 14 and len(set(sizes)) > 5


def test_a_traffic_run_reports_each_slot_layout_against_the_oracle(trees, capsys) -> None:
    assert adaptive_sim.main(["--tree", str(trees.get("patched")), "--traffic", "--results", "400", "--seeds", "1"]) == 0
    table = capsys.readouterr().out
    rows = [ln for ln in table.splitlines() if ln.startswith("| `")]
    assert len(rows) == len(adaptive_sim.traffic_runs()) == 12
    for row in rows:
        fractions = [float(cell.split()[0]) for cell in row.split("|")[6:9]]
        assert all(0.5 < f < 1.05 for f in fractions), row  # the oracle is a per-verify best: hard to beat
