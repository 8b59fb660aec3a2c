"""The job spec: what the driver hands one worker process, and the points it measures.

``Job.spec()`` (benchmark/driver/plan.py) writes it as JSON to ``raw/JOB.spec.json``;
the worker (``python -m benchmark.worker``) reads it back typed with ``JobSpec.from_spec``.
Every default is defined here once: a field missing from a spec takes it, an unknown one
is an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from benchmark.core.errors import BenchError

BS = (1, 2, 4, 8, 16, 32, 64)
KS = (2, 3, 4, 6, 8)
TOPKS = (1, 4)


@dataclass(frozen=True)
class MicroPoints:
    bs: tuple[int, ...] = BS
    ks: tuple[int, ...] = KS
    topks: tuple[int, ...] = TOPKS
    ctx: int = 1024
    iters: int = 20
    warmup: int = 3
    eager: bool = False  # also time every point with the graph runner removed
    graph_max_bs: int | None = None  # capture decode/verify graphs only up to this bs
    warmup_block: bool = True  # time the first batch size once more first, and discard it

    @property
    def runners(self) -> int:
        return len(self.ks) * len(self.topks) + 1

    @property
    def points(self) -> int:
        return len(self.bs) * self.runners * (2 if self.eager else 1)

    def graph_bs(self) -> list[int]:
        return [b for b in self.bs if self.graph_max_bs is None or b <= self.graph_max_bs]

    def blocks(self) -> list[tuple[int, bool]]:
        """(batch size, is warm-up) in the order a process measures them."""
        return point_blocks(self.bs, self.warmup_block)


def point_blocks(bs: tuple[int, ...] | list[int], warmup_block: bool) -> list[tuple[int, bool]]:
    """A micro process's blocks: a discarded warm-up block at the first batch size, then every batch size.

    The warm-up block runs every runner (graph and eager) exactly like the first timed
    block, so first-call costs (Triton JIT, allocator growth, clocks ramping up) land in
    records the collector drops instead of in the first timed point.
    """
    return ([(bs[0], True)] if warmup_block and bs else []) + [(b, False) for b in bs]


@dataclass(frozen=True)
class E2EPoints:
    bs: tuple[int, ...] = BS
    prompt_len: int = 128
    output_len: int = 256
    acc_len: float = 3.0  # SGLANG_SIMULATE_ACC_LEN for the spec-on engine; 0: the draft's real acceptance
    steps: int = 3
    topk: int = 1
    draft_tokens: int = 4
    profile_steps: int = 0  # > 0: after the timed runs, a torch-profiler trace of this many steps per bs
    runs: int = 1  # timed generate calls per batch size and engine; the median is reported
    pysample_runs: int = 0  # > 0: after the timed runs, this many more per bs with the scheduler sampled
    # New tokens of the untimed call at each bs before its timed runs (at most output_len); 0: output_len, the
    # timed call once untimed. A spec engine's batch shrinks as its requests finish at different cycles, and each
    # smaller batch can compile kernels specialised on its shape: only a full-length call meets them all before
    # the timing (session 37: with a 16-token warm-up, the first fork engine on a host ran its bs-64 EAGLE-3 call
    # 0.3 s slower than the next engine with the same K choices; first-use compiles are the likely cause).
    warmup_len: int = 0

    @property
    def warmup_tokens(self) -> int:
        """New tokens of the untimed call at each bs: ``warmup_len`` capped at ``output_len``; 0 is ``output_len``."""
        return self.output_len if self.warmup_len <= 0 else min(self.warmup_len, self.output_len)


@dataclass(frozen=True)
class CasePoints:
    """One engine case of the GPU gate (``test/gpu/engines.py``): ``sglang.Engine(**engine)`` generates
    ``prompts`` with ``sampling`` once; the worker records the outputs and ``/server_info``'s
    internal states (``worker/engine_case.py``)."""

    engine: Mapping[str, Any] = field(default_factory=dict)
    prompts: tuple[str, ...] = ()
    sampling: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JobSpec:
    """One job as its worker process sees it: ``Job.spec()`` read back, typed.

    A missing field takes the default defined here or in ``MicroPoints`` / ``E2EPoints``
    (defined once); an unknown one is an error, so a typo in a spec cannot pass silently.
    """

    kind: str
    models: str
    backend: str = "triton"
    site: str = ""
    tp: int = 1
    job: str = ""
    variant: str = ""
    config: str = ""
    server_args: Mapping[str, Any] = field(default_factory=dict)
    micro: MicroPoints | None = None
    e2e: E2EPoints | None = None
    case: CasePoints | None = None
    round: int = 1
    rounds: int = 1
    variant_env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_spec(cls, data: Mapping[str, Any]) -> JobSpec:
        _check_fields(cls, data, "job spec")
        return cls(**{**data, "micro": _points(MicroPoints, data.get("micro")),
                      "e2e": _points(E2EPoints, data.get("e2e")),
                      "case": _points(CasePoints, data.get("case")),
                      "server_args": dict(data.get("server_args") or {}),
                      "variant_env": dict(data.get("variant_env") or {})})


def _check_fields(cls: type, data: Mapping[str, Any], what: str) -> None:
    unknown = sorted(set(data) - {f.name for f in fields(cls)})
    if unknown:
        raise BenchError(f"{what}: unknown field(s) {', '.join(unknown)}")


def _points(cls: type, data: Mapping[str, Any] | None) -> Any:
    """``MicroPoints``, ``E2EPoints`` or ``CasePoints`` from JSON (lists become the tuples the fields hold)."""
    if data is None:
        return None
    _check_fields(cls, data, cls.__name__)
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})
