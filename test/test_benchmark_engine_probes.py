"""The e2e engine probes: all-reduce counts per run from the fork's telemetry snapshot."""

from __future__ import annotations

import sys

from benchmark.worker import engine_probes


class FakeEngine:
    def __init__(self, rows: list[dict] | None) -> None:
        self.rows = rows

    def get_server_info(self) -> dict:
        state = {} if self.rows is None else {"all_reduce_stats": {"counts": self.rows}}
        return {"internal_states": [state]}


def row(mode: str, count: int, source: str = "replay", size: str = "16384") -> dict:
    return {"mode": mode, "source": source, "placement": "in_place", "method": "pynccl", "bytes_le": size,
            "count": count}


def test_counts_sum_rows_and_stock_has_none():
    engine = FakeEngine([row("decode", 3), row("decode", 4), row("target_verify", 5, size="65536")])
    counts = engine_probes.all_reduce_counts(engine)
    assert counts == {("decode", "replay", "in_place", "pynccl", "16384"): 7,
                      ("target_verify", "replay", "in_place", "pynccl", "65536"): 5}
    assert engine_probes.all_reduce_counts(FakeEngine(None)) is None


def test_delta_is_this_runs_share_per_token():
    before = engine_probes.all_reduce_counts(FakeEngine([row("decode", 10), row("extend", 2, "eager")]))
    after = engine_probes.all_reduce_counts(FakeEngine([row("decode", 74), row("extend", 2, "eager"),
                                                        row("draft", 8, "eager")]))
    delta = engine_probes.count_delta(before, after)
    assert delta == {("decode", "replay", "in_place", "pynccl", "16384"): 64,
                     ("draft", "eager", "in_place", "pynccl", "16384"): 8}
    rows = engine_probes.delta_rows(delta, tokens=32)
    assert [(r["mode"], r["count"], r["per_token"]) for r in rows] == [("decode", 64, 2.0), ("draft", 8, 0.25)]
    assert engine_probes.count_delta(None, after) is None


def test_profile_run_summarizes_the_trace_the_run_wrote(tmp_path):
    import gzip
    import json

    calls = []

    class ProfilingEngine:
        def start_profile(self, **kwargs):
            calls.append(kwargs)

    def run():  # the scheduler writes its trace when the profiled steps are done
        events = [{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "ts": 0,
                   "dur": 30}, {"ph": "X", "cat": "kernel", "name": "nvjet_gemm", "ts": 40, "dur": 60}]
        with gzip.open(tmp_path / "t" / "p-TP-0.trace.json.gz", "wt") as f:
            json.dump({"traceEvents": events}, f)

    out = engine_probes.profile_run(ProfilingEngine(), run, tmp_path / "t", steps=7, wait_s=5)
    assert calls[0]["num_steps"] == 7 and calls[0]["output_dir"] == str(tmp_path / "t")
    summary = out["p-TP-0.trace.json.gz"]
    assert summary["busy_us"] == 90 and summary["span_us"] == 100
    assert summary["categories"]["nccl_allreduce"]["count"] == 1


def test_profile_run_without_a_trace_says_so(tmp_path):
    class ProfilingEngine:
        def start_profile(self, **kwargs):
            pass

    out = engine_probes.profile_run(ProfilingEngine(), lambda: None, tmp_path / "t", steps=3, wait_s=1.5)
    assert "no trace written" in out["error"]


def _fake_telemetry(monkeypatch, enabled: bool, rows: list[dict]) -> None:
    """A stand-in for the fork's sglang.srt.distributed.all_reduce_stats in this process."""
    import types

    names = ["sglang", "sglang.srt", "sglang.srt.distributed"]
    for name in names:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    stats = types.ModuleType("sglang.srt.distributed.all_reduce_stats")
    stats.ENABLED = enabled
    stats.snapshot = lambda: {"counts": rows, "graph_replays": {}}
    monkeypatch.setitem(sys.modules, stats.__name__, stats)
    sys.modules["sglang.srt.distributed"].all_reduce_stats = stats


def test_local_counts_read_this_process_telemetry(monkeypatch):
    _fake_telemetry(monkeypatch, True, [row("target_verify", 9, source="eager"), row("target_verify", 9, "eager")])
    counts = engine_probes.local_all_reduce_counts()
    assert counts == {("target_verify", "eager", "in_place", "pynccl", "16384"): 18}
    rows = engine_probes.delta_rows(counts, 2, per="per_step")
    assert rows[0]["per_step"] == 9 and "per_token" not in rows[0]


def test_local_counts_are_none_when_telemetry_is_off_or_absent(monkeypatch):
    _fake_telemetry(monkeypatch, False, [row("decode", 1)])
    assert engine_probes.local_all_reduce_counts() is None
    monkeypatch.setitem(sys.modules, "sglang.srt.distributed.all_reduce_stats", None)  # stock: no such module
    assert engine_probes.local_all_reduce_counts() is None
