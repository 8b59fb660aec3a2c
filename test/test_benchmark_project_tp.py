"""The TP=N projection: ring fit at TP=2, evaluation at N, the verify all-reduce count, bad inputs."""

from __future__ import annotations

import json

import pytest

from benchmark.core.errors import BenchError
from benchmark.tools import project_tp

LLAMA = {"hidden_size": 4096, "num_hidden_layers": 8, "vocab_size": 128256, "num_attention_heads": 32,
         "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 14336, "torch_dtype": "bfloat16"}


def test_fit_recovers_latency_and_bandwidth_and_scales_with_ranks():
    alpha, bw = 5.0, 20_000.0  # us, bytes per us
    points = [(s, 2 * alpha + s / bw) for s in (8192, 65536, 1 << 20)]
    fa, fb = project_tp.fit_ring(points)
    assert fa == pytest.approx(alpha) and fb == pytest.approx(bw)
    assert project_tp.ring_us(2, 1 << 20, alpha, bw) == pytest.approx(2 * alpha + (1 << 20) / bw)
    assert project_tp.ring_us(8, 1 << 20, alpha, bw) == pytest.approx(14 * alpha + 1.75 * (1 << 20) / bw)
    with pytest.raises(BenchError, match="two message sizes"):
        project_tp.fit_ring(points[:1])
    with pytest.raises(BenchError, match="no positive"):
        project_tp.fit_ring([(1000, 50.0), (2000, 10.0)])


def test_main_projects_a_verify_step(tmp_path, capsys):
    records = [{"method": "pynccl_graph", "bytes": s, "us": 10.0 + s / 25_000} for s in (8192, 262144, 1 << 21)]
    ar = tmp_path / "ar.json"
    ar.write_text(json.dumps({"world": 2, "records": records}))
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA))
    out = tmp_path / "p.json"
    assert project_tp.main(["--ar", str(ar), "--config", str(config), "--tp", "2,8", "--bs", "1", "--json",
                            str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [r["all_reduces"] for r in rows] == [17, 17] and rows[0]["message_bytes"] == 4 * 4096 * 2
    assert rows[0]["us_per_all_reduce"] == pytest.approx(10.0 + 32768 / 25_000, abs=0.05)
    assert rows[1]["all_reduce_ms"] > rows[0]["all_reduce_ms"] and rows[1]["floor_ms"] < rows[0]["floor_ms"]
    assert "PROJECTION" in capsys.readouterr().out
    ar.write_text(json.dumps({"world": 4, "records": records}))
    assert project_tp.main(["--ar", str(ar), "--config", str(config)]) == 2
    assert "world 4" in capsys.readouterr().err
