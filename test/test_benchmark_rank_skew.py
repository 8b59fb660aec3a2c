"""Transfer vs waiting in collectives across TP ranks (benchmark/tools/rank_skew.py) on synthetic traces."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from benchmark.core.errors import BenchError
from benchmark.tools import rank_skew

AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"
AG = "ncclDevKernel_AllGather_RING_LL"


def write_trace(path: Path, kernels: list[tuple[str, float, float]]) -> None:
    events = [{"ph": "X", "cat": "kernel", "name": n, "ts": ts, "dur": dur} for n, ts, dur in kernels]
    events.append({"ph": "X", "cat": "cpu_op", "name": AR, "ts": 0, "dur": 999})  # not a GPU kernel
    with gzip.open(path, "wt") as f:
        json.dump({"traceEvents": events}, f)


def test_the_shorter_rank_is_the_transfer_and_the_rest_is_waiting(tmp_path, capsys):
    # Rank 1 reaches the first all-reduce late (rank 0 waits 40), rank 0 the second (rank 1 waits 20).
    write_trace(tmp_path / "p-TP-0.trace.json.gz", [(AR, 0, 50), ("nvjet_gemm", 60, 30), (AR, 100, 12),
                                                   (AG, 200, 21)])
    write_trace(tmp_path / "p-TP-1.trace.json.gz", [(AR, 40, 10), (AR, 80, 32), (AG, 190, 30)])
    result = rank_skew.skew(rank_skew.durations_of_folder(tmp_path))
    ar = result["nccl_allreduce"]
    assert ar["count"] == 2 and ar["transfer_us"] == 22.0 and ar["transfer_us_per_call"] == 11.0
    assert ar["total_us"] == {"0": 62.0, "1": 42.0} and ar["wait_us"] == {"0": 40.0, "1": 20.0}
    assert result["nccl_allgather"]["wait_us"] == {"0": 0.0, "1": 9.0}
    assert "custom_allreduce" not in result
    assert rank_skew.main([str(tmp_path), "--json", str(tmp_path / "s.json"),
                           "--durations", str(tmp_path / "d.json")]) == 0
    assert "nccl_allreduce" in capsys.readouterr().out
    assert json.loads((tmp_path / "d.json").read_text())[str(tmp_path)]["1"]["nccl_allreduce"] == [10.0, 32.0]


def test_unaligned_sequences_and_one_rank_are_refused(tmp_path, capsys):
    write_trace(tmp_path / "p-TP-0.trace.json.gz", [(AR, 0, 5), (AR, 10, 5)])
    with pytest.raises(BenchError, match="at least two ranks"):
        rank_skew.skew(rank_skew.durations_of_folder(tmp_path))
    write_trace(tmp_path / "p-TP-1.trace.json.gz", [(AR, 0, 5)])
    with pytest.raises(BenchError, match=r"\[2, 1\] kernels"):
        rank_skew.skew(rank_skew.durations_of_folder(tmp_path))
    assert rank_skew.main([str(tmp_path)]) == 2
    assert "do not align" in capsys.readouterr().err
