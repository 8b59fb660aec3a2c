"""benchmark/driver/plot.py: the step and e2e PNGs of a results.json, written beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="in test/requirements-cpu.txt")

from benchmark.driver import plot
from benchmark.driver.schema import Record, ResultSet


def results() -> ResultSet:
    records = []
    for variant, scale in (("stock", 1.0), ("fork", 0.8)):
        for bs in (1, 8, 64):
            records.append(Record(variant, "tp2-pcie", "triton", "decode", bs, 1, 0, "latency_ms", 0.3 * scale,
                                  graph=True, floor_ms=0.01, ctx=1024, rounds=[0.3 * scale, 0.28 * scale, 0.33 * scale],
                                  lo=0.28 * scale, hi=0.33 * scale))
            for topk in (1, 4):
                for k in (2, 4):
                    records.append(Record(variant, "tp2-pcie", "triton", "verify", bs, k, topk, "latency_ms",
                                          0.4 * k * scale, graph=bs < 64, floor_ms=0.02, ctx=1024))
            records.append(Record(variant, "tp1", "triton", "e2e_spec", bs, 4, 1, "tokens_per_s", 900.0 * bs))
    return ResultSet(records=records)


def test_one_png_per_config_backend_topk_and_per_e2e_config(tmp_path: Path, capsys):
    results().save(tmp_path / "results.json")
    assert plot.main([str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.glob("*.png"))
    assert names == ["e2e_tp1_triton.png", "step_tp2-pcie_triton_topk1.png", "step_tp2-pcie_triton_topk4.png"]
    for png in tmp_path.glob("*.png"):
        data = png.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert capsys.readouterr().out.count(".png") == 3


def test_usage_and_missing_file(tmp_path: Path, capsys):
    assert plot.main([]) == 2
    assert plot.main([str(tmp_path / "none.json")]) == 2
    assert "no such results file" in capsys.readouterr().err
