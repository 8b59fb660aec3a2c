"""The result file: one record per measured figure, keyed by point and metric.

A record's key is (variant, config, backend, mode, bs, k, topk, metric); ``config``
names the parallel setup (``tp1``, ``tp2``, ``tp2-pcie``), so it carries the TP size.
Beside the value a record says whether the step replayed a CUDA graph, the spread of
the samples and the memory-bandwidth floor of the step. A figure measured in several
rounds (one fresh process each) has ``value`` = the median of the rounds' medians,
``rounds`` = each round's median in round order and ``lo``/``hi`` = their min/max: the
spread that ``compare.py`` weighs a move against. ``results.json`` holds the records,
the processes that produced them and their errors. Schema 1 files (one round, no
``rounds``/``lo``/``hi``) are still read; their figures have no measured spread.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any

from benchmark.core.errors import BenchError

SCHEMA = "sglang-fastpath-bench/2"
READABLE = ("sglang-fastpath-bench/1", SCHEMA)  # /1: one round per figure, no spread fields


class Direction(Enum):
    """Which way a metric gets better; NEUTRAL moves are reported but never fail."""

    LOWER = "lower"
    HIGHER = "higher"
    NEUTRAL = "neutral"


METRICS: dict[str, Direction] = {
    "latency_ms": Direction.LOWER,  # CUDA-event time of one step, median
    "wall_ms": Direction.LOWER,  # host time of one step incl. synchronize, median
    "tokens_per_s": Direction.HIGHER,  # end-to-end output tokens per second
    "decode_tokens_per_s": Direction.HIGHER,  # e2e: tokens after the first over the time after the first token
    "accept_len": Direction.NEUTRAL,  # mean accepted tokens per verify (e2e, spec on)
    "verify_graph_hit": Direction.HIGHER,  # verify steps replayed from a CUDA graph / all (e2e, 0012)
    "cycle_ms": Direction.LOWER,  # GPU ms of a draft + verify + draft-extend cycle, mean (e2e, 0012)
    # mean draft tokens K of the run's cycles, its cycles per K in extra.draft_tokens_mix (e2e, 0012): with
    # --speculative-adaptive, what the policy chose at that batch size
    "draft_tokens_mean": Direction.NEUTRAL,
    # e2e --profile-steps, rank 0's trace (tools/cycle_phases.py), medians over the profiled steps/cycles:
    "gpu_busy_ms": Direction.LOWER,  # GPU busy time of a decode step or an EAGLE-3 cycle
    "gpu_idle_frac": Direction.LOWER,  # the share of a step's or cycle's wall time the GPU idled
    "graph_starved_ms": Direction.LOWER,  # GPU idle inside graph launches still running (--graphs)
    # derived per process from the above (driver/collect.py): no speculation's GPU busy time per token
    # over EAGLE-3's per accepted token, and how much of that the measured tokens/s ratio reaches
    "gpu_bound_ratio": Direction.NEUTRAL,
    "share_of_gpu_bound": Direction.HIGHER,
    "decode_share_of_gpu_bound": Direction.HIGHER,  # the same from decode_tokens_per_s (no prefill in it)
    # 1 - gpu_busy_ms over the step's or cycle's wall time in the timed runs (no profiler in it)
    "timed_gpu_idle_frac": Direction.LOWER,
    # e2e: free device memory before the engine's first CUDA-graph capture less after its last, from its log
    # (driver/graph_memory.py); on the mode's largest bs
    "graph_memory_gb": Direction.LOWER,
    "graph_held_gb": Direction.LOWER,  # what the graphs' captures kept (patch 0040's log figures)
}

# decode/verify: the graph or eager path the runner chose; *_eager: eager forced.
STEP_MODES = ("decode", "verify", "decode_eager", "verify_eager")
E2E_MODES = ("e2e_nospec", "e2e_spec")
MODES = STEP_MODES + E2E_MODES

Key = tuple[str, str, str, str, int, int, int, str]
_REQUIRED = ("variant", "config", "backend", "mode", "bs", "k", "topk", "metric", "value")


@dataclass
class Record:
    variant: str
    config: str
    backend: str
    mode: str
    bs: int
    k: int  # draft tokens per request (1 for decode, 0 for e2e without speculation)
    topk: int  # EAGLE tree branching (0 where there is no tree)
    metric: str
    value: float
    tp: int = 1
    graph: bool | None = None  # True: every timed step replayed a CUDA graph
    p20: float | None = None
    p80: float | None = None
    n: int = 0
    ctx: int | None = None  # tokens of context per request before the step
    floor_ms: float | None = None
    floor_bytes: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    rounds: list[float] = field(default_factory=list)  # each round's median, in round order
    lo: float | None = None  # min over rounds
    hi: float | None = None  # max over rounds

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise BenchError(f"record mode {self.mode!r} is not one of {', '.join(MODES)}")
        if self.metric not in METRICS:
            raise BenchError(f"record metric {self.metric!r} is not one of {', '.join(METRICS)}")

    def key(self) -> Key:
        return (self.variant, self.config, self.backend, self.mode, self.bs, self.k, self.topk, self.metric)

    @property
    def direction(self) -> Direction:
        return METRICS[self.metric]

    def interval(self) -> tuple[float, float]:
        """(lo, hi) across rounds; (value, value) when no spread was measured (one round, schema 1)."""
        if len(self.rounds) < 2 or self.lo is None or self.hi is None:
            return self.value, self.value
        return self.lo, self.hi

    def spread_label(self) -> str:
        """``[lo..hi] xN`` beside a figure, or ``(1 round)`` when there is no spread."""
        if len(self.rounds) < 2 or self.lo is None or self.hi is None:
            return "(1 round)"
        return f"[{self.lo:.4g}..{self.hi:.4g}] x{len(self.rounds)}"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Record:
        known = {f.name for f in fields(cls)}
        missing = [name for name in _REQUIRED if name not in data]
        if missing:
            raise BenchError(f"record {data!r} lacks {', '.join(missing)}")
        return cls(**{k: v for k, v in data.items() if k in known})


def key_label(key: Key) -> str:
    variant, config, backend, mode, bs, k, topk, metric = key
    return f"{variant} {config} {backend} {mode} bs={bs} k={k} topk={topk} {metric}"


@dataclass
class ResultSet:
    meta: dict[str, Any] = field(default_factory=dict)
    records: list[Record] = field(default_factory=list)
    processes: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "meta": self.meta,
            "records": [asdict(r) for r in self.records],
            "processes": self.processes,
            "errors": self.errors,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "results") -> ResultSet:
        if data.get("schema") not in READABLE:
            raise BenchError(f"{source}: schema {data.get('schema')!r} is not one of {', '.join(READABLE)}; "
                             "pass a results.json written by benchmark/run.py")
        records = [Record.from_dict(r) for r in data.get("records", [])]
        return cls(dict(data.get("meta", {})), records, list(data.get("processes", [])),
                   list(data.get("errors", [])))

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.to_dict(), indent=1, sort_keys=False) + "\n")
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> ResultSet:
        if path.is_dir():
            path = path / "results.json"
        if not path.is_file():
            raise BenchError(f"{path}: no such results file; pass a results.json or its folder")
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise BenchError(f"{path}: not JSON ({exc}); pass a results.json written by benchmark/run.py")
        return cls.from_dict(data, str(path))

    def by_key(self) -> dict[Key, Record]:
        """Records by key; a key measured twice keeps the later record."""
        return {r.key(): r for r in self.records}
