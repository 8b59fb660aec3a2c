"""benchmark/tools/serving_bench.py and its persistent client (serving_client.py) on CPU: the benchmark command,
reading its JSONL, the table, the client-only ``datasets`` stub, the failing client's log tail, the stack-dump hook's
environments, and the client's protocol, one process per mode and its point timeout, on a fake
``sglang.benchmark.serving`` (no SGLang is imported)."""

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
from benchmark.tools.serving_bench import (STUBS, Point, bench_args, client_env, datasets_importable, log_tail,
                                           parse_args, prompts_for, read_point, table)
from benchmark.tools.serving_client import MODULE, exit_code
from benchmark.tools.stall_watch import HOOK_DIR, MARKER_ENV


def test_command_is_offline_and_fixed_length() -> None:
    joined = " ".join(bench_args(30001, "/m/target", 8, 128, 256, 1, Path("/o/x.jsonl")))
    assert MODULE == "sglang.benchmark.serving" and "--dataset-name random-ids" in joined  # run by the client
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


FAKE_SERVING = '''"""A stand-in for sglang.benchmark.serving: ``cli_main`` parses ``sys.argv`` as the real one does."""
import argparse
import json
import os
import signal
import sys
import threading
import time

print("fake serving module imported")  # stdout at import: must not reach the client's protocol
if os.environ.get("FAKE_BENCH_IMPORT_FAIL"):
    raise ImportError("fake: no module named 'torch'")


def cli_main():
    p = argparse.ArgumentParser()
    p.add_argument("--output-file", required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--max-concurrency", type=int, default=1)
    p.add_argument("--num-prompts", type=int, default=16)
    args, _ = p.parse_known_args()
    name = os.path.basename(args.output_file)
    rules = json.loads(os.environ.get("FAKE_BENCH_RULES", "{}"))  # a part of the output file's name -> action
    action = next((a for key, a in rules.items() if key in name), "")
    if os.environ.get("FAKE_BENCH_RECORD"):
        try:
            import datasets
            stub = datasets.__file__
        except ImportError:
            stub = None
        with open(os.environ["FAKE_BENCH_RECORD"], "a") as f:
            f.write(json.dumps({"pid": os.getpid(), "argv": sys.argv, "pythonpath": os.environ.get("PYTHONPATH"),
                                "markers": os.environ.get("FASTPATH_STACK_DUMP_DIR"), "datasets": stub}) + "\\n")
    print(f"fake benchmark pid={os.getpid()} seed={args.seed} {name}")
    if action == "fail":
        sys.stderr.write("".join(f"import step {i}\\n" for i in range(30)))
        sys.stderr.write("ModuleNotFoundError: No module named 'x'\\n")
        sys.exit(1)
    if action.startswith("exit:"):
        sys.exit(int(action[5:]))
    if action == "raise":
        raise RuntimeError("fake benchmark failure")
    if action == "die":  # as a crash in a C extension ends the process
        sys.stdout.flush()
        os._exit(7)
    if action == "sleep":
        time.sleep(60)
    if action == "term-parent":  # the budget's SIGTERM reaches serving_bench while this point runs
        os.kill(os.getppid(), signal.SIGTERM)
        time.sleep(60)
    os.write(1, b"fd 1 written directly\\n")  # as a C extension writes
    os.write(2, b"fd 2 written directly\\n")
    thread = threading.Thread(target=lambda: print("from a thread", flush=True))
    thread.start()
    thread.join()
    with open(args.output_file, "a") as f:
        f.write(json.dumps({"completed": args.num_prompts, "output_throughput": 100.0 + args.max_concurrency,
                            "request_throughput": 1.0, "median_itl_ms": 4.0, "pid": os.getpid()}) + "\\n")
'''


def fake_sglang(tmp_path: Path) -> Path:
    """A folder with a fake ``sglang.benchmark.serving`` (``FAKE_SERVING``): put first on a client's PYTHONPATH."""
    root = tmp_path / "fake_sglang"
    (root / "sglang" / "benchmark").mkdir(parents=True)
    (root / "sglang" / "__init__.py").write_text("")
    (root / "sglang" / "benchmark" / "__init__.py").write_text("")
    (root / "sglang" / "benchmark" / "serving.py").write_text(FAKE_SERVING)
    return root


def fake_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """This environment with the fake SGLang first on PYTHONPATH (no real SGLang is imported) and ``extra``."""
    return {**os.environ, "PYTHONPATH": str(fake_sglang(tmp_path)), **extra}


def request(out_file: Path, log: Path, seed: int = 1) -> str:
    return json.dumps({"argv": ["--backend", "sglang", "--seed", str(seed), "--output-file", str(out_file)],
                       "log": str(log)}) + "\n"


def talk(env: dict[str, str], lines: list[str], stderr: Path) -> tuple[int, int, list[dict]]:
    """Run the client on ``lines`` then EOF: its pid, exit status and answers."""
    with open(stderr, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", serving_bench.CLIENT], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=err, env=serving_bench.with_repo_root(env), text=True)
        stdout, _ = proc.communicate("".join(lines), timeout=60)
    return proc.pid, proc.returncode, [json.loads(line) for line in stdout.splitlines()]


def test_the_client_imports_once_and_runs_each_point_in_process_into_its_own_log(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    env = fake_env(tmp_path, FAKE_BENCH_RECORD=str(record))
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    pid, rc, answers = talk(env, [request(tmp_path / "a.jsonl", logs[0], 1), "\n",
                                  request(tmp_path / "b.jsonl", logs[1], 7)], tmp_path / "client.log")
    assert (rc, answers) == (0, [{"ready": True}, {"rc": 0}, {"rc": 0}])
    runs = [json.loads(line) for line in record.read_text().splitlines()]
    assert [r["pid"] for r in runs] == [pid, pid]  # one process, no new one per point
    assert runs[1]["argv"] == ["sglang.benchmark.serving", "--backend", "sglang", "--seed", "7", "--output-file",
                               str(tmp_path / "b.jsonl")]
    for log, seed, other in ((logs[0], 1, "b.jsonl"), (logs[1], 7, "a.jsonl")):
        text = log.read_text()
        assert f"fake benchmark pid={pid} seed={seed}" in text and other not in text
        assert "fd 1 written directly" in text and "fd 2 written directly" in text and "from a thread" in text
    assert json.loads((tmp_path / "b.jsonl").read_text())["pid"] == pid
    assert "fake serving module imported" in (tmp_path / "client.log").read_text()  # not in the protocol


def test_a_failing_point_answers_its_status_and_the_next_point_still_runs(tmp_path: Path) -> None:
    env = fake_env(tmp_path, FAKE_BENCH_RULES=json.dumps({"three": "exit:3", "boom": "raise"}))
    names = ["three", "boom", "ok"]
    _, rc, answers = talk(env, [request(tmp_path / f"{n}.jsonl", tmp_path / f"{n}.log") for n in names],
                          tmp_path / "client.log")
    assert (rc, answers) == (0, [{"ready": True}, {"rc": 3}, {"rc": 1}, {"rc": 0}])
    assert "RuntimeError: fake benchmark failure" in (tmp_path / "boom.log").read_text()  # its traceback
    assert (tmp_path / "ok.jsonl").is_file() and not (tmp_path / "three.jsonl").exists()


def test_exit_codes_as_a_process_gets_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert [exit_code(c) for c in (None, 0, 3)] == [0, 0, 3]
    assert exit_code("usage: no") == 1 and "usage: no" in capsys.readouterr().err


def test_an_import_failure_answers_not_ready(tmp_path: Path) -> None:
    pid, rc, answers = talk(fake_env(tmp_path, FAKE_BENCH_IMPORT_FAIL="1"), [request(tmp_path / "a.jsonl",
                            tmp_path / "a.log")], tmp_path / "client.log")
    assert rc == 1 and answers == [{"ready": False, "error": "ImportError: fake: no module named 'torch'"}]
    assert "Traceback" in (tmp_path / "client.log").read_text() and not (tmp_path / "a.log").exists()


class FakeServer:
    envs: list[dict[str, str] | None] = []
    events: list[str] = []
    launches: list[list[str]] = []

    def __init__(self, args: list[str], port: int, log: Path, env: dict[str, str] | None = None) -> None:
        FakeServer.envs.append(env)
        FakeServer.launches.append(list(args))
        self.log, self.proc = log, types.SimpleNamespace(pid=os.getpid())

    def start(self, timeout_s: float) -> None:
        FakeServer.events.append("start")

    def stop(self) -> None:
        FakeServer.events.append("stop")


def fake_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *more: str) -> argparse.Namespace:
    """FakeServer in place of the server (the client is real, on the fake SGLang); the arguments of a run at
    concurrency 1 and 8 without the stall watch (plus ``more``), its output folder made."""
    FakeServer.envs, FakeServer.events, FakeServer.launches = [], [], []
    monkeypatch.setattr(serving_bench, "LaunchedServer", FakeServer)
    (tmp_path / "o").mkdir()
    return parse_args(["--models", str(tmp_path / "m"), "--out", str(tmp_path / "o"), "--concurrency", "1,8",
                       "--stall-dump-s", "0", *more])


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_failing_client_prints_its_log_tail_and_only_the_client_gets_the_stub(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    record = tmp_path / "record.jsonl"
    args = fake_server(tmp_path, monkeypatch, "--prewarm-prompts", "0")
    bench_env = client_env(fake_env(tmp_path, FAKE_BENCH_RECORD=str(record), FAKE_BENCH_RULES='{"": "fail"}'),
                           stub=True)
    for mode in ("nospec", "eagle3"):
        points = serving_bench.run_mode(mode, args, tmp_path / "o", bench_env)
        assert [p.error for p in points] == ["no result line", "no result line"]
    runs = records(record)
    assert [r["pythonpath"] for r in runs] == [serving_bench.with_repo_root(bench_env)["PYTHONPATH"]] * 4
    assert all(Path(r["datasets"]).is_relative_to(STUBS) for r in runs)  # the stub, first on the client's path
    assert runs[0]["pid"] == runs[1]["pid"] != runs[2]["pid"] == runs[3]["pid"]  # one client per mode
    assert all(gone(r["pid"]) for r in runs) and FakeServer.events == ["start", "stop"] * 2
    assert all(env is None or str(STUBS) not in env.get("PYTHONPATH", "") for env in FakeServer.envs)
    assert str(STUBS) not in os.environ.get("PYTHONPATH", "")
    err = capsys.readouterr().err
    assert "nospec c8: benchmark exited 1" not in err  # no result line is the first error
    assert "nospec c8: no result line; the last lines of bench-nospec-c8.log:" in err
    assert "ModuleNotFoundError: No module named 'x'" in err and "import step 29" in err
    assert "import step 16" in err and "import step 15" not in err  # 15 lines: 14 steps and the error


def test_a_client_whose_import_fails_ends_the_mode_with_its_log_tail(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    args = fake_server(tmp_path, monkeypatch)
    points = serving_bench.run_mode("nospec", args, tmp_path / "o", fake_env(tmp_path, FAKE_BENCH_IMPORT_FAIL="1"))
    assert [(p.concurrency, p.error) for p in points] == [
        (-1, "ClientFailed: the benchmark client is not ready: ImportError: fake: no module named 'torch'")]
    assert FakeServer.events == ["start", "stop"]
    err = capsys.readouterr().err
    assert "the last lines of client-nospec.log:" in err and "ImportError: fake: no module named 'torch'" in err


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
    (benchmark/tools/stall_watch.py), a watch runs on the server's log while each point runs, with the client's
    process among its targets, and each point records its stalls (none here: the fake server never logs)."""
    watches = []

    class Watch(serving_bench.StallWatch):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)
            watches.append(self)

    record = tmp_path / "record.jsonl"
    args = fake_server(tmp_path, monkeypatch, "--concurrency", "1", "--prewarm-prompts", "0", "--stall-dump-s", "3")
    monkeypatch.setattr(serving_bench, "StallWatch", Watch)
    bench_env = client_env(fake_env(tmp_path, FAKE_BENCH_RECORD=str(record)), stub=True)
    points = serving_bench.run_mode("eagle3", args, tmp_path / "o", bench_env)
    assert [(p.concurrency, p.error, p.stalls) for p in points] == [(1, None, [])]
    (server_env,), (run,) = FakeServer.envs, records(record)
    assert server_env["PYTHONPATH"].startswith(str(HOOK_DIR))
    assert run["pythonpath"].startswith(str(HOOK_DIR)) and run["markers"] == server_env[MARKER_ENV]
    assert (Path(run["markers"]) / str(run["pid"])).is_file()  # the client registered the dump handler
    assert str(STUBS) in run["pythonpath"] and str(STUBS) not in server_env["PYTHONPATH"]
    (watch,) = watches
    assert watch.extra_pids()[0] == run["pid"] and not watch.is_alive()


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
    is not a row of the table. All three runs go to one client process, started before the server."""
    record = tmp_path / "record.jsonl"
    starts = []
    real_start = serving_bench.BenchClient.start

    def start(self: serving_bench.BenchClient) -> None:
        starts.append(list(FakeServer.events))
        real_start(self)

    monkeypatch.setattr(serving_bench.BenchClient, "start", start)
    args = fake_server(tmp_path, monkeypatch, "--seed", "5")
    assert args.prewarm_prompts == 32
    points = serving_bench.run_mode("nospec", args, tmp_path / "o", fake_env(tmp_path, FAKE_BENCH_RECORD=str(record)))
    assert starts == [[]]  # once, before the server's start
    runs = records(record)
    cmds = [r["argv"] for r in runs]
    flag = lambda cmd, name: cmd[cmd.index(name) + 1]  # noqa: E731
    assert [flag(c, "--max-concurrency") for c in cmds] == ["8", "1", "8"]
    assert [flag(c, "--seed") for c in cmds] == ["1005", "5", "5"]
    assert [flag(c, "--random-output-len") for c in cmds] == ["32", "256", "256"]
    assert [flag(c, "--num-prompts") for c in cmds] == ["32", "16", "32"]
    assert flag(cmds[0], "--output-file").endswith("serving-nospec-prewarm.jsonl")
    assert len({r["pid"] for r in runs}) == 1 and gone(runs[0]["pid"])
    assert [p.prewarm for p in points] == [True, False, False]
    rows = table(points).splitlines()[2:]
    assert len(rows) == 2 and rows[0].startswith("| 1 | 101.0 |") and rows[1].startswith("| 8 | 108.0 |")
    out = tmp_path / "o"
    assert "seed=1005" in (out / "bench-nospec-prewarm.log").read_text()
    assert "seed=5 serving-nospec-c8.jsonl" in (out / "bench-nospec-c8.log").read_text()
    assert "fake serving module imported" in (out / "client-nospec.log").read_text()


def test_a_point_timeout_kills_the_client_and_the_next_point_starts_a_new_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "record.jsonl"
    env = fake_env(tmp_path, FAKE_BENCH_RECORD=str(record), FAKE_BENCH_RULES='{"slow": "sleep"}')
    client = serving_bench.BenchClient(env, tmp_path / "client.log")
    argv = lambda name: ["--seed", "1", "--output-file", str(tmp_path / f"{name}.jsonl")]  # noqa: E731
    assert serving_bench.run_client(client, argv("one"), tmp_path / "one.log", 30, None) == (0, [])
    with pytest.raises(subprocess.TimeoutExpired):
        serving_bench.run_client(client, argv("slow"), tmp_path / "slow.log", 1.0, None)
    first = records(record)[0]["pid"]
    assert client.proc is None and gone(first)
    assert serving_bench.run_client(client, argv("two"), tmp_path / "two.log", 30, None) == (0, [])
    second = records(record)[-1]["pid"]
    assert client.started == 2 and second == client.pid != first and (tmp_path / "two.jsonl").is_file()
    client.close()
    assert gone(second) and client.proc is None
    # In run_mode a point timeout ends the mode, as it did with a process per point.
    args = fake_server(tmp_path, monkeypatch, "--prewarm-prompts", "0", "--point-timeout-s", "1")
    points = serving_bench.run_mode("nospec", args, tmp_path / "o", {**env, "FAKE_BENCH_RULES": '{"c1": "sleep"}'})
    assert [(p.concurrency, p.error[:16]) for p in points] == [(-1, "TimeoutExpired: ")]
    assert gone(records(record)[-1]["pid"]) and FakeServer.events == ["start", "stop"]


def test_a_client_that_dies_inside_a_point_fails_that_point_and_the_next_gets_a_new_client(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """As with a process per point, a crash is that point's error: the mode goes on, on a fresh client."""
    record = tmp_path / "record.jsonl"
    args = fake_server(tmp_path, monkeypatch, "--prewarm-prompts", "0")
    env = fake_env(tmp_path, FAKE_BENCH_RECORD=str(record), FAKE_BENCH_RULES='{"c1": "die"}')
    points = serving_bench.run_mode("nospec", args, tmp_path / "o", env)
    assert [(p.concurrency, p.error, p.output_tokens_per_s) for p in points] == [(1, "no result line", None),
                                                                                (8, None, 108.0)]
    first, second = (r["pid"] for r in records(record))
    assert first != second and gone(first) and gone(second) and FakeServer.events == ["start", "stop"]
    assert "fake benchmark pid=" in capsys.readouterr().err  # c1's log tail: what it printed before it died
    client = serving_bench.BenchClient(env, tmp_path / "client.log")
    argv = ["--seed", "1", "--output-file", str(tmp_path / "serving-c1.jsonl")]
    assert serving_bench.run_client(client, argv, tmp_path / "c1.log", 30, None) == (7, [])
    assert client.proc is None and client.started == 1


def test_sigterm_stops_client_and_server_and_keeps_the_finished_points(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Session 30: ``timeout`` ended a run inside a server's start-up and the server lived on with the GPU's memory.
    A real SIGTERM during the second point (the fake benchmark sends it to its parent, this process): the client is
    killed, the server stopped, the next mode never starts, and serving.json keeps the first point and the
    interrupted mode's error."""
    record = tmp_path / "record.jsonl"
    FakeServer.envs, FakeServer.events, FakeServer.launches = [], [], []
    monkeypatch.setattr(serving_bench, "LaunchedServer", FakeServer)
    monkeypatch.setattr(serving_bench, "datasets_importable", lambda env: True)
    for name, value in fake_env(tmp_path, FAKE_BENCH_RECORD=str(record),
                                FAKE_BENCH_RULES='{"c8": "term-parent"}').items():
        monkeypatch.setenv(name, value)
    before = signal.getsignal(signal.SIGTERM)
    rc = serving_bench.main(["--models", str(tmp_path / "m"), "--out", str(tmp_path), "--concurrency", "1,8",
                             "--stall-dump-s", "0", "--prewarm-prompts", "0", "--modes", "eagle3,nospec"])
    assert rc == 1 and FakeServer.events == ["start", "stop"]
    assert signal.getsignal(signal.SIGTERM) == before
    runs = records(record)
    assert len(runs) == 2 and runs[0]["pid"] == runs[1]["pid"] and gone(runs[0]["pid"])  # killed inside c8
    records_ = json.loads((tmp_path / "serving.json").read_text())["records"]
    assert [(r["mode"], r["concurrency"], r["output_tokens_per_s"]) for r in records_] == [
        ("eagle3", 1, 101.0), ("eagle3", -1, None)]
    assert records_[1]["error"] == f"terminated by signal {int(signal.SIGTERM)}"


# --- traffic points (issue 12: a moving batch size) ------------------------------------------------------


def test_a_traffic_point_arrives_at_its_rate_with_lengths_in_a_range() -> None:
    cmd = bench_args(30001, "/m/target", 8, 128, 256, 1, Path("/o/x.jsonl"), 128, 8.0, 0.25)
    flag = lambda name: cmd[cmd.index(name) + 1]  # noqa: E731
    assert (flag("--request-rate"), flag("--random-range-ratio"), flag("--num-prompts")) == ("8", "0.25", "128")
    assert flag("--max-concurrency") == "8" and flag("--seed") == "1"  # the same arrivals for both modes
    assert "--request-rate" not in bench_args(30001, "/m/target", 8, 128, 256, 1, Path("/o/x.jsonl"))


def test_reads_tpot_and_latency(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    out.write_text(json.dumps({"completed": 128, "output_throughput": 900.0, "median_tpot_ms": 4.5,
                               "p99_tpot_ms": 9.5, "median_e2e_latency_ms": 812.0}) + "\n")
    point = read_point("eagle3", 8, out)
    assert (point.median_tpot_ms, point.p99_tpot_ms, point.median_e2e_ms) == (4.5, 9.5, 812.0)


def test_the_traffic_table_compares_tpot_by_rate() -> None:
    def pt(mode: str, rate: float | None, tpot: float, acc: float | None = None) -> Point:
        return Point(mode, 8, 128, 500.0, 2.0, 10.0, 20.0, 5.0, 9.0, acc, request_rate=rate, median_tpot_ms=tpot,
                     p99_tpot_ms=2 * tpot, median_e2e_ms=1500.0)

    text = table([pt("nospec", None, 6.0), pt("eagle3", None, 3.0, 3.0), pt("nospec", 8.0, 6.0),
                  pt("eagle3", 8.0, 4.0, 2.9), pt("nospec", 48.0, 9.0)])
    head, traffic = text.split("\n\n")
    assert len(head.splitlines()) == 3  # the concurrency point only
    rows = traffic.splitlines()
    assert rows[0].startswith("| requests/s |") and len(rows) == 4
    assert rows[2] == "| 8 | 500.0 | 500.0 | 6.0 / 4.0 | 12.0 / 8.0 | 1.50 | 1.5 / 1.5 | 2.9 |"
    assert rows[3].startswith("| 48 | 500.0 | - | 9.0 / - |")
    assert "\n\n" not in table([pt("nospec", None, 6.0)])


def test_traffic_points_follow_the_concurrency_points_and_eagle3_args_reach_its_server_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "record.jsonl"
    args = fake_server(tmp_path, monkeypatch, "--traffic", "8,48", "--eagle3-args",
                       "--speculative-adaptive --speculative-adaptive-config '/c/ks off.json'")
    assert (args.traffic_prompts, args.traffic_range_ratio) == (128, 0.25)
    env = fake_env(tmp_path, FAKE_BENCH_RECORD=str(record))
    points = serving_bench.run_mode("nospec", args, tmp_path / "o", env)
    points = serving_bench.run_mode("eagle3", args, tmp_path / "o", env, points)
    cmds = [r["argv"] for r in records(record)]
    flag = lambda cmd, name: cmd[cmd.index(name) + 1] if name in cmd else None  # noqa: E731
    assert [flag(c, "--request-rate") for c in cmds[:5]] == [None, None, None, "8", "48"]  # prewarm, c1, c8, r8, r48
    assert [flag(c, "--num-prompts") for c in cmds[3:5]] == ["128", "128"]
    assert {flag(c, "--max-concurrency") for c in cmds[3:5]} == {"8"}
    assert [flag(c, "--random-range-ratio") for c in cmds[:5]] == ["1", "1", "1", "0.25", "0.25"]
    assert flag(cmds[4], "--output-file").endswith("serving-nospec-r48.jsonl")
    assert [p.request_rate for p in points] == [None, None, None, 8.0, 48.0] * 2
    nospec, eagle3 = FakeServer.launches
    assert "--speculative-adaptive" not in nospec
    assert eagle3[-3:] == ["--speculative-adaptive", "--speculative-adaptive-config", "/c/ks off.json"]
    assert "| 48 | 108.0 | 108.0 |" in table(points)  # the fake writes 100 + max concurrency tok/s

