"""benchmark/graph_launch_cost.py: its statistics and table on any machine, its cases on a GPU."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmark.core.stats import quantile
from benchmark.tools import graph_launch_cost as glc


def test_quantile_interpolates_between_order_statistics() -> None:
    values = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert quantile(values, 0.0) == 1.0
    assert quantile(values, 1.0) == 5.0
    assert quantile(values, 0.5) == 3.0
    assert quantile(values, 0.1) == pytest.approx(1.4)
    with pytest.raises(ValueError):
        quantile([], 0.5)


def test_record_reports_microseconds_per_launch_and_per_node() -> None:
    r = glc.record("busy", 100, [200e-6, 100e-6, 300e-6])
    assert r == {"case": "busy", "kernels": 100, "host_us": 200.0, "p10_us": 120.0, "p90_us": 280.0,
                 "us_per_node": 2.0, "iters": 3}


def test_table_has_a_row_per_case_in_order_and_marks_missing_sizes() -> None:
    records = [glc.record("memcpy", 64, [64e-6]), glc.record("idle", 64, [32e-6]), glc.record("idle", 512, [512e-6])]
    lines = glc.table(records).splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["idle", "memcpy"]  # CASES order, not the records'
    assert lines[0].split() == ["case", "N=64", "us", "us/node", "N=512", "us", "us/node"]
    assert lines[1].split() == ["idle", "32.0", "0.50", "512.0", "1.00"]
    assert lines[2].split() == ["memcpy", "64.0", "1.00", "-", "-"]


def test_a_profiled_case_follows_its_plain_row() -> None:
    records = [glc.record("busy" + glc.PROFILED, 64, [640e-6]), glc.record("idle", 64, [32e-6]),
               glc.record("busy", 64, [64e-6])]
    rows = [line.split()[0] for line in glc.table(records).splitlines()[1:]]
    assert rows == ["idle", "busy", "busy+profiler"]


class _FakeCuda:
    """torch.cuda as the timing loop uses it, on the CPU: graphs record and replay nothing."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    class CUDAGraph:
        def replay(self) -> None:
            pass

    def graph(self, graph):
        self.log.append("capture")
        return contextlib.nullcontext()

    def synchronize(self) -> None:
        pass

    def _sleep(self, cycles: int) -> None:
        pass

    def Stream(self):  # noqa: N802 (torch's name)
        return object()

    def current_stream(self):
        return object()

    def stream(self, stream):
        return contextlib.nullcontext()


def _fake_torch(log: list[str]) -> SimpleNamespace:
    @contextlib.contextmanager
    def profile(activities):
        log.append("profiler on: " + ",".join(activities))
        yield
        log.append("profiler off")

    activity = SimpleNamespace(CPU="CPU", CUDA="CUDA")
    return SimpleNamespace(cuda=_FakeCuda(log), zeros=lambda *a, **k: SimpleNamespace(add_=lambda x: None),
                           profiler=SimpleNamespace(profile=profile, ProfilerActivity=activity))


@pytest.mark.parametrize("profiled", [False, True])
def test_the_timed_launches_alone_run_inside_the_profiler(profiled: bool) -> None:
    log: list[str] = []
    samples = glc.time_case("busy", 8, 3, _fake_torch(log), profiled=profiled)
    assert len(samples) == 3 and all(s >= 0 for s in samples)
    assert log == ["capture"] + (["profiler on: CPU,CUDA", "profiler off"] if profiled else [])  # capture outside


def test_every_clean_point_is_timed_before_the_first_profiled_one() -> None:
    """A profiler slows its process's later launches (session 14's H200 run), so with --profiled all the
    unprofiled points come first, then all the profiled ones, each case and size in both passes."""
    log: list[str] = []
    records = glc.time_all(["idle", "busy"], (8, 16), 2, _fake_torch(log), profiled=True)
    assert [(r["case"], r["kernels"]) for r in records] == [
        ("idle", 8), ("idle", 16), ("busy", 8), ("busy", 16),
        ("idle+profiler", 8), ("idle+profiler", 16), ("busy+profiler", 8), ("busy+profiler", 16)]
    # the four clean points, then the first profiled point's own capture (outside its profiler)
    assert log[:6] == ["capture"] * 5 + ["profiler on: CPU,CUDA"]
    assert [r["case"] for r in glc.time_all(["idle"], (8,), 2, _fake_torch([]), profiled=False)] == ["idle"]


def test_an_unknown_case_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        glc.main(["--cases", "idle,nonsense"])
    assert exc.value.code == 2
    assert "unknown case nonsense" in capsys.readouterr().err


@pytest.mark.gpu
def test_every_case_times_its_graph_on_a_gpu(tmp_path: Path) -> None:
    out = tmp_path / "launch.json"
    assert glc.main(["--kernels", "16,64", "--iters", "5", "--out", str(out)]) == 0
    records = json.loads(out.read_text())["records"]
    cases = {r["case"] for r in records}
    assert cases >= set(glc.CASES) - {"many_args"}
    for r in records:
        assert r["iters"] == 5 and 0 < r["p10_us"] <= r["host_us"] <= r["p90_us"]


@pytest.mark.gpu
def test_profiled_launches_are_timed_inside_the_profiler(tmp_path: Path) -> None:
    out = tmp_path / "launch.json"
    assert glc.main(["--kernels", "16", "--iters", "5", "--cases", "idle", "--profiled", "--out", str(out)]) == 0
    assert [r["case"] for r in json.loads(out.read_text())["records"]] == ["idle", "idle" + glc.PROFILED]
