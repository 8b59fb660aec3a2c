"""Synthetic torch-profiler events of scheduler steps, for the tests that read e2e traces."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any


def step_events(mode: str, busy_us: float, n: int) -> list[dict[str, Any]]:
    """``n`` scheduler steps of 1 ms (``mode``: DECODE or TARGET_VERIFY, bs 1), each replaying one graph
    whose kernel keeps the GPU busy ``busy_us``."""
    events: list[dict[str, Any]] = []
    for i in range(n):
        s = 1000.0 * (i + 1)
        events += [{"ph": "X", "cat": "user_annotation", "name": "scheduler.run_batch", "ts": s, "dur": 800, "tid": 7},
                   {"ph": "X", "cat": "user_annotation", "name": f"step[{mode} bs=1]", "ts": s + 100, "dur": 300,
                    "tid": 7},
                   {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "ts": s + 150, "dur": 5, "tid": 7,
                    "args": {"correlation": i + 1}},
                   {"ph": "X", "cat": "kernel", "name": "gemm", "ts": s + 200, "dur": busy_us, "tid": 100,
                    "args": {"correlation": i + 1}}]
    return events


def write_trace(path: Path, events: list[dict[str, Any]]) -> None:
    """``events`` as a gzipped trace file at ``path`` (its folder made if missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)
