"""benchmark/tools/cycle_phases.py on synthetic torch-profiler traces with known phases and GPU work."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from benchmark.core.errors import BenchError
from benchmark.tools import cycle_phases

SCHED = 7  # the scheduler thread
OTHER = 9  # a gloo thread: its spans must not count


class TraceBuilder:
    """Events in µs: CPU spans on a thread, CUDA launches with correlation ids, GPU kernels."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.corr = 0

    def span(self, name: str, ts: float, dur: float, tid: int = SCHED) -> None:
        self.events.append({"ph": "X", "cat": "user_annotation", "name": name, "ts": ts, "dur": dur, "tid": tid})

    def launch(self, ts: float, gpu_ts: float, gpu_dur: float, api: str = "cudaLaunchKernel",
               kernel: str = "some_gemm_kernel", cat: str = "kernel", call_dur: float = 3.0) -> None:
        self.corr += 1
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": api, "ts": ts, "dur": call_dur, "tid": SCHED,
                            "args": {"correlation": self.corr}})
        self.gpu_op(gpu_ts, gpu_dur, kernel, cat)

    def gpu_op(self, ts: float, dur: float, kernel: str = "some_gemm_kernel", cat: str = "kernel") -> None:
        """One more GPU op of the last launch (a graph replay's next kernel)."""
        self.events.append({"ph": "X", "cat": cat, "name": kernel, "ts": ts, "dur": dur, "tid": 100,
                            "args": {"correlation": self.corr}})

    def call(self, api: str, ts: float, dur: float) -> None:
        """A runtime call on the scheduler thread that launches nothing on the GPU."""
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": api, "ts": ts, "dur": dur, "tid": SCHED,
                            "args": {"correlation": 10_000 + len(self.events)}})

    def sync(self, ts: float, dur: float, api: str = "cudaEventSynchronize") -> None:
        self.call(api, ts, dur)


def write_trace(folder: Path, events: list[dict[str, Any]], name: str = "1-TP-0.trace.json.gz") -> Path:
    """``events`` as a gzipped torch-profiler trace in ``folder`` (made if missing); its path."""
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))
    return path


def spec_cycle(t: TraceBuilder, start: float) -> None:
    """One 10 ms EAGLE-3 cycle: run_batch 0..7 ms (draft 1-2, verify 3-4, extend 5-6), then the loop."""
    t.span("scheduler.run_batch", start, 7000)
    t.span("draft", start + 1000, 1000)
    t.launch(start + 1500, start + 1600, 400, api="cudaGraphLaunch", kernel="draft_graph_kernel")
    t.span("step[TARGET_VERIFY bs=1]", start + 3000, 1000)
    t.launch(start + 3500, start + 3600, 2000, api="cudaGraphLaunch", kernel="Marlin<moe>")
    t.launch(start + 4500, start + 5600, 100, kernel="argmax_kernel")  # accept: eager
    t.span("draft_extend", start + 5000, 1000)
    t.launch(start + 5500, start + 5700, 300, api="cudaGraphLaunch", kernel="extend_graph_kernel")
    t.launch(start + 6500, start + 6500, 5, api="cudaMemcpyAsync", kernel="Memcpy DtoH (Device -> Pinned)",
             cat="gpu_memcpy")
    t.span("scheduler.process_batch_result", start + 7000, 500)
    t.sync(start + 7100, 200)
    t.span("scheduler.recv_requests", start + 7600, 1000)
    t.span("gloo:broadcast", start + 7700, 900, tid=OTHER)
    t.span("scheduler.process_input_requests", start + 8700, 100)
    t.span("scheduler.get_next_batch_to_run", start + 9000, 500)


def spec_trace(cycles: int = 5) -> list[dict[str, Any]]:
    t = TraceBuilder()
    t.span("scheduler.run_batch", 0, 3000)  # a prefill batch first: not a cycle
    t.span("step[EXTEND bs=1 toks=128]", 500, 2000)
    for i in range(cycles + 1):  # the last run_batch only closes the cycle before it
        spec_cycle(t, 10_000 + 10_000 * i)
    return t.events


def test_cycles_phases_and_gpu_of_a_spec_trace() -> None:
    stats, cycles, _ = cycle_phases.analyse(spec_trace(), "spec")
    assert len(cycles) == 5 and stats.cycles == 4  # prefill skipped; the first cycle dropped as warm-up
    assert (stats.mode, stats.bs) == ("TARGET_VERIFY", 1)
    assert stats.wall_ms == pytest.approx(10.0)
    expected_cpu = {"prepare": 1.0, "draft": 1.0, "draft_to_verify": 1.0, "target_forward": 1.0, "accept": 1.0,
                    "draft_extend": 1.0, "run_tail": 1.0, "result": 0.5, "recv": 1.1, "schedule": 0.5,
                    "loop_other": 0.9}
    assert stats.cpu_ms == pytest.approx(expected_cpu)
    assert sum(stats.cpu_ms.values()) == pytest.approx(stats.wall_ms)
    assert stats.gpu_ms == pytest.approx({"draft": 0.4, "target_forward": 2.0, "accept": 0.1,
                                          "draft_extend": 0.3, "run_tail": 0.005})
    # busy: draft 0.4 + verify 2.0 (to 5.6) + argmax 0.1 (5.6-5.7) + extend 0.3 (5.7-6.0) + copy
    assert stats.gpu_busy_ms == pytest.approx(2.805)
    assert stats.gpu_idle_frac == pytest.approx(1 - 2.805 / 10.0, abs=1e-4)
    assert stats.gpu_categories_ms["moe"] == pytest.approx(2.0)
    assert stats.syncs_per_cycle["cudaEventSynchronize"] == 1 and stats.sync_wait_ms == pytest.approx(0.2)
    assert stats.d2h_copies_per_cycle == 1
    assert stats.launches_per_cycle == {"kernel": 1, "graph": 3}


def test_gpu_work_running_late_counts_in_the_window_it_runs_in() -> None:
    t = TraceBuilder()
    for i in range(4):  # decode steps launched at +1 ms whose kernels run 9.5 ms later, past the window
        s = 10_000 * i
        t.span("scheduler.run_batch", s, 2000)
        t.span("step[DECODE bs=8]", s + 500, 1000)
        t.launch(s + 1000, s + 10_500, 3000, api="cudaGraphLaunch")
    stats, _, tallies = cycle_phases.analyse(t.events, "late")
    assert stats.mode == "DECODE" and stats.bs == 8
    assert stats.gpu_ms == {"target_forward": pytest.approx(3.0)}  # attributed to the launching phase
    # cycle 1 (10..20 ms) sees the tail of cycle 0's kernel (10.5..13.5): busy 3 ms of 10
    assert stats.gpu_busy_ms == pytest.approx(3.0)
    assert tallies[0].gpu_busy == 0.0


def test_no_cycle_is_a_clear_error(tmp_path: Path) -> None:
    t = TraceBuilder()
    t.span("scheduler.run_batch", 0, 3000)
    t.span("step[EXTEND bs=1 toks=128]", 500, 2000)
    t.span("scheduler.run_batch", 5000, 3000)
    with pytest.raises(BenchError, match="no decode or verify cycle"):
        cycle_phases.analyse(t.events, "prefill-only")
    with pytest.raises(BenchError, match="no scheduler.run_batch"):
        cycle_phases.analyse([{"cat": "kernel", "name": "k", "ts": 0, "dur": 1}], "not-sglang")
    assert cycle_phases.main([str(write_trace(tmp_path, t.events, "t.trace.json.gz"))]) == 2


def test_cli_table_json_and_gpu_bound_ratio(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec_dir, decode_dir = tmp_path / "e2e_spec-bs1", tmp_path / "e2e_nospec-bs1"
    write_trace(spec_dir, spec_trace())
    t = TraceBuilder()
    for i in range(5):
        s = 5000 * i
        t.span("scheduler.run_batch", s, 2000)
        t.span("step[DECODE bs=1]", s + 500, 1000)
        t.launch(s + 1000, s + 1200, 1403, api="cudaGraphLaunch")
    write_trace(decode_dir, t.events)
    out = tmp_path / "cycles.json"
    assert cycle_phases.main([str(decode_dir), str(spec_dir), "--json", str(out), "--accept-len", "3"]) == 0
    printed = capsys.readouterr().out
    assert "TARGET_VERIFY" in printed and "DECODE" in printed
    # GPU-bound ratio: decode 1.403 ms per token against 2.805 ms per 3 tokens = 1.50x
    assert "gpu-bound ratio bs=1 (TP-0): 1.50x" in printed
    rows = json.loads(out.read_text())
    assert [r["mode"] for r in rows] == ["DECODE", "TARGET_VERIFY"]


def test_timeline_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from benchmark.tools.cycle_timeline import draw

    events = spec_trace()
    _, cycles, _ = cycle_phases.analyse(events, "spec")
    out = tmp_path / "timeline.png"
    draw([("spec", cycles, events)], out, 2)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


def test_timeline_marks_the_graph_launch_calls_of_the_drawn_cycles() -> None:
    from benchmark.tools.cycle_timeline import _graph_launch_bars

    events = spec_trace()
    _, cycles, _ = cycle_phases.analyse(events, "spec")
    bars = _graph_launch_bars(events, cycles, cycles[2].start, cycles[3].end)
    start = cycles[2].start  # draft 1.5 ms, verify 3.5 ms, draft extend 5.5 ms into each cycle; 3 µs calls
    assert bars == [(start + 1500, start + 1503), (start + 3500, start + 3503), (start + 5500, start + 5503),
                    (start + 11_500, start + 11_503), (start + 13_500, start + 13_503),
                    (start + 15_500, start + 15_503)]


def test_eager_launches_by_phase_leave_graph_replays_out(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    events = spec_trace()
    _, cycles, _ = cycle_phases.analyse(events, "spec")
    per = cycle_phases.launches_by_phase(events, cycles)
    assert dict(per) == {"accept": {"argmax_kernel": 5}, "run_tail": {"Memcpy DtoH (Device -> Pinned)": 5}}
    lines = cycle_phases.launch_lines(per, len(cycles), 3)
    assert lines[0] == "accept: 1.0 eager launches per cycle" and lines[1].split() == ["1.0", "argmax_kernel"]
    path = tmp_path / "e2e_spec-bs1"
    write_trace(path, events)
    assert cycle_phases.main([str(path), "--launches", "2"]) == 0
    assert "run_tail: 1.0 eager launches per cycle" in capsys.readouterr().out


def test_driver_api_launches_count_like_runtime_ones() -> None:
    """Triton launches through cuLaunchKernel (cat cuda_driver): counted in the cycle and in its phase."""
    t = TraceBuilder()
    t.events = spec_trace()
    t.corr = 5000
    for i in range(6):
        t.launch(10_000 + 10_000 * i + 4700, 10_000 + 10_000 * i + 5650, 10, api="cuLaunchKernel",
                 kernel="triton_accept_kernel")
    for e in t.events:
        if e.get("name") == "cuLaunchKernel":
            e["cat"] = "cuda_driver"
    stats, cycles, _ = cycle_phases.analyse(t.events, "spec")
    assert stats.launches_per_cycle == {"kernel": 2, "graph": 3}
    assert cycle_phases.launches_by_phase(t.events, cycles)["accept"] == {"argmax_kernel": 5, "triton_accept_kernel": 5}


def test_slow_cuda_calls_are_tallied_by_phase_and_name(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A call that holds the host (here a 300 µs pageable copy in `prepare`) shows; 3 µs launches and the
    syncs (counted apart) do not."""
    t = TraceBuilder()
    t.span("scheduler.run_batch", 0, 3000)
    for i in range(6):
        start = 10_000 + 10_000 * i
        spec_cycle(t, start)
        t.call("cudaMemcpyAsync", start + 200, 300.0)
    stats, _, _ = cycle_phases.analyse(t.events, "spec")
    assert stats.slow_calls_ms == {"prepare: cudaMemcpyAsync": pytest.approx(0.3)}
    assert stats.slow_call_ms == pytest.approx(0.3)
    folder = tmp_path / "e2e_spec-bs1"
    write_trace(folder, t.events)
    assert cycle_phases.main([str(folder), "--slow-calls"]) == 0
    out = capsys.readouterr().out
    assert "slow CUDA calls" in out and "0.300  prepare: cudaMemcpyAsync" in out


def test_graph_launch_starving_the_gpu_is_measured_per_phase(capsys: pytest.CaptureFixture[str],
                                                               tmp_path: Path) -> None:
    """A verify graph launched onto an idle GPU: its call holds the host 1 ms, its first kernel runs after
    0.1 ms, and until the call returns the GPU runs only 0.2 ms of its kernels (starved 0.7 ms). The draft
    graph, launched while the GPU is busy, starts after its call returned: no starving."""
    t = TraceBuilder()
    t.span("scheduler.run_batch", 0, 3000)
    for i in range(5):
        s = 10_000 * i
        t.span("scheduler.run_batch", s, 8000)
        t.span("draft", s + 1000, 1000)
        t.launch(s + 900, s + 1000, 1200, kernel="busy_kernel")  # keeps the GPU busy past the draft launch
        t.launch(s + 1500, s + 2200, 300, api="cudaGraphLaunch", kernel="draft_graph_kernel", call_dur=200)
        t.span("step[TARGET_VERIFY bs=1]", s + 3000, 2000)
        t.launch(s + 3500, s + 3600, 100, api="cudaGraphLaunch", kernel="verify_kernel", call_dur=1000)
        t.gpu_op(s + 4200, 100, "verify_kernel")
        t.gpu_op(s + 5000, 1000, "verify_kernel")  # after the call returned (4.5 ms): not starved
    stats, _, _ = cycle_phases.analyse(t.events, "spec")
    assert stats.graph_launches_ms == {
        "draft": {"host": pytest.approx(0.2), "first_op": pytest.approx(0.7), "starved": 0.0},
        "target_forward": {"host": pytest.approx(1.0), "first_op": pytest.approx(0.1), "starved": pytest.approx(0.7)},
    }
    assert stats.graph_starved_ms == pytest.approx(0.7)
    folder = tmp_path / "e2e_spec-bs1"
    write_trace(folder, t.events)
    assert cycle_phases.main([str(folder), "--graphs"]) == 0
    out = capsys.readouterr().out
    assert "GPU starved in all 0.700" in out
    assert "target_forward   launch   1.000  first op after   0.100  starved   0.700" in out


def test_graph_launches_that_return_before_their_first_gpu_op_never_starve() -> None:
    stats, _, _ = cycle_phases.analyse(spec_trace(), "spec")
    assert set(stats.graph_launches_ms) == {"draft", "target_forward", "draft_extend"}
    assert stats.graph_starved_ms == 0.0  # every call (3 µs) returns before its first GPU op
