"""The result file: records round-trip through results.json, bad records are refused by name."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

if str(Path(__file__).resolve().parents[1]) not in sys.path:  # the benchmark package
    sys.path.append(str(Path(__file__).resolve().parents[1]))

from benchmark import summary  # noqa: E402
from benchmark.errors import BenchError  # noqa: E402
from benchmark.schema import SCHEMA, Direction, Record, ResultSet  # noqa: E402


def sample() -> ResultSet:
    return ResultSet(
        meta={"name": "20261130-1200-h200x2-sweep", "gpu": "NVIDIA H200"},
        records=[
            Record("stock", "tp2-pcie", "triton", "verify", 16, 4, 4, "latency_ms", 0.731, tp=2, graph=True,
                   p20=0.72, p80=0.74, n=20, ctx=1024, floor_ms=0.0123, floor_bytes=59000000.0,
                   extra={"runner": "built", "graph_max_bs": 64}),
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
    assert head.split()[-5:] == ["stock", "fork", "ratio", "floor", "ms"]
    # stock 2 ms on a graph, fork 1 ms eager, fork/stock 0.5, floor 0.5 ms
    assert row.split()[-6:] == ["2", "G", "1", "E", "0.500", "0.5000"]
