"""A failed CUDA graph capture costs speed, not service (patch 0010), on a real GPU.

``SGLANG_TEST_FAIL_CUDA_GRAPH_CAPTURE`` makes one runner's capture raise after its largest
batch size was captured (so a graph and pool memory are held when it fails). The engine must
start anyway, serve the tiny pair with EAGLE-3 and give the greedy output of no speculation;
the log must say once which runner failed, and ``/server_info`` must count the eager steps
under that role with the reason ``capture_failed``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engines import Case, output_ids, run_case

pytestmark = pytest.mark.gpu

# runner named by the switch -> (role, mode) its eager steps are counted under
ROLES = {"target": ("target", "target_verify"), "draft": ("draft", "draft"),
         "draft_extend": ("draft", "draft_extend")}


@pytest.mark.parametrize("runner", sorted(ROLES))
def test_failed_capture_runs_eager_with_same_output(runner: str, tiny_models: Path, engine_dir: Path) -> None:
    base = output_ids(run_case(Case(tiny_models, spec=False), engine_dir))
    case = Case(tiny_models, spec=True, env=(("SGLANG_TEST_FAIL_CUDA_GRAPH_CAPTURE", runner),))
    record = run_case(case, engine_dir)
    assert output_ids(record) == base, f"EAGLE-3 with the {runner} capture failed changed greedy output"
    counted = [row for state in record["internal_states"] for row in state.get("graph_fallbacks", [])]
    role, mode = ROLES[runner]
    assert any(r["role"] == role and r["mode"] == mode and r["reason"] == "capture_failed" and r["count"] > 0
               for r in counted), counted
    logs = list(engine_dir.glob("*.log"))
    failed_lines = [line for log in logs for line in log.read_text(errors="replace").splitlines()
                    if f"{runner} CUDA graph capture failed" in line]
    assert failed_lines, f"no log line says the {runner} capture failed"
