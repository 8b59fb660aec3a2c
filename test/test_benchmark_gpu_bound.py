"""The GPU-bound ratio of speculation, recorded per process: rank 0's cycle figures from a profiled e2e
trace (``engine_probes.cycle_figures``) and the driver's derived ``gpu_bound_ratio`` /
``share_of_gpu_bound`` (``collect.derive_gpu_bound``, applied to each process's records), and the GPU idle
share of the timed runs (``collect.derive_timed_idle``)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from profiler_steps import step_events, write_trace

from benchmark.driver import collect
from benchmark.driver.schema import Record
from benchmark.worker import engine_probes

BASE = {"variant": "fork", "config": "tp1", "backend": "triton", "tp": 1}


def rec(mode: str, bs: int, metric: str, value: float) -> dict[str, Any]:
    k, topk = (4, 1) if mode == "e2e_spec" else (0, 0)
    return {"mode": mode, "bs": bs, "k": k, "topk": topk, "metric": metric, "value": value}


# kimi16 at TP 1, bs 1 (benchmark/results/20261202-0248-h200-tp1-kimi16-real-accept3-stock-vs-fork)
KIMI16_BS1 = [rec("e2e_nospec", 1, "tokens_per_s", 246.53), rec("e2e_nospec", 1, "gpu_busy_ms", 3.6909),
              rec("e2e_spec", 1, "tokens_per_s", 395.61), rec("e2e_spec", 1, "accept_len", 2.98),
              rec("e2e_spec", 1, "gpu_busy_ms", 6.5656)]


def records(rows: list[dict[str, Any]]) -> list[Record]:
    return [Record.from_dict({**row, **BASE}) for row in rows]


def test_the_ratio_and_its_share_come_from_one_process_figures() -> None:
    derived = {r.metric: r for r in collect.derive_gpu_bound(records(KIMI16_BS1))}
    assert set(derived) == {"gpu_bound_ratio", "share_of_gpu_bound"}
    ratio = derived["gpu_bound_ratio"]
    assert (ratio.mode, ratio.bs, ratio.k, ratio.topk, ratio.variant) == ("e2e_spec", 1, 4, 1, "fork")
    assert ratio.value == pytest.approx(3.6909 * 2.98 / 6.5656, abs=1e-4)  # 1.675: the run's README says 1.68x
    assert derived["share_of_gpu_bound"].value == pytest.approx((395.61 / 246.53) / ratio.value, abs=1e-4)  # 96%
    assert derived["share_of_gpu_bound"].extra["measured_ratio"] == pytest.approx(1.6047, abs=1e-4)


@pytest.mark.parametrize("dropped", ["gpu_busy_ms@e2e_nospec", "accept_len@e2e_spec", "gpu_busy_ms@e2e_spec"])
def test_nothing_is_derived_without_both_profiles_and_the_accept_length(dropped: str) -> None:
    metric, mode = dropped.split("@")
    rows = [r for r in KIMI16_BS1 if (r["metric"], r["mode"]) != (metric, mode)]
    assert collect.derive_gpu_bound(records(rows)) == []


def test_decode_rates_give_a_share_without_the_prefill() -> None:
    """With both engines' decode_tokens_per_s, decode_share_of_gpu_bound sets their ratio against the same
    GPU-bound ratio (made-up rates: 400 over 250 decode tokens/s)."""
    rows = KIMI16_BS1 + [rec("e2e_nospec", 1, "decode_tokens_per_s", 250.0),
                         rec("e2e_spec", 1, "decode_tokens_per_s", 400.0)]
    derived = {r.metric: r for r in collect.derive_gpu_bound(records(rows))}
    assert set(derived) == {"gpu_bound_ratio", "share_of_gpu_bound", "decode_share_of_gpu_bound"}
    ratio = derived["gpu_bound_ratio"].value
    assert derived["decode_share_of_gpu_bound"].value == pytest.approx(1.6 / ratio, abs=1e-4)
    assert derived["decode_share_of_gpu_bound"].extra["measured_ratio"] == 1.6
    assert derived["share_of_gpu_bound"].value == pytest.approx((395.61 / 246.53) / ratio, abs=1e-4)


def test_without_tokens_per_second_only_the_ratio_is_derived() -> None:
    rows = [r for r in KIMI16_BS1 if r["metric"] != "tokens_per_s"]
    assert [r.metric for r in collect.derive_gpu_bound(records(rows))] == ["gpu_bound_ratio"]


def test_each_process_gets_its_own_derived_records() -> None:
    """records_of derives within one process's lines, so each round's ratio is its own process's."""
    lines = [{"type": "record", **row} for row in KIMI16_BS1]
    job = SimpleNamespace(variant=SimpleNamespace(name="fork"), parallel=SimpleNamespace(name="tp1", tp=1),
                          backend="triton", name="e2e-fork-tp1-triton", series="e2e-fork-tp1-triton", round=1)
    outcome = SimpleNamespace(job=job, lines=lines, status="ok", note="", rc=0, log="log")
    got, errors = collect.records_of(outcome)
    assert errors == []
    assert {r.metric for r in got} >= {"gpu_bound_ratio", "share_of_gpu_bound", "timed_gpu_idle_frac"}


def test_cycle_figures_read_rank_0s_trace(tmp_path: Path) -> None:
    write_trace(tmp_path / "2-TP-1.trace.json.gz", step_events("DECODE", 700.0, 6))
    write_trace(tmp_path / "1-TP-0.trace.json.gz", step_events("DECODE", 400.0, 6))
    figures = engine_probes.cycle_figures(tmp_path)
    assert figures["gpu_busy_ms"] == (pytest.approx(0.4), 4)  # 5 cycles, the first dropped as warm-up
    assert figures["gpu_idle_frac"][0] == pytest.approx(0.6)
    assert figures["graph_starved_ms"][0] == 0.0


def test_cycle_figures_of_no_trace_or_no_cycle_are_empty(tmp_path: Path) -> None:
    assert engine_probes.cycle_figures(tmp_path) == {}
    write_trace(tmp_path / "1-TP-0.trace.json.gz", [{"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": 1}])
    assert engine_probes.cycle_figures(tmp_path) == {}


# kimi4 at TP 1 (benchmark/results/20261202-0542-h200-tp1-kimi4-real-accept3-stock-vs-fork), fork, bs 1: the
# profiled cycle idled 16.3%, the plain decode step 41.5%
KIMI4_BS1 = [rec("e2e_nospec", 1, "tokens_per_s", 665.272), rec("e2e_nospec", 1, "gpu_busy_ms", 1.41),
             rec("e2e_spec", 1, "tokens_per_s", 815.121), rec("e2e_spec", 1, "accept_len", 2.977),
             rec("e2e_spec", 1, "gpu_busy_ms", 3.27)]


def test_the_timed_idle_share_sets_the_traces_busy_time_against_the_timed_wall_time() -> None:
    """An EAGLE-3 cycle yields accept_len tokens per request, a decode step one: 2.977 / 815.121 tok/s is a
    3.652-ms cycle of which the trace's 3.27 ms are GPU work (10.5% idle, against the profiled 16.3%)."""
    idle = {r.mode: r for r in collect.derive_timed_idle(records(KIMI4_BS1))}
    assert set(idle) == {"e2e_nospec", "e2e_spec"}
    spec = idle["e2e_spec"]
    assert (spec.metric, spec.bs, spec.k, spec.topk) == ("timed_gpu_idle_frac", 1, 4, 1)
    assert spec.extra["timed_wall_ms"] == pytest.approx(2.977 / 815.121 * 1000, abs=1e-3)
    assert spec.value == pytest.approx(1 - 3.27 / (2.977 / 815.121 * 1000), abs=1e-4)
    assert spec.value == pytest.approx(0.1046, abs=1e-3) and spec.extra["rate"] == "tokens_per_s"
    assert idle["e2e_nospec"].value == pytest.approx(1 - 1.41 / (1000 / 665.272), abs=1e-4)


def test_the_timed_idle_share_prefers_the_decode_rate_and_scales_with_the_batch() -> None:
    """decode_tokens_per_s leaves the prefill out; at bs 8 a cycle yields 8 x accept_len tokens."""
    rows = [rec("e2e_spec", 8, "tokens_per_s", 3000.0), rec("e2e_spec", 8, "decode_tokens_per_s", 4000.0),
            rec("e2e_spec", 8, "accept_len", 3.0), rec("e2e_spec", 8, "gpu_busy_ms", 5.4)]
    (idle,) = collect.derive_timed_idle(records(rows))
    assert idle.extra["rate"] == "decode_tokens_per_s"
    assert idle.extra["timed_wall_ms"] == pytest.approx(6.0)  # 24 tokens at 4000 tok/s
    assert idle.value == pytest.approx(0.1)


@pytest.mark.parametrize("dropped", ["gpu_busy_ms", "accept_len", "tokens_per_s"])
def test_no_timed_idle_share_without_the_trace_the_accept_length_or_a_rate(dropped: str) -> None:
    rows = [r for r in KIMI4_BS1 if not (r["mode"] == "e2e_spec" and r["metric"] == dropped)]
    assert [r.mode for r in collect.derive_timed_idle(records(rows))] == ["e2e_nospec"]
