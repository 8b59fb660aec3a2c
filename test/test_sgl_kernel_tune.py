"""The MoE config tuner's loop on CPU: a fake timer stands in for the GPU (moe_tuning/tune.py)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from moe_tuning.config_file import check_pair, read_configs
from moe_tuning.search_space import KernelConfig, candidates
from moe_tuning.shapes import device, rank_shapes
from moe_tuning.tune import Progress, Trial, TrialLog, tune_gemm, tune_pair, write_pair

SHAPES = rank_shapes(8)
H200 = device("h200")
RTX = device("rtx-pro-6000-server")


class FakeTimer:
    """µs that prefer one config per GEMM (and a BM per M), counting calls; can fail chosen configs."""

    def __init__(self, fail: set[KernelConfig] = frozenset()) -> None:
        self.calls: list[tuple[str, int, KernelConfig]] = []
        self.fail = fail

    def __call__(self, gemm, m: int, cfg: KernelConfig) -> float:
        self.calls.append((gemm.name, m, cfg))
        if cfg in self.fail:
            raise RuntimeError("out of resources: shared memory")
        want_bm = 16 if m <= 16 else 32
        return (10.0 + abs(cfg.block_n - (64 if gemm.name == "down" else 128)) / 8 + abs(cfg.block_k - 128) / 64
                + cfg.num_warps / 4 + cfg.num_stages / 10 + (0 if cfg.block_m == want_bm else 5) + m / 100)


def test_picks_the_fastest_and_down_shares_the_up_block_m(tmp_path: Path) -> None:
    timer = FakeTimer()
    up, down = tune_pair(SHAPES, RTX, [1, 32], timer, TrialLog(tmp_path / "log.jsonl"))
    for m in (1, 32):
        best = min(candidates(SHAPES.gate_up, RTX, m), key=lambda c: timer(SHAPES.gate_up, m, c))
        assert up[m] == best
        assert down[m].block_m == up[m].block_m == (16 if m == 1 else 32)
        assert down[m].block_n == 64 and up[m].block_n == 128
    up_path, down_path, problems = write_pair(tmp_path / "out", SHAPES, RTX, up, down)
    assert problems == [] and check_pair(up_path, down_path) == []
    assert up_path.name == "E=384,N=128,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition,dtype=int4_w4a16.json"
    assert set(read_configs(up_path)) == {1, 32} and read_configs(down_path)[32] == down[32]


def test_resumes_without_timing_anything_twice(tmp_path: Path) -> None:
    log_path = tmp_path / "log.jsonl"
    first = FakeTimer()
    # a deadline already past after the first M: the run stops inside M=4, as a device call that ran out would
    tune_gemm(SHAPES.gate_up, H200, [1], first, TrialLog(log_path))
    partial = tune_gemm(SHAPES.gate_up, H200, [1, 4], first, TrialLog(log_path), deadline=0.0)
    assert set(partial) == {1}  # M=1 came from the log; M=4 stopped at its first untimed config
    n_first = len(first.calls)
    second = FakeTimer()
    done = tune_gemm(SHAPES.gate_up, H200, [1, 4], second, TrialLog(log_path))
    assert set(done) == {1, 4}
    timed_twice = {(g, m, c) for g, m, c in second.calls} & {(g, m, c) for g, m, c in first.calls}
    assert not timed_twice and len(second.calls) == len(candidates(SHAPES.gate_up, H200, 4))
    assert n_first == len(candidates(SHAPES.gate_up, H200, 1))


def test_a_torn_last_line_is_dropped_and_a_failing_config_is_logged(tmp_path: Path) -> None:
    cfgs = candidates(SHAPES.down, H200, 1)
    timer = FakeTimer(fail={cfgs[0]})
    log_path = tmp_path / "log.jsonl"
    best = tune_gemm(SHAPES.down, H200, [1], timer, TrialLog(log_path))
    assert best[1] != cfgs[0]
    with open(log_path, "a") as f:
        f.write('{"gemm": "down", "m": 1, "con')  # a run killed while writing
    log = TrialLog(log_path)
    failed = log.get("down", 1, cfgs[0])
    assert failed is not None and failed.us is None and "out of resources" in failed.error
    lines = log_path.read_text().splitlines()
    assert Trial.from_json(lines[0]).gemm == "down" and json.loads(lines[1])["m"] == 1


def test_screen_runs_once_per_config_and_its_verdict_is_kept(tmp_path: Path) -> None:
    seen: list[KernelConfig] = []

    def screen(gemm, cfg: KernelConfig) -> list[str]:
        seen.append(cfg)
        return ["spills 3584 B on sm_120"] if cfg.block_k == 256 else []

    log_path = tmp_path / "log.jsonl"
    timer = FakeTimer()
    best = tune_gemm(SHAPES.gate_up, RTX, [1, 2], timer, TrialLog(log_path), screen=screen)
    assert all(cfg.block_k != 256 for _, _, cfg in timer.calls) and best[1].block_k != 256
    pool = set(candidates(SHAPES.gate_up, RTX, 1)) | set(candidates(SHAPES.gate_up, RTX, 2))
    assert len(seen) == len(set(seen)) == len(pool)  # each config screened once, for every M
    seen.clear()
    tune_gemm(SHAPES.gate_up, RTX, [1, 2], FakeTimer(), TrialLog(log_path), screen=screen)
    assert seen == []  # the verdicts came from the log


def test_progress_shows_count_and_best() -> None:
    out = io.StringIO()
    tune_gemm(SHAPES.down, H200, [2], FakeTimer(), TrialLog(Path("/dev/null")), progress=Progress(out, every_s=0))
    last = out.getvalue().rstrip("\n").split("\r")[-1]
    n = len(candidates(SHAPES.down, H200, 2))
    assert last.startswith(f"[down M=2] [{'#' * 20}] {n}/{n}, best ") and "µs (BM16 BN64" in last


def test_cli_tune_needs_the_gpu_timer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys) -> None:
    """The verb wires the loop to the timer and writes the files (the GPU timer replaced by the fake)."""
    import moe_tuning.gpu_timer as gpu_timer
    from moe_tuning.__main__ import main

    monkeypatch.setattr(gpu_timer, "GraphTimer", lambda shapes, launches, replays: FakeTimer())
    assert main(["tune", "--tp", "8", "--device", "rtx-pro-6000-server", "--ms", "1,4", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "tuned M [1, 4] of [1, 4]" in out and "wrote " in out
    assert (tmp_path / "tune-log.jsonl").is_file()
    assert check_pair(*sorted(tmp_path.glob("E=384*.json"), key=lambda p: "_down" in p.name)) == []
