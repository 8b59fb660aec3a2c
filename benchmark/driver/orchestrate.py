"""Runs a plan's jobs as subprocesses, one per variant and round, and collects what they wrote.

Each job runs ``WORKER_ARGV --spec raw/JOB.spec.json --out raw/JOB.jsonl`` with
PYTHONPATH set to the repository's ``python/`` (our models-folder reader, no SGLang), the variant's
site, then the repository (nothing inherited), its
GPUs in CUDA_VISIBLE_DEVICES, NVLink multicast kept off, and the parallel config's
own variables (NCCL_P2P_DISABLE for tp2-pcie). A lane runs its jobs in plan order, so
the rounds of a group alternate between variants. Output goes to logs/JOB.log. A job
whose estimate no longer fits the time budget is skipped; one that runs past its
timeout is killed with its whole process group. The JSONL it wrote is kept either way.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from benchmark.driver.plan import FIRST_COMPILE_S, Job, Plan

WORKER_ARGV = [sys.executable, "-m", "benchmark.worker"]
# Multicast stays off on the lent multi-GPU hosts (it can take shared GPUs out of service).
NVLS_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
BASE_ENV = {"PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false", "TQDM_DISABLE": "1", **NVLS_OFF}
MIN_TIMEOUT_S = 120.0


@dataclass
class JobOutcome:
    job: Job
    status: str  # ok | failed | timeout | skipped (budget) | unrunnable (too few GPUs)
    seconds: float = 0.0
    rc: int | None = None
    gpus: str = ""
    command: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # overrides on top of the parent environment
    log: str = ""
    raw: str = ""
    lines: list[dict[str, Any]] = field(default_factory=list)
    note: str | None = None

    def summary(self) -> dict[str, Any]:
        return {"job": self.job.name, "series": self.job.series, "round": self.job.round,
                "rounds": self.job.rounds, "kind": self.job.kind, "variant": self.job.variant.name,
                "site": self.job.variant.site, "config": self.job.parallel.name, "backend": self.job.backend,
                "status": self.status, "rc": self.rc, "seconds": round(self.seconds, 1),
                "estimate_s": round(self.job.estimate_s(), 1), "gpus": self.gpus, "log": self.log,
                "raw": self.raw, "note": self.note,
                "warmup_records": sum(1 for ln in self.lines if ln.get("type") == "record" and ln.get("warmup")),
                "info": [ln.get("data") for ln in self.lines if ln.get("type") == "info"]}


def job_env(job: Job, gpus: str, repo: Path) -> dict[str, str]:
    """The variables a job's process gets on top of the parent environment."""
    return {**BASE_ENV, "CUDA_VISIBLE_DEVICES": gpus,
            "PYTHONPATH": os.pathsep.join([str(repo / "python"), job.variant.site, str(repo)]), **job.parallel.env(),
            **dict(job.variant.env)}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of ``path``; a torn last line (killed writer) is dropped."""
    if not path.is_file():
        return []
    lines = []
    for text in path.read_text(errors="replace").splitlines():
        try:
            item = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(item, dict):
            lines.append(item)
    return lines


class Orchestrator:
    def __init__(self, out_dir: Path, repo: Path, *, worker_argv: list[str] | None = None,
                 budget_s: float = float("inf"), clock: Callable[[], float] = time.monotonic,
                 on_done: Callable[[JobOutcome], None] | None = None) -> None:
        self.out_dir, self.repo = out_dir, repo
        self.worker_argv = list(worker_argv or WORKER_ARGV)
        self.budget_s, self.clock, self.on_done = budget_s, clock, on_done
        self.first_compile_s = FIRST_COMPILE_S  # the plan's (model-aware, calibrated) once run_plan has it
        self._lock = threading.Lock()
        self._started = clock()
        (out_dir / "raw").mkdir(parents=True, exist_ok=True)
        (out_dir / "logs").mkdir(parents=True, exist_ok=True)

    def remaining_s(self) -> float:
        return self.budget_s - (self.clock() - self._started)

    def run_plan(self, plan: Plan) -> list[JobOutcome]:
        self._started = self.clock()
        self.first_compile_s = plan.first_compile_s
        outcomes: list[JobOutcome] = []

        def lane_worker(gpu: int, jobs: list[Job]) -> None:
            for i, job in enumerate(jobs):
                self._finish(outcomes, self.run_job(job, str(gpu), first=i == 0))

        threads = [threading.Thread(target=lane_worker, args=(i, lane), daemon=True)
                   for i, lane in enumerate(plan.lanes) if lane]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        gpus = ",".join(str(i) for i in range(max(2, plan.gpus)))
        for i, job in enumerate(plan.serial):
            self._finish(outcomes, self.run_job(job, ",".join(gpus.split(",")[:job.parallel.tp]), first=i == 0))
        for job, why in plan.unrunnable:
            self._finish(outcomes, JobOutcome(job, "unrunnable", note=why))
        return outcomes

    def _finish(self, outcomes: list[JobOutcome], outcome: JobOutcome) -> None:
        with self._lock:
            outcomes.append(outcome)
            if self.on_done is not None:
                self.on_done(outcome)

    def run_job(self, job: Job, gpus: str, first: bool = False) -> JobOutcome:
        """Run one job's process on ``gpus``; the first of a lane (``first``) must also fit the first-use Triton
        compile on top of its estimate (a job that cannot finish in what is left of the budget is skipped)."""
        estimate = job.estimate_s() + (self.first_compile_s if first else 0.0)
        remaining = self.remaining_s()
        if estimate > remaining:
            return JobOutcome(job, "skipped", gpus=gpus,
                              note=f"budget: ~{estimate:.0f} s needed, {max(0.0, remaining):.0f} s left")
        spec_path = self.out_dir / "raw" / f"{job.name}.spec.json"
        raw_path = self.out_dir / "raw" / f"{job.name}.jsonl"
        log_path = self.out_dir / "logs" / f"{job.name}.log"
        spec_path.write_text(json.dumps(job.spec(), indent=1) + "\n")
        raw_path.unlink(missing_ok=True)
        command = [*self.worker_argv, "--spec", str(spec_path), "--out", str(raw_path)]
        overrides = job_env(job, gpus, self.repo)
        # The estimates assume a warm Triton cache; any variant's first process on a host may compile its kernels
        # (the stock site's after warm-jit warmed the fork's: 42 s of verify capture for kimi16, 2026-12-04).
        timeout = min(remaining, max(3 * estimate, MIN_TIMEOUT_S) + self.first_compile_s)
        outcome = JobOutcome(job, "failed", gpus=gpus, command=command, env=overrides,
                             log=str(log_path.relative_to(self.out_dir)),
                             raw=str(raw_path.relative_to(self.out_dir)))
        scratch = tempfile.mkdtemp(prefix=f"bench-{job.name}-")
        start = self.clock()
        print(f"[bench] start {job.name} on GPU {gpus} (~{estimate:.0f} s, timeout {timeout:.0f} s)", flush=True)
        try:
            with open(log_path, "w") as log:
                log.write("$ " + " ".join(command) + "\n")
                log.flush()
                proc = subprocess.Popen(command, cwd=scratch, env={**os.environ, **overrides}, stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
                try:
                    outcome.rc = proc.wait(timeout=timeout)
                    outcome.status = "ok" if outcome.rc == 0 else "failed"
                except subprocess.TimeoutExpired:
                    outcome.status, outcome.note = "timeout", f"killed after {timeout:.0f} s"
                finally:
                    _kill_group(proc)
        except OSError as exc:
            outcome.note = f"could not start the worker: {exc}"
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        outcome.seconds = self.clock() - start
        outcome.lines = read_jsonl(raw_path)
        errors = [ln for ln in outcome.lines if ln.get("type") == "error"]
        if outcome.status == "ok" and errors:
            outcome.note = f"{len(errors)} point(s) failed"
        print(f"[bench] {outcome.status:>7} {job.name} in {outcome.seconds:.0f} s"
              f"{' (' + outcome.note + ')' if outcome.note else ''}", flush=True)
        return outcome


def _kill_group(proc: subprocess.Popen) -> None:
    """End the process group this orchestrator started for ``proc``: SIGTERM, then SIGKILL.

    Also run after a normal exit: engine or TP-rank children left behind would hold
    the GPU that the next job measures on.
    """
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
        time.sleep(0.5 if sig == signal.SIGTERM else 0)
