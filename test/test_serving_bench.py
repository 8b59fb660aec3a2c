"""benchmark/tools/serving_bench.py on CPU: the benchmark command, reading its JSONL, the table, the
client-only ``datasets`` stub, the failing client's log tail and the stack-dump hook's environments."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import types
from pathlib import Path

import pytest

from benchmark.tools import serving_bench
from benchmark.tools.serving_bench import (STUBS, Point, bench_command, client_env, datasets_importable, log_tail,
                                           parse_args, prompts_for, read_point, table)
from benchmark.tools.stall_watch import HOOK_DIR, MARKER_ENV


def test_command_is_offline_and_fixed_length() -> None:
    cmd = bench_command(30001, "/m/target", 8, 128, 256, 1, Path("/o/x.jsonl"))
    joined = " ".join(cmd)
    assert "-m sglang.benchmark.serving" in joined and "--dataset-name random-ids" in joined
    assert "--random-range-ratio 1" in joined and "--max-concurrency 8" in joined and "--num-prompts 32" in joined
    assert "--seed 1" in joined and "--port 30001" in joined and "--host 127.0.0.1" in joined
    assert "--warmup-requests 8" in joined  # the batch size met once before the timed run
    assert prompts_for(1) == 16 and prompts_for(32) == 128


def test_reads_the_last_result_line(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    rows = [{"completed": 16, "output_throughput": 100.0}, {"completed": 32, "output_throughput": 812.5,
            "request_throughput": 3.2, "median_ttft_ms": 20.0, "p99_ttft_ms": 40.0, "median_itl_ms": 4.0,
            "p99_itl_ms": 9.0, "accept_length": 2.98}]  # fmt: skip
    out.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    point = read_point("eagle3", 8, out)
    assert (point.prompts, point.output_tokens_per_s, point.accept_length, point.error) == (32, 812.5, 2.98, None)
    assert read_point("eagle3", 8, tmp_path / "missing.jsonl").error == "no result line"


def test_table_pairs_modes_by_concurrency() -> None:
    def pt(mode: str, c: int, tps: float, acc: float | None) -> Point:
        return Point(mode, c, 16, tps, 1.0, 10.0, 20.0, 5.0, 9.0, acc)

    text = table([pt("nospec", 1, 300.0, None), pt("eagle3", 1, 450.0, 3.0), pt("nospec", 8, 2000.0, None)])
    assert "| 1 | 300.0 | 450.0 | 1.50 | 3.0 |" in text
    assert "| 8 | 2000.0 | - | - | - |" in text


def test_extra_server_args_after_dashes() -> None:
    args = parse_args(["--models", "m", "--out", "o", "--", "--mem-fraction-static", "0.65"])
    assert args.server_args == ["--mem-fraction-static", "0.65"] and args.concurrency == [1, 8, 32]


def test_client_env_gets_the_stub_only_when_asked() -> None:
    base = {"PATH": "/bin", "PYTHONPATH": "/repo:/repo/python"}
    assert client_env(base, stub=False) == base
    stubbed = client_env(base, stub=True)
    assert stubbed["PYTHONPATH"] == os.pathsep.join([str(STUBS), "/repo:/repo/python"]) and stubbed["PATH"] == "/bin"
    assert client_env({"PATH": "/bin"}, stub=True)["PYTHONPATH"] == str(STUBS)
    assert base["PYTHONPATH"] == "/repo:/repo/python"  # the caller's mapping is left alone


def test_the_probe_tells_a_broken_datasets_from_a_working_one(tmp_path: Path) -> None:
    broken = tmp_path / "datasets"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError('no pyarrow')\n")
    assert not datasets_importable({**os.environ, "PYTHONPATH": str(tmp_path)})
    assert datasets_importable({**os.environ, "PYTHONPATH": str(STUBS)})


def test_the_stub_imports_and_load_dataset_says_why_it_cannot_work() -> None:
    env = client_env({k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, stub=True)
    imported = subprocess.run([sys.executable, "-c", "from datasets import load_dataset"], env=env,
                              capture_output=True, text=True)
    assert imported.returncode == 0, imported.stderr  # mmmu.py's module-level import passes
    called = subprocess.run([sys.executable, "-c", "from datasets import load_dataset; load_dataset('MMMU/MMMU')"],
                            env=env, capture_output=True, text=True)
    assert called.returncode != 0
    assert "RuntimeError" in called.stderr and "not installed" in called.stderr
    assert "only the random and random-ids datasets run here" in called.stderr


def test_log_tail_keeps_the_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "bench.log"
    log.write_text("".join(f"line {i}\n" for i in range(40)))
    assert log_tail(log).splitlines() == [f"line {i}" for i in range(25, 40)]
    assert log_tail(tmp_path / "missing.log") == ""


class FakeServer:
    envs: list[dict[str, str] | None] = []

    def __init__(self, args: list[str], port: int, log: Path, env: dict[str, str] | None = None) -> None:
        FakeServer.envs.append(env)

    def start(self, timeout_s: float) -> None:
        pass

    def stop(self) -> None:
        pass


def fake_server_and_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, client: type,
                           *more: str) -> argparse.Namespace:
    """FakeServer and ``client`` in place of the server and the benchmark process; the arguments of a run at
    concurrency 1 and 8 without the stall watch (plus ``more``), its output folder made."""
    FakeServer.envs = []
    monkeypatch.setattr(serving_bench, "LaunchedServer", FakeServer)
    monkeypatch.setattr(serving_bench.subprocess, "Popen", client)
    (tmp_path / "o").mkdir()
    return parse_args(["--models", str(tmp_path / "m"), "--out", str(tmp_path / "o"), "--concurrency", "1,8",
                       "--stall-dump-s", "0", *more])


def test_a_failing_client_prints_its_log_tail_and_only_the_client_gets_the_stub(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    client_envs = []

    class FakeClient:
        def __init__(self, cmd: list[str], stdout, env: dict[str, str], **kwargs) -> None:
            client_envs.append(env)
            stdout.write("".join(f"import step {i}\n" for i in range(30)) + "ModuleNotFoundError: No module named 'x'\n")

        def wait(self, timeout: float) -> int:
            return 1

    args = fake_server_and_client(tmp_path, monkeypatch, FakeClient, "--prewarm-prompts", "0")
    bench_env = client_env(dict(os.environ), stub=True)
    for mode in ("nospec", "eagle3"):
        points = serving_bench.run_mode(mode, args, tmp_path / "o", bench_env)
        assert [p.error for p in points] == ["no result line", "no result line"]
    assert client_envs == [bench_env] * 4
    assert all(env is None or str(STUBS) not in env.get("PYTHONPATH", "") for env in FakeServer.envs)
    assert str(STUBS) not in os.environ.get("PYTHONPATH", "")
    err = capsys.readouterr().err
    assert "nospec c8: no result line; the last lines of bench-nospec-c8.log:" in err
    assert "ModuleNotFoundError: No module named 'x'" in err and "import step 29" in err
    assert "import step 16" in err and "import step 15" not in err  # 15 lines: 14 steps and the error


@pytest.mark.parametrize("importable", [True, False])
def test_serving_json_records_the_stub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, importable: bool) -> None:
    seen = []
    monkeypatch.setattr(serving_bench, "datasets_importable", lambda env: importable)
    monkeypatch.setattr(serving_bench, "run_mode", lambda mode, args, out, env, points: seen.append(env))
    assert serving_bench.main(["--models", "m", "--out", str(tmp_path)]) == 0
    doc = json.loads((tmp_path / "serving.json").read_text())
    assert doc["client_datasets_stub"] is (not importable)
    assert all((str(STUBS) in env.get("PYTHONPATH", "")) is (not importable) for env in seen) and len(seen) == 2


def test_stall_dumps_reach_the_server_and_the_client_but_the_stub_only_the_client(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With --stall-dump-s (default 3 s) both the server's and the client's environments carry the stack-dump hook
    (benchmark/tools/stall_watch.py), a watch runs on the server's log while each client runs, and each point
    records its stalls (none here: the fake client returns at once)."""
    client_envs = []

    class Server(FakeServer):
        def __init__(self, args: list[str], port: int, log: Path, env: dict[str, str] | None = None) -> None:
            super().__init__(args, port, log, env)
            self.log, self.proc = log, types.SimpleNamespace(pid=os.getpid())

    class Client:
        pid = os.getpid()

        def __init__(self, cmd: list[str], stdout, env: dict[str, str], **kwargs) -> None:
            client_envs.append(env)

        def wait(self, timeout: float) -> int:
            return 0

    FakeServer.envs = []
    monkeypatch.setattr(serving_bench, "LaunchedServer", Server)
    monkeypatch.setattr(serving_bench.subprocess, "Popen", Client)
    args = parse_args(["--models", str(tmp_path / "m"), "--out", str(tmp_path / "o"), "--concurrency", "1",
                       "--prewarm-prompts", "0"])
    assert args.stall_dump_s == 3.0
    (tmp_path / "o").mkdir()
    points = serving_bench.run_mode("eagle3", args, tmp_path / "o", client_env(dict(os.environ), stub=True))
    assert points[0].stalls == []
    (server_env,), (bench_env,) = FakeServer.envs, client_envs
    for env in (server_env, bench_env):
        assert env["PYTHONPATH"].startswith(str(HOOK_DIR)) and env[MARKER_ENV] == server_env[MARKER_ENV]
    assert str(STUBS) in bench_env["PYTHONPATH"] and str(STUBS) not in server_env["PYTHONPATH"]


def test_modes_run_in_the_order_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = []
    monkeypatch.setattr(serving_bench, "datasets_importable", lambda env: True)
    monkeypatch.setattr(serving_bench, "run_mode", lambda mode, args, out, env, points: ran.append(mode))
    assert serving_bench.main(["--models", "m", "--out", str(tmp_path), "--modes", "eagle3,nospec"]) == 0
    assert ran == ["eagle3", "nospec"]
    assert parse_args(["--models", "m", "--out", "o"]).modes == ["nospec", "eagle3"]
    for bad in ("eagle3,eagle3", "fast", ","):
        with pytest.raises(SystemExit):
            parse_args(["--models", "m", "--out", "o", "--modes", bad])


def test_a_prewarm_run_of_other_prompts_comes_first_and_stays_out_of_the_table(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Session 27: first-use stalls fell inside the timed concurrency-1 run. The pre-warm run goes first, at the
    largest concurrency, with prompts of another seed and 32 new tokens; its point keeps its stalls and errors but
    is not a row of the table."""
    cmds = []

    class Client:
        def __init__(self, cmd: list[str], stdout, env: dict[str, str], **kwargs) -> None:
            cmds.append(cmd)
            out_file = Path(cmd[cmd.index("--output-file") + 1])
            out_file.write_text(json.dumps({"completed": 4, "output_throughput": 100.0 + len(cmds)}) + "\n")

        def wait(self, timeout: float) -> int:
            return 0

    args = fake_server_and_client(tmp_path, monkeypatch, Client, "--seed", "5")
    assert args.prewarm_prompts == 32
    points = serving_bench.run_mode("nospec", args, tmp_path / "o", dict(os.environ))
    flag = lambda cmd, name: cmd[cmd.index(name) + 1]  # noqa: E731
    assert [flag(c, "--max-concurrency") for c in cmds] == ["8", "1", "8"]
    assert [flag(c, "--seed") for c in cmds] == ["1005", "5", "5"]
    assert [flag(c, "--random-output-len") for c in cmds] == ["32", "256", "256"]
    assert [flag(c, "--num-prompts") for c in cmds] == ["32", "16", "32"]
    assert flag(cmds[0], "--output-file").endswith("serving-nospec-prewarm.jsonl")
    assert [p.prewarm for p in points] == [True, False, False]
    rows = table(points).splitlines()[2:]
    assert len(rows) == 2 and rows[0].startswith("| 1 | 102.0 |") and rows[1].startswith("| 8 | 103.0 |")


def test_sigterm_stops_client_and_server_and_keeps_the_finished_points(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Session 30: ``timeout`` ended a run inside a server's start-up and the server lived on with the GPU's memory.
    A real SIGTERM during the second point: the client is killed, the server stopped, the next mode never starts,
    and serving.json keeps the first point and the interrupted mode's error."""
    events = []

    class Server(FakeServer):
        def start(self, timeout_s: float) -> None:
            events.append("start")

        def stop(self) -> None:
            events.append("stop")

    class Client:
        def __init__(self, cmd: list[str], stdout, env: dict[str, str], **kwargs) -> None:
            self.out_file = Path(cmd[cmd.index("--output-file") + 1])

        def wait(self, timeout: float | None = None) -> int:
            if "c8" in self.out_file.name and "kill" not in events:
                os.kill(os.getpid(), signal.SIGTERM)  # the handler raises here, in the main thread
            self.out_file.write_text(json.dumps({"completed": 16, "output_throughput": 250.0}) + "\n")
            return 0

        def kill(self) -> None:
            events.append("kill")

    monkeypatch.setattr(serving_bench, "LaunchedServer", Server)
    monkeypatch.setattr(serving_bench.subprocess, "Popen", Client)
    monkeypatch.setattr(serving_bench, "datasets_importable", lambda env: True)
    before = signal.getsignal(signal.SIGTERM)
    rc = serving_bench.main(["--models", str(tmp_path / "m"), "--out", str(tmp_path), "--concurrency", "1,8",
                             "--stall-dump-s", "0", "--prewarm-prompts", "0", "--modes", "eagle3,nospec"])
    assert rc == 1 and events == ["start", "kill", "stop"]
    assert signal.getsignal(signal.SIGTERM) == before
    records = json.loads((tmp_path / "serving.json").read_text())["records"]
    assert [(r["mode"], r["concurrency"], r["output_tokens_per_s"]) for r in records] == [
        ("eagle3", 1, 250.0), ("eagle3", -1, None)]
    assert records[1]["error"] == f"terminated by signal {int(signal.SIGTERM)}"
