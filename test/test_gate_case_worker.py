"""The GPU gate's engine cases run through the benchmark worker (job kind ``case``), on CPU with a
stand-in ``sglang`` whose Engine echoes its prompts (test/gpu/engines.py, benchmark/worker/engine_case.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engines import Case, case_spec, output_ids, run_case

from benchmark.core.spec import JobSpec

STAND_IN = '''
import os
__version__ = "0.0-stand-in"

class Engine:
    def __init__(self, **kwargs):
        if os.environ.get("STAND_IN_FAIL"):
            raise RuntimeError("stand-in engine refused to start")
        self.kwargs = kwargs

    def generate(self, prompts, sampling):
        n = sampling["max_new_tokens"]
        spec = self.kwargs.get("speculative_algorithm")
        return [{"text": p[::-1], "output_ids": [len(p) + i for i in range(n)],
                 "meta_info": {"completion_tokens": n, "spec_accept_length": 4.0 if spec else None,
                               "e2e_latency": 1.0}} for p in prompts]

    def get_server_info(self):
        return {"internal_states": [{"graph_fallbacks": [], "kwargs_seen": sorted(self.kwargs)}]}

    def shutdown(self):
        pass
'''


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = tmp_path / "site"
    (site / "sglang").mkdir(parents=True)
    (site / "sglang" / "__init__.py").write_text(STAND_IN)
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("SGLANG_FASTPATH_SITE_FORK", str(site))
    models = tmp_path / "models"
    for part in ("target", "draft"):
        (models / part).mkdir(parents=True)
    return models


def test_a_case_runs_in_the_worker_and_keeps_what_the_gate_reads(stand_in: Path, tmp_path: Path) -> None:
    case = Case(stand_in, spec=True, prompts=("ab", "abcd"), sampling=(("max_new_tokens", 3), ("temperature", 0.0)))
    record = run_case(case, tmp_path / "engines")
    assert record["ok"] and output_ids(record) == [[2, 3, 4], [4, 5, 6]]
    assert record["outputs"][0]["meta_info"] == {"completion_tokens": 3, "spec_accept_length": 4.0}
    assert "speculative_algorithm" in record["internal_states"][0]["kwargs_seen"]
    written = json.loads(next((tmp_path / "engines").glob("*.out.json")).read_text())
    assert written["case"]["engine"]["speculative_algorithm"] == "EAGLE3" and written["ok"]


def test_an_engine_that_fails_raises_with_its_traceback(stand_in: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAND_IN_FAIL", "1")
    with pytest.raises(RuntimeError, match="stand-in engine refused to start"):
        run_case(Case(stand_in, spec=False, prompts=("x",)), tmp_path / "engines")


def test_a_wrong_site_is_refused(stand_in: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sglang imported from elsewhere than SGLANG_FASTPATH_SITE_FORK: the worker's site check fails."""
    monkeypatch.setenv("SGLANG_FASTPATH_SITE_FORK", str(tmp_path / "elsewhere"))
    with pytest.raises(RuntimeError, match="not from the variant's site"):
        run_case(Case(stand_in, spec=False, prompts=("y",)), tmp_path / "engines")


def test_the_case_spec_reads_back_typed(stand_in: Path) -> None:
    spec = JobSpec.from_spec(case_spec(Case(stand_in, spec=False), "k"))
    assert spec.kind == "case" and spec.case is not None and spec.case.prompts[0] == "Hello, my name is"
    assert spec.case.sampling["max_new_tokens"] == 64 and spec.case.engine["attention_backend"] == "triton"
