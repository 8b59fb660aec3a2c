"""Build the Triton binaries of every untimed candidate in parallel worker processes, before timing.

Timing a config is a few milliseconds of GPU work; compiling it is one to three seconds of one
CPU core, and the tuner meets about a thousand (config, specialization) pairs per TP size. The
timing process compiles them one by one unless they are already in Triton's on-disk cache. So
``tune --compile-workers N`` first splits the untimed (GEMM, M, config) jobs over N worker
processes (``python -m moe_tuning compile-shard``), each of which launches SGLang's kernel once per
job on empty weights of the rank's shapes, exactly as ``gpu_timer.GraphTimer`` will: same kernel,
same arguments, same specializations, so the timing process finds every binary in the shared
cache (``TRITON_CACHE_DIR``) and only loads it. A job that fails to compile fails again when
timed, which logs it; the workers only warm the cache and record nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from moe_tuning.search_space import KernelConfig, SearchSpace, candidates
from moe_tuning.shapes import Device, RankShapes
from moe_tuning.tune import TrialLog


@dataclass(frozen=True)
class CompileJob:
    gemm: str  # "gate_up" or "down"
    m: int
    config: KernelConfig

    def to_json(self) -> dict:
        return {"gemm": self.gemm, "m": self.m, "config": self.config.kwargs()}

    @classmethod
    def from_json(cls, row: dict) -> CompileJob:
        return cls(row["gemm"], int(row["m"]), KernelConfig.from_kwargs(row["config"]))


def untimed_jobs(shapes: RankShapes, dev: Device, ms: Iterable[int], log: TrialLog,
                 space: SearchSpace = SearchSpace()) -> list[CompileJob]:
    """Every (GEMM, M, config) the tuner may time and has not: all down candidates too, since the
    down GEMM's BLOCK_SIZE_M is only known once gate/up is timed."""
    jobs = []
    for gemm in (shapes.gate_up, shapes.down):
        for m in ms:
            for cfg in candidates(gemm, dev, m, space):
                if log.get(gemm.name, m, cfg) is None and not _refused(log, gemm.name, cfg):
                    jobs.append(CompileJob(gemm.name, m, cfg))
    return jobs


def _refused(log: TrialLog, gemm: str, cfg: KernelConfig) -> bool:
    verdict = log.get(gemm, None, cfg)
    return verdict is not None and verdict.error is not None


def shard(jobs: list[CompileJob], index: int, count: int) -> list[CompileJob]:
    """Round-robin share ``index`` of ``count``: configs of one (GEMM, M) spread over all workers."""
    return jobs[index::count]


@dataclass(frozen=True)
class PrecompileReport:
    jobs: int
    workers: int
    seconds: float
    failed_workers: int
    timed_out: bool

    def line(self) -> str:
        state = "cut by the budget" if self.timed_out else "done"
        return (f"precompile: {self.jobs} jobs over {self.workers} workers, {state} in {self.seconds:.0f} s"
                + (f", {self.failed_workers} worker(s) exited non-zero (see their logs)" if self.failed_workers else ""))


def run_workers(tp: int, jobs: list[CompileJob], workers: int, work_dir: Path,
                budget_s: float | None = None) -> PrecompileReport:
    """Start ``workers`` compile-shard processes over ``jobs`` and wait (at most ``budget_s``)."""
    t0 = time.monotonic()
    work_dir.mkdir(parents=True, exist_ok=True)
    job_file = work_dir / "compile-jobs.json"
    job_file.write_text(json.dumps([job.to_json() for job in jobs]))
    workers = max(1, min(workers, len(jobs))) if jobs else 0
    procs = []
    for index in range(workers):
        log = open(work_dir / f"compile-worker-{index}.log", "w")
        cmd = [sys.executable, "-m", "moe_tuning", "compile-shard", "--tp", str(tp), "--jobs", str(job_file),
               "--shard", str(index), "--of", str(workers)]
        procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=os.environ.copy()), log))
    timed_out = False
    for proc, log in procs:
        left = None if budget_s is None else max(0.0, budget_s - (time.monotonic() - t0))
        try:
            proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            timed_out = True
            proc.kill()
            proc.wait()
        log.close()
    failed = sum(1 for proc, _ in procs if proc.returncode not in (0, -9))
    return PrecompileReport(len(jobs), workers, time.monotonic() - t0, failed, timed_out)


def compile_shard(tp: int, job_file: Path, index: int, count: int) -> int:
    """Worker body: launch each job of this shard once (GPU host, SGLang installed)."""
    from moe_tuning.gpu_timer import GraphTimer
    from moe_tuning.shapes import rank_shapes

    jobs = shard([CompileJob.from_json(row) for row in json.loads(job_file.read_text())], index, count)
    timer = GraphTimer(rank_shapes(tp), random_weights=False)
    gemms = {gemm.name: gemm for gemm in (timer.shapes.gate_up, timer.shapes.down)}
    failed = 0
    t0 = time.monotonic()
    for n, job in enumerate(jobs, 1):
        try:
            timer.compile(gemms[job.gemm], job.m, job.config)
        except Exception as exc:  # noqa: BLE001 - the timing run logs it; here only count it
            failed += 1
            print(f"{job.gemm} M={job.m} {job.config.label()}: {type(exc).__name__}: {exc}"[:300], flush=True)
        if n % 25 == 0:
            print(f"{n}/{len(jobs)} in {time.monotonic() - t0:.0f} s", flush=True)
    print(f"shard {index}/{count}: {len(jobs)} jobs, {failed} failed, {time.monotonic() - t0:.0f} s", flush=True)
    return 0
