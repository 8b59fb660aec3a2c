"""The GPU-bound ratio of speculation, recorded per process: rank 0's cycle figures from a profiled e2e
trace (``engine_probes.cycle_figures``) and the driver's derived ``gpu_bound_ratio`` /
``share_of_gpu_bound`` (``collect.derive_gpu_bound``, applied to each process's records)."""

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
    assert {r.metric for r in got} >= {"gpu_bound_ratio", "share_of_gpu_bound"}


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
