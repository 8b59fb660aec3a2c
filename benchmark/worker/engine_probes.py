"""What an e2e engine can tell besides tokens/s: all-reduce counts per run, and a profiler trace.

* All-reduce telemetry (the fork's patch 0002, on with ``SGLANG_ALL_REDUCE_STATS=1``):
  TP rank 0's counts come back through ``Engine.get_server_info()``. They accumulate over
  the engine's life, so a run's own counts are the difference of the snapshots taken
  before and after it (``count_delta``), reported per generated token. Stock SGLang has
  no telemetry: the probe then returns None and nothing is recorded. A micro rank builds
  its ModelRunner in-process and reads its own counts (``local_all_reduce_counts``).
* EAGLE cycle telemetry (the fork's patch 0012, on with ``SGLANG_SPEC_CYCLE_STATS=1``): the
  same way, TP rank 0's ``spec_cycle`` totals before and after a run give that run's
  ``verify_graph_hit`` (verify steps that replayed a CUDA graph / all verify steps) and
  ``cycle_ms`` (mean GPU time of a draft + verify + draft-extend cycle), ``cycle_metrics``, and
  ``draft_tokens_mean`` (the mean K its cycles ran: with ``--speculative-adaptive``, the policy's
  choice at that batch size; ``draft_token_mix`` gives the cycles per K).
* Profile: ``Engine.start_profile`` for a fixed number of scheduler steps, then one more
  generate call of the same batch; SGLang writes a torch-profiler trace per TP rank into
  the folder, which ``trace_summary`` condenses (GPU time per kernel category, busy vs
  idle, CUDA runtime calls); ``cycle_figures`` reads rank 0's steady steps or cycles from it
  (``tools/cycle_phases.py``: GPU busy ms, idle share, GPU starved inside graph launches).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

Key = tuple[str, str, str, str, str]  # mode, source, placement, method, bytes_le


def rank0_state(engine: Any, name: str) -> Any:
    """``internal_states[0][name]`` of the engine's server info, or None when it is not there."""
    try:
        states = engine.get_server_info().get("internal_states") or []
    except Exception:  # noqa: BLE001 - a probe must never fail the measurement
        return None
    return states[0].get(name) if states else None


def all_reduce_counts(engine: Any) -> dict[Key, int] | None:
    """TP rank 0's all-reduce counts, or None when the engine has no telemetry."""
    return counts_from_snapshot(rank0_state(engine, "all_reduce_stats"))


def cycle_metrics(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, tuple[float, int]]:
    """``verify_graph_hit`` and ``cycle_ms`` of the cycles between two ``spec_cycle`` snapshots,
    each with the number of steps it covers; empty without telemetry or without a cycle."""
    if not before or not after:
        return {}
    out: dict[str, tuple[float, int]] = {}
    steps = after["verify"]["steps"] - before["verify"]["steps"]
    if steps > 0:
        out["verify_graph_hit"] = ((after["verify"]["graph"] - before["verify"]["graph"]) / steps, steps)
    timed = after["timed"] - before["timed"]
    if timed > 0:
        out["cycle_ms"] = ((after["cycle"]["ms_sum"] - before["cycle"]["ms_sum"]) / timed, timed)
    mix = draft_token_mix(before, after)
    cycles = sum(mix.values())
    if cycles:
        out["draft_tokens_mean"] = (sum(int(k) * n for k, n in mix.items()) / cycles, cycles)
    return out


def phase_ms(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, float]:
    """Mean GPU ms of each cycle phase (``draft``, ``verify``, ``draft_extend``) between two ``spec_cycle``
    snapshots, idle inside the phase included; empty without telemetry or without a timed cycle."""
    if not before or not after:
        return {}
    timed = after["timed"] - before["timed"]
    if timed <= 0:
        return {}
    return {f"{phase}_ms": round((after[phase]["ms_sum"] - before[phase]["ms_sum"]) / timed, 4)
            for phase in ("draft", "verify", "draft_extend")
            if "ms_sum" in after.get(phase, {}) and "ms_sum" in before.get(phase, {})}


def draft_token_mix(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, int]:
    """Cycles per draft-token count K between two ``spec_cycle`` snapshots (``{"4": 120, "6": 8}``);
    empty without telemetry or before the snapshot had the histogram."""
    if not before or not after:
        return {}
    was = before.get("draft_tokens") or {}
    mix = {k: n - was.get(k, 0) for k, n in (after.get("draft_tokens") or {}).items()}
    return {k: n for k, n in sorted(mix.items(), key=lambda kv: int(kv[0])) if n > 0}


def local_all_reduce_counts() -> dict[Key, int] | None:
    """This process's all-reduce counts (a micro rank runs its ModelRunner in-process), or None
    when the SGLang it imports has no telemetry or has it off."""
    try:
        from sglang.srt.distributed import all_reduce_stats
    except ImportError:
        return None
    if not getattr(all_reduce_stats, "ENABLED", False):
        return None
    return counts_from_snapshot(all_reduce_stats.snapshot())


def counts_from_snapshot(stats: dict[str, Any] | None) -> dict[Key, int] | None:
    """The telemetry snapshot's rows summed by key, or None for no snapshot."""
    if not stats:
        return None
    counts: dict[Key, int] = {}
    for row in stats.get("counts", []):
        key = (row["mode"], row["source"], row["placement"], row["method"], str(row.get("bytes_le", "")))
        counts[key] = counts.get(key, 0) + int(row["count"])
    return counts


def count_delta(before: dict[Key, int] | None, after: dict[Key, int] | None) -> dict[Key, int] | None:
    if before is None or after is None:
        return None
    delta = {k: n - before.get(k, 0) for k, n in after.items()}
    return {k: n for k, n in delta.items() if n}


def delta_rows(delta: dict[Key, int], tokens: int, per: str = "per_token") -> list[dict[str, Any]]:
    """One row per path, with the count per generated token (or per ``per`` unit), largest first."""
    rows = [{"mode": k[0], "source": k[1], "placement": k[2], "method": k[3], "bytes_le": k[4], "count": n,
             per: round(n / tokens, 3) if tokens else None} for k, n in delta.items()]
    return sorted(rows, key=lambda r: -r["count"])


def profile_run(engine: Any, run: Callable[[], Any], folder: Path, steps: int,
                wait_s: float = 60.0) -> dict[str, Any]:
    """Trace ``steps`` scheduler steps of ``run()`` into ``folder``; the traces' summary."""
    from benchmark.tools import trace_summary

    folder.mkdir(parents=True, exist_ok=True)
    engine.start_profile(output_dir=str(folder), num_steps=steps, activities=["CPU", "GPU"],
                         with_stack=False, record_shapes=False)
    run()
    deadline = time.monotonic() + wait_s
    traces: list[Path] = []
    while time.monotonic() < deadline:  # the ranks write their traces after the last profiled step
        traces = trace_summary.trace_files(folder)
        if traces and all(_settled(p) for p in traces):
            break
        time.sleep(1.0)
    if not traces:
        return {"error": f"no trace written into {folder} within {wait_s:.0f} s"}
    return {p.name: trace_summary.summarize(trace_summary.load_trace(p)) for p in traces}


def cycle_figures(folder: Path) -> dict[str, tuple[float, int]]:
    """``gpu_busy_ms``, ``gpu_idle_frac`` and ``graph_starved_ms`` of rank 0's trace in ``folder``
    (``tools/cycle_phases.py``: medians over its steady cycles), each with the number of cycles; empty when
    there is no trace or no cycle in it."""
    from benchmark.core.errors import BenchError
    from benchmark.tools import cycle_phases, trace_summary

    traces = sorted(trace_summary.trace_files(folder), key=lambda p: ("TP-0" not in p.name, p.name))
    if not traces:
        return {}
    try:
        stats, _, _ = cycle_phases.analyse(trace_summary.load_trace(traces[0]), traces[0].name)
    except BenchError:
        return {}
    return {"gpu_busy_ms": (stats.gpu_busy_ms, stats.cycles), "gpu_idle_frac": (stats.gpu_idle_frac, stats.cycles),
            "graph_starved_ms": (stats.graph_starved_ms, stats.cycles)}


def _settled(path: Path) -> bool:
    size = path.stat().st_size
    time.sleep(0.5)
    return size > 0 and path.stat().st_size == size
