"""Turns the jobs' JSON lines into records, with the bandwidth floor beside every step figure.

A worker writes only what it measured (mode, bs, k, topk, metric, value, graph, ...);
the job that ran it supplies variant, config, backend, TP and round. Lines marked
``warmup`` (the block a micro process times first) are dropped. The rounds of each
figure are merged into one record with their spread (``rounds.py``), and this module
adds ``floor_ms``/``floor_bytes`` for decode and verify steps from the model's shapes. Where a
process profiled both engines at a batch size (``--profile-steps``), it also gets the GPU-bound ratio of
speculation there and the share of it the measured tokens/s reach (``derive_gpu_bound``), within that
process, before the rounds are merged.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable

from benchmark.core.errors import BenchError
from benchmark.core.floor import ModelShape, floor_ms, step_bytes
from benchmark.core.stats import gpu_bound_ratio
from benchmark.driver.graph_memory import EngineGraphMemory, engines_in
from benchmark.driver.orchestrate import JobOutcome
from benchmark.driver.rounds import merge_rounds
from benchmark.driver.schema import STEP_MODES, Record, ResultSet


def records_of(outcome: JobOutcome, out_dir: Path | None = None) -> tuple[list[Record], list[dict[str, Any]]]:
    """(records, errors) from one job's lines; warm-up lines are skipped, a malformed record is an error.
    With ``out_dir`` (where the job's log lies), each e2e engine's graph memory from the log too."""
    job = outcome.job
    base = {"variant": job.variant.name, "config": job.parallel.name, "backend": job.backend,
            "tp": job.parallel.tp}
    where = {"job": job.name, "series": job.series, "round": job.round}
    records, errors = [], []
    for line in outcome.lines:
        kind = line.get("type")
        if kind == "record" and line.get("warmup"):
            continue
        if kind == "record":
            data = {k: v for k, v in line.items() if k != "type"}
            try:
                records.append(Record.from_dict({**data, **base}))
            except (BenchError, TypeError) as exc:
                errors.append({**base, **where, "where": "record", "error": str(exc)})
        elif kind == "error":
            errors.append({**base, **where, **{k: v for k, v in line.items() if k != "type"}})
    records += derive_gpu_bound(records) + derive_timed_idle(records)
    if out_dir is not None and outcome.log:
        records += graph_memory_records(records, engines_in(out_dir / outcome.log))
    if outcome.status not in ("ok", "unrunnable"):  # a job this machine cannot run is no failure
        errors.append({**base, **where, "where": "process",
                       "error": f"{outcome.status}: {outcome.note or f'exit status {outcome.rc}'} (see {outcome.log})"})
    return records, errors


# (measured rate, the derived share of the GPU-bound ratio it reaches)
SHARES = (("tokens_per_s", "share_of_gpu_bound"), ("decode_tokens_per_s", "decode_share_of_gpu_bound"))


def derive_gpu_bound(records: list[Record]) -> list[Record]:
    """For each EAGLE-3 batch size of one process with profiled GPU busy times on both engines:
    ``gpu_bound_ratio`` = no speculation's busy ms per token / (EAGLE-3's busy ms per cycle / accept length),
    the speed-up if neither engine left the GPU idle, and ``share_of_gpu_bound`` = the measured tokens/s
    ratio over it; ``decode_share_of_gpu_bound`` the same from ``decode_tokens_per_s``, which leaves out the
    prefill as the traces' ratio does."""
    by = {(r.mode, r.bs, r.k, r.topk, r.metric): r for r in records}
    derived = []
    for spec in records:
        if spec.mode != "e2e_spec" or spec.metric != "gpu_busy_ms" or spec.value <= 0:
            continue
        base = by.get(("e2e_nospec", spec.bs, 0, 0, "gpu_busy_ms"))
        accept = by.get(("e2e_spec", spec.bs, spec.k, spec.topk, "accept_len"))
        if base is None or accept is None:
            continue
        ratio = gpu_bound_ratio(base.value, spec.value, accept.value)
        extra = {"nospec_gpu_busy_ms": base.value, "spec_gpu_busy_ms": spec.value, "accept_len": accept.value}
        derived.append(replace(spec, metric="gpu_bound_ratio", value=round(ratio, 4), extra=extra))
        for rate, share in SHARES:
            fast = by.get(("e2e_spec", spec.bs, spec.k, spec.topk, rate))
            slow = by.get(("e2e_nospec", spec.bs, 0, 0, rate))
            if fast is not None and slow is not None and slow.value > 0:
                measured = fast.value / slow.value
                derived.append(replace(spec, metric=share, value=round(measured / ratio, 4),
                                       extra={**extra, "measured_ratio": round(measured, 4)}))
    return derived


def derive_timed_idle(records: list[Record]) -> list[Record]:
    """For each profiled step or cycle of one process, ``timed_gpu_idle_frac`` = 1 - its GPU busy ms from the
    trace over its wall ms in the timed runs (accept length x bs tokens per cycle, 1 x bs per decode step, at
    the measured rate). A trace's own idle share (``gpu_idle_frac``) carries the profiler's launch tracing
    (about 1 µs per CUDA-graph node, ``../results/20261202-0816-h200-graph-launch-cost-profiled/``); this one
    does not. From ``decode_tokens_per_s`` where the process has it; from ``tokens_per_s`` otherwise, whose
    time includes the prefill, which makes the figure an upper bound (``extra.rate`` says which)."""
    by = {(r.mode, r.bs, r.k, r.topk, r.metric): r for r in records}
    derived = []
    for busy in records:
        if busy.metric != "gpu_busy_ms" or busy.mode not in ("e2e_nospec", "e2e_spec") or busy.value <= 0:
            continue
        key = (busy.mode, busy.bs, busy.k, busy.topk)
        rate = by.get((*key, "decode_tokens_per_s")) or by.get((*key, "tokens_per_s"))
        per_request = 1.0 if busy.mode == "e2e_nospec" else getattr(by.get((*key, "accept_len")), "value", None)
        if rate is None or rate.value <= 0 or per_request is None:
            continue
        wall_ms = per_request * busy.bs / rate.value * 1000.0
        extra = {"gpu_busy_ms": busy.value, "timed_wall_ms": round(wall_ms, 4), "rate": rate.metric}
        derived.append(replace(busy, metric="timed_gpu_idle_frac", value=round(1.0 - busy.value / wall_ms, 4),
                               extra=extra))
    return derived


def graph_memory_records(records: list[Record], engines: list[EngineGraphMemory]) -> list[Record]:
    """``graph_memory_gb`` of each e2e engine of one process (``graph_memory.py``), on its mode's largest batch
    size (the graphs cover every captured size at once); with adaptive states, each one's share by step count
    and the start-up state's in ``extra``; and ``graph_held_gb`` beside it where the log has patch 0040's figures."""
    derived = []
    for engine in engines:
        mode = "e2e_spec" if engine.speculative else "e2e_nospec"
        points = [r for r in records if r.mode == mode]
        if not points:
            continue
        top = max(points, key=lambda r: r.bs)
        extra: dict[str, Any] = {"free_before_gb": engine.before_gb, "free_after_gb": engine.after_gb}
        if engine.states_gb:
            extra["state_gb_by_steps"] = {str(steps): gb for steps, gb in engine.states_gb}
            extra["startup_state_gb"] = engine.startup_state_gb
        derived.append(replace(top, metric="graph_memory_gb", value=engine.graph_gb, graph=None, p20=None, p80=None, n=1,
                               extra=extra))
        if engine.held_gb is not None:
            derived.append(replace(top, metric="graph_held_gb", value=engine.held_gb, graph=None, p20=None, p80=None,
                                   n=1, extra={}))
    return derived


def annotate_floor(records: Iterable[Record], shape: ModelShape | None, bandwidth: float | None) -> None:
    """Set floor_bytes (and floor_ms when the bandwidth is known) on decode/verify records."""
    if shape is None:
        return
    for r in records:
        if r.mode not in STEP_MODES or r.ctx is None:
            continue
        kw = dict(mode=r.mode, bs=r.bs, k=max(r.k, 1), ctx=r.ctx, tp=r.tp)
        r.floor_bytes = round(step_bytes(shape, **kw).total)
        if bandwidth:
            r.floor_ms = round(floor_ms(shape, bandwidth=bandwidth, **kw), 5)


def build_results(outcomes: list[JobOutcome], meta: dict[str, Any], shape: ModelShape | None,
                  bandwidth: float | None, out_dir: Path | None = None) -> ResultSet:
    results = ResultSet(meta=dict(meta))
    tagged: list[tuple[int, Record]] = []
    for outcome in outcomes:
        records, errors = records_of(outcome, out_dir)
        tagged += [(outcome.job.round, r) for r in records]
        results.errors += errors
        results.processes.append(outcome.summary())
    results.records = merge_rounds(tagged)
    annotate_floor(results.records, shape, bandwidth)
    return results
