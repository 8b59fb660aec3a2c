"""EAGLE cycle telemetry (patch 0012) on a real GPU: /server_info's spec_cycle after greedy requests.

The tiny pair is served with EAGLE-3 (3 steps, topk 1, K = 4), CUDA graphs on and
``max_running_requests`` 1, so every verify runs at bs 1, where a decode graph is captured:
every verify must be a graph replay. ``SGLANG_SPEC_CYCLE_STATS_INTERVAL=0`` makes TP rank 0 log
its line at every cycle, so the short run logs one too.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engines import Case, run_case

pytestmark = pytest.mark.gpu

ENV = (("SGLANG_SPEC_CYCLE_STATS", "1"), ("SGLANG_SPEC_CYCLE_STATS_INTERVAL", "0"))


def test_spec_cycle_in_server_info(tiny_models: Path, engine_dir: Path) -> None:
    case = Case(tiny_models, spec=True, extra=(("max_running_requests", 1),), env=ENV)
    record = run_case(case, engine_dir)
    states = [s["spec_cycle"] for s in record["internal_states"] if "spec_cycle" in s]
    assert states, f"no spec_cycle in /server_info: {[sorted(s) for s in record['internal_states']]}"
    stats = states[0]
    for phase in ("draft", "verify", "draft_extend"):
        assert stats[phase]["steps"] > 0, stats
    assert stats["verify"]["graph_hit"] == 1.0, stats
    assert stats["timed"] >= stats["cycles"] - 2 and stats["timed"] > 0, stats
    for phase in ("draft", "verify", "draft_extend", "cycle"):
        assert stats[phase]["ms_mean"] > 0, stats
    parts = sum(stats[p]["ms_sum"] for p in ("draft", "verify", "draft_extend"))
    assert stats["cycle"]["ms_sum"] == pytest.approx(parts, rel=1e-3), stats
    assert stats["draft_tokens"] == {"4": stats["cycles"]}, stats
    assert 0 < stats["accept_length"]["mean"] <= 4, stats
    lines = [line for log in engine_dir.glob("*.log") for line in log.read_text(errors="replace").splitlines()
             if "Spec cycle stats (" in line]
    assert lines, "TP rank 0 logged no 'Spec cycle stats' line"
