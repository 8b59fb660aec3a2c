"""The tuner's parallel precompile step on CPU: which jobs, how they are shared, how workers end."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from moe_tuning.precompile import CompileJob, run_workers, shard, untimed_jobs
from moe_tuning.search_space import candidates
from moe_tuning.shapes import device, rank_shapes
from moe_tuning.tune import Trial, TrialLog

SHAPES = rank_shapes(8)
H200 = device("h200")
REPO = Path(__file__).resolve().parents[1]


def test_untimed_jobs_skip_timed_and_refused_configs(tmp_path: Path) -> None:
    log = TrialLog(tmp_path / "log.jsonl")
    everything = untimed_jobs(SHAPES, H200, [1, 32], log)
    up1 = candidates(SHAPES.gate_up, H200, 1)
    assert sum(1 for job in everything if job.gemm == "gate_up" and job.m == 1) == len(up1)
    assert {job.gemm for job in everything} == {"gate_up", "down"}
    log.add(Trial("gate_up", 1, up1[0], us=12.0))  # timed at M=1 only
    log.add(Trial("gate_up", None, up1[1], error="spills on sm_120"))  # refused for every M
    left = untimed_jobs(SHAPES, H200, [1, 32], log)
    assert CompileJob("gate_up", 1, up1[0]) not in left
    assert all(job.config != up1[1] or job.gemm != "gate_up" for job in left)
    assert len(left) == len(everything) - 1 - sum(1 for j in everything if j.gemm == "gate_up" and j.config == up1[1])


def test_shards_partition_the_jobs() -> None:
    jobs = untimed_jobs(SHAPES, H200, [4], TrialLog(Path("/nonexistent/log.jsonl")))
    parts = [shard(jobs, i, 3) for i in range(3)]
    assert sorted(map(repr, sum(parts, []))) == sorted(map(repr, jobs))
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    assert CompileJob.from_json(jobs[0].to_json()) == jobs[0]


def test_workers_that_fail_are_counted_and_logged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On this CPU host the workers cannot reach a GPU: each exits non-zero, the report says so and
    the tuner carries on (the timing run would then compile as it goes)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO / "sgl-kernel"), str(REPO / "python")]))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    jobs = untimed_jobs(SHAPES, H200, [1], TrialLog(tmp_path / "log.jsonl"))[:4]
    report = run_workers(8, jobs, 2, tmp_path / "pre", budget_s=120)
    assert (report.jobs, report.workers, report.failed_workers, report.timed_out) == (4, 2, 2, False)
    assert "2 worker(s) exited non-zero" in report.line()
    assert sorted(p.name for p in (tmp_path / "pre").glob("compile-worker-*.log")) == [
        "compile-worker-0.log", "compile-worker-1.log"]


def test_no_jobs_starts_no_worker(tmp_path: Path) -> None:
    report = run_workers(8, [], 4, tmp_path / "pre")
    assert (report.jobs, report.workers, report.failed_workers) == (0, 0, 0)
