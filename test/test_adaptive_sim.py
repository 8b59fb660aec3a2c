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
