"""The result file: records round-trip through results.json, bad records are refused by name."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from benchmark.core.errors import BenchError
from benchmark.driver import compare, summary
from benchmark.driver.schema import SCHEMA, Direction, Record, ResultSet


def sample() -> ResultSet:
    return ResultSet(
        meta={"name": "20261130-1200-h200x2-sweep", "gpu": "NVIDIA H200"},
        records=[
            Record("stock", "tp2-pcie", "triton", "verify", 16, 4, 4, "latency_ms", 0.731, tp=2, graph=True,
                   p20=0.72, p80=0.74, n=60, ctx=1024, floor_ms=0.0123, floor_bytes=59000000.0,
                   extra={"runner": "built", "graph_max_bs": 64}, rounds=[0.74, 0.731, 0.70], lo=0.70, hi=0.74),
            Record("fork", "tp1", "default", "decode", 1, 1, 0, "wall_ms", 0.5, graph=False),
            Record("fork", "tp1", "triton", "e2e_spec", 64, 4, 1, "tokens_per_s", 12345.6, extra={"seconds": 1.3}),
        ],
        processes=[{"job": "micro-stock-tp2-pcie-triton", "status": "ok", "seconds": 61.0}],
        errors=[{"job": "e2e-fork-tp1-triton", "where": "e2e_spec bs=1 k=4 topk=1", "error": "ValueError: x"}],
    )


def test_round_trip_keeps_every_field(tmp_path: Path):
    original = sample()
    original.save(tmp_path / "results.json")
    loaded = ResultSet.load(tmp_path)  # a folder means its results.json
    assert [asdict(r) for r in loaded.records] == [asdict(r) for r in original.records]
    assert loaded.meta == original.meta and loaded.processes == original.processes
    assert loaded.errors == original.errors
    assert json.loads((tmp_path / "results.json").read_text())["schema"] == SCHEMA


def test_round_spread_is_kept_and_shown():
    (loaded,) = [r for r in sample().records if r.rounds]
    assert loaded.interval() == (0.70, 0.74) and loaded.spread_label() == "[0.7..0.74] x3"
    single = sample().records[1]
    assert single.interval() == (0.5, 0.5) and single.spread_label() == "(1 round)"


V1 = {"schema": "sglang-fastpath-bench/1", "meta": {"name": "old"}, "processes": [], "errors": [],
      "records": [{"variant": "stock", "config": "tp1", "backend": "triton", "mode": "decode", "bs": 1, "k": 1,
                   "topk": 0, "metric": "latency_ms", "value": 1.47, "tp": 1, "graph": True, "p20": 1.42,
                   "p80": 1.50, "n": 10, "ctx": 1024, "floor_ms": 0.59, "floor_bytes": 2812321792,
                   "extra": {"runner": "built"}}]}


def test_schema_1_files_are_read_as_one_round(tmp_path: Path):
    (tmp_path / "results.json").write_text(json.dumps(V1))
    (record,) = ResultSet.load(tmp_path).records
    assert (record.value, record.rounds, record.lo, record.hi) == (1.47, [], None, None)
    assert record.interval() == (1.47, 1.47)  # the p20..p80 of one process is not a between-run spread
    ResultSet.load(tmp_path).save(tmp_path / "again.json")  # written back as the current schema
    assert json.loads((tmp_path / "again.json").read_text())["schema"] == SCHEMA == "sglang-fastpath-bench/2"


def test_the_committed_schema_1_baseline_still_compares():
    """The 2026-11-30 baseline: one round per variant, so its 12 threshold-only "regressions" stand."""
    path = Path(__file__).resolve().parents[1] / "benchmark/results/20261130-0312-h200x2-baseline-dense4/results.json"
    results = ResultSet.load(path)
    assert all(r.rounds == [] for r in results.records) and len(results.records) == 128
    comparison = compare.compare_variants(results, "stock", "fork", metrics=("latency_ms",))
    assert len(comparison.regressions) == 12 and len(comparison.moves) == 21
    assert all("(1 round) ->" in m.line() for m in comparison.moves)


def test_key_order_and_direction():
    r = sample().records[0]
    assert r.key() == ("stock", "tp2-pcie", "triton", "verify", 16, 4, 4, "latency_ms")
    assert r.direction is Direction.LOWER
    assert sample().records[2].direction is Direction.HIGHER


@pytest.mark.parametrize("field,value,message", [("mode", "prefill", "record mode 'prefill'"),
                                                 ("metric", "ms", "record metric 'ms'")])
def test_unknown_mode_or_metric_is_refused(field, value, message):
    data = asdict(sample().records[0])
    data[field] = value
    with pytest.raises(BenchError, match=message):
        Record.from_dict(data)


def test_missing_field_is_named():
    data = asdict(sample().records[0])
    del data["bs"]
    with pytest.raises(BenchError, match="lacks bs"):
        Record.from_dict(data)


def test_not_a_results_file(tmp_path: Path):
    with pytest.raises(BenchError, match="no such results file"):
        ResultSet.load(tmp_path / "nothing.json")
    (tmp_path / "x.json").write_text("not json")
    with pytest.raises(BenchError, match="not JSON"):
        ResultSet.load(tmp_path / "x.json")


def test_summary_table_shows_graph_flags_ratio_and_floor():
    results = ResultSet(records=[
        Record("stock", "tp1", "triton", "verify", 8, 4, 1, "latency_ms", 2.0, graph=True, floor_ms=0.5, ctx=1024),
        Record("fork", "tp1", "triton", "verify", 8, 4, 1, "latency_ms", 1.0, graph=False, floor_ms=0.5, ctx=1024),
    ])
    head, row = summary.table(results).splitlines()
    assert head.split()[-8:] == ["stock", "range", "fork", "range", "ratio", "verdict", "floor", "ms"]
    # stock 2 ms on a graph, fork 1 ms eager (one round each: no range), fork/stock 0.5, graph lost, floor 0.5
    assert row.split()[-10:] == ["2", "G", "-", "1", "E", "-", "0.500", "GRAPH", "LOST", "0.5000"]


def test_summary_table_prints_each_spread_and_calls_overlap_noise():
    def rec(variant: str, bs: int, rounds: list[float]) -> Record:
        values = sorted(rounds)
        return Record(variant, "tp1", "triton", "decode", bs, 1, 0, "latency_ms", values[len(values) // 2],
                      graph=True, rounds=rounds, lo=values[0], hi=values[-1])

    results = ResultSet(records=[rec("stock", 1, [1.0, 0.9, 1.1]), rec("fork", 1, [1.1, 1.0, 1.2]),
                                 rec("stock", 8, [1.0, 0.99, 1.01]), rec("fork", 8, [1.2, 1.21, 1.19])])
    _head, noisy, real = summary.table(results).splitlines()
    # +10% past the 5% threshold, but the rounds overlap (0.9..1.1 against 1.0..1.2): noise
    assert noisy.split()[-8:] == ["1", "G", "20.0%", "1.1", "G", "18.2%", "1.100", "noise"]
    # +20% and 0.99..1.01 against 1.19..1.21: a real move
    assert real.split()[-8:] == ["1", "G", "2.0%", "1.2", "G", "1.7%", "1.200", "WORSE"]
