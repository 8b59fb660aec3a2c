"""Times one step: warm-up, then N runs each between two CUDA events; median and spread.

``run()`` is the timed step and returns whether it replayed a CUDA graph; ``reset()``
(untimed) puts the inputs back before every run. Each run is synchronised, like a
scheduler that samples after every step, so host launch time shows in the events.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from benchmark.core.stats import quantile


@dataclass(frozen=True)
class Timing:
    latency_ms: list[float]  # CUDA-event time per run
    wall_ms: list[float]  # host time per run, synchronize included
    graphs: list[bool]

    @property
    def graph(self) -> bool | None:
        """True/False when every run agreed; None when runs took different paths."""
        return self.graphs[0] if len(set(self.graphs)) == 1 else None

    def stats(self, samples: list[float]) -> dict[str, float]:
        return {"value": quantile(samples, 0.5), "p20": quantile(samples, 0.2), "p80": quantile(samples, 0.8)}


def time_step(run: Callable[[], bool], *, reset: Callable[[], None] | None = None, warmup: int = 3,
              iters: int = 20) -> Timing:
    import torch

    for _ in range(warmup):
        if reset is not None:
            reset()
        run()
    torch.cuda.synchronize()
    latency, wall, graphs = [], [], []
    for _ in range(iters):
        if reset is not None:
            reset()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record()
        graphs.append(bool(run()))
        end.record()
        end.synchronize()
        wall.append((time.perf_counter() - t0) * 1e3)
        latency.append(start.elapsed_time(end))
    return Timing(latency, wall, graphs)
