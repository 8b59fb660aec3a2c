"""The soak harness (benchmark/soak) against a stand-in server on loopback, healthy and misbehaving.

The stand-in (test/soak_standin.py) speaks SGLang's HTTP API, rejects bad
input with 400s, and can be told to fail the ways issue 14 saw the real
server fail: 500s on type errors, KV tokens never given back after a cut
stream, a process killed by an out-of-vocabulary id, greedy output that
depends on the load. Each must turn into a failed soak.json; the healthy one
must pass. Runs are short (about 2 s of load, a few dozen requests).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmark.soak import __main__ as cli
from benchmark.soak.bad_inputs import bad_inputs
from benchmark.soak.http_client import Endpoint, NotLoopback
from benchmark.soak.report import percentile
from benchmark.soak.server import free_port, parse_metric, server_facts, without_speculation
from benchmark.soak.soak import SoakConfig, run_soak

ROOT = Path(__file__).resolve().parents[1]

# slow: real stand-in servers soaked for seconds each, about 45 s on 2 cores (test/README.md).
pytestmark = pytest.mark.slow

STANDIN = Path(__file__).with_name("soak_standin.py")
SMALL = SoakConfig(duration_s=2.0, clients=8, burst=40, parity_prompts=4, disconnects=4, aborts=2, max_prompt=64,
                   max_output=32, request_timeout_s=20.0, drain_timeout_s=3.0)  # fmt: skip
SMALL_ARGS = ["--duration-s", "2", "--clients", "8", "--burst", "40", "--parity-prompts", "4", "--disconnects", "4",
              "--aborts", "2", "--max-prompt", "64", "--max-output", "32", "--request-timeout-s", "20",
              "--drain-timeout-s", "3", "--start-timeout", "30"]  # fmt: skip


def wait_listening(port: int, proc: subprocess.Popen, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the stand-in exited while starting"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("the stand-in did not start listening")


def soak_standin(misbehave: str | None, config: SoakConfig = SMALL) -> dict:
    """One small soak against a fresh stand-in server."""
    port = free_port()
    cmd = [sys.executable, str(STANDIN), "--port", str(port)] + (["--misbehave", misbehave] if misbehave else [])
    proc = subprocess.Popen(cmd)
    try:
        wait_listening(port, proc)
        ep = Endpoint.parse(f"http://127.0.0.1:{port}")
        facts = asyncio.run(server_facts(ep, None, None))
        return asyncio.run(run_soak(ep, facts, config))
    finally:
        proc.kill()
        proc.wait(10)


@pytest.fixture(scope="module")
def healthy() -> dict:
    return soak_standin(None)


def test_healthy_server_passes_every_check(healthy: dict) -> None:
    assert healthy["failures"] == [] and healthy["passed"]
    assert healthy["unexpected_errors"] == 0 and healthy["errors_by_class"] == {}
    assert healthy["completed"] > SMALL.burst + 2 * SMALL.parity_prompts
    assert healthy["leaked_tokens"] == 0 and healthy["leaked_tokens_gauge"] == 0
    assert healthy["parity_checked"] == SMALL.parity_prompts
    assert healthy["parity_mismatches"] == 0
    assert healthy["after_drain"]["health_status"] == 200 and healthy["after_drain"]["fresh_greedy_ok"]


def test_the_record_names_the_running_batch_cap_the_server_resolved(healthy: dict) -> None:
    """A TTFT under load is read against the server's running-batch cap (48 for a speculative 0.5.17
    server unless set; session 15's soak queued 64 clients behind it), so the record carries it."""
    assert healthy["config"]["max_running_requests"] == 48
    assert healthy["config"]["vocab_size"] == 512 and healthy["config"]["context_len"] == 256


def test_healthy_run_measures_latency_and_throughput(healthy: dict) -> None:
    for key in ("ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "tokens_per_s"):
        assert healthy[key] is not None and healthy[key] > 0, key
    assert healthy["ttft_p50_ms"] <= healthy["ttft_p99_ms"] and healthy["itl_p50_ms"] <= healthy["itl_p99_ms"]


def test_every_bad_input_is_tried_and_rejected_with_its_reason(healthy: dict) -> None:
    cases = bad_inputs(512, 256, "m")
    assert healthy["bad_inputs_tried"] == len(cases) == len({c.name for c in cases})
    must = sum(c.must_reject for c in cases)
    assert healthy["bad_inputs_rejected_4xx"] >= must and healthy["bad_inputs_accepted_wrongly"] == []
    assert healthy["bad_inputs_message_misses_problem"] == []
    by_name = {b["name"]: b for b in healthy["bad_inputs"]}
    assert by_name["generate_oov_input_id"]["verdict"] == "rejected_4xx"
    assert "522" in by_name["generate_oov_input_id"]["message"]
    # patch 0015's fields: on 0.5.17 these crash the scheduler or get a 500
    for name in ("logprob_start_len_below_minus_one", "session_id_not_a_string", "logit_bias_value_string"):
        assert by_name[f"generate_{name}"]["verdict"] == "rejected_4xx", by_name[f"generate_{name}"]


@pytest.mark.parametrize(
    "misbehave, check",
    [
        ("error500", lambda r: r["unexpected_errors"] > 0 and "bad_input_unexpected" in r["errors_by_class"]),
        ("leak", lambda r: r["leaked_tokens"] > 0 and any("KV tokens" in f for f in r["failures"])),
        ("stale_gauge", lambda r: r["leaked_tokens"] == 0 and any("stale gauge" in f for f in r["failures"])),
        ("crash_on_oov", lambda r: r["unexpected_errors"] > 0 and r["after_drain"]["health_status"] != 200),
        ("parity", lambda r: r["parity_mismatches"] > 0),
    ],
)
def test_misbehaving_server_fails_the_soak(misbehave: str, check) -> None:
    record = soak_standin(misbehave)
    assert not record["passed"]
    assert check(record), json.dumps({k: record[k] for k in ("failures", "errors_by_class", "leaked_tokens",
                                                               "leaked_tokens_gauge")})  # fmt: skip


def test_without_bad_inputs_a_server_that_dies_on_them_passes() -> None:
    # --no-bad-inputs: load and faults only, e.g. against stock 0.5.17 (an out-of-vocabulary id kills it).
    args = cli.parse_args(["--url", "http://127.0.0.1:1", "--out", "x", "--no-bad-inputs", "--clients", "3"])
    config = cli.soak_config(args)
    assert not config.bad_inputs and config.clients == 3 and cli.soak_config(cli.parse_args(
        ["--url", "http://127.0.0.1:1", "--out", "x"])).bad_inputs  # fmt: skip
    record = soak_standin("crash_on_oov", dataclasses.replace(SMALL, bad_inputs=False))
    assert record["passed"] and record["bad_inputs_tried"] == 0, record["failures"]


def launch_as_sglang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, misbehave: str | None) -> None:
    """Put a ``sglang.launch_server`` that runs the stand-in first on the PYTHONPATH of the servers started."""
    pkg = tmp_path / "site" / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "launch_server.py").write_text(f"import runpy, sys\nsys.argv[0] = {str(STANDIN)!r}\n"
                                          f"runpy.run_path({str(STANDIN)!r}, run_name='__main__')\n")  # fmt: skip
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    if misbehave:
        monkeypatch.setenv("STANDIN_MISBEHAVE", misbehave)


def test_cli_launches_server_and_reference_and_writes_soak_json(tmp_path: Path, monkeypatch) -> None:
    launch_as_sglang(tmp_path, monkeypatch, None)
    launch = "--model-path /m/target --speculative-algorithm EAGLE3 --speculative-num-steps 3 --tp 1"
    # Two identical stand-ins: their p99 ITL differ by noise only, which --itl-tolerance 1 allows.
    status = cli.main(["--launch", launch, "--reference", "--port", str(free_port()), "--out", str(tmp_path / "r"),
                       "--itl-tolerance", "1", *SMALL_ARGS])  # fmt: skip
    record = json.loads((tmp_path / "r" / "soak.json").read_text())
    assert status == 0, record["failures"]
    assert "--speculative-algorithm EAGLE3" in record["server_command"]
    assert "--enable-metrics" in record["server_command"] and "--host 127.0.0.1" in record["server_command"]
    assert "speculative" not in record["reference"]["server_command"] and record["reference"]["passed"]
    assert record["itl_p99_vs_reference"] is not None
    assert (tmp_path / "r" / "server.log").is_file() and (tmp_path / "r" / "server-reference.log").is_file()


def test_cli_reports_dead_server_process(tmp_path: Path, monkeypatch) -> None:
    launch_as_sglang(tmp_path, monkeypatch, "crash_on_oov")
    status = cli.main(["--launch", "--tp 1", "--port", str(free_port()), "--out", str(tmp_path / "r"), *SMALL_ARGS])
    record = json.loads((tmp_path / "r" / "soak.json").read_text())
    assert status == 1 and record["after_drain"]["dead_processes"]
    assert any("died" in f for f in record["failures"])


def test_itl_above_the_reference_fails_the_run() -> None:
    record, reference = {"itl_p99_ms": 12.0, "failures": [], "passed": True}, {"itl_p99_ms": 10.0}
    cli.compare_itl(record, reference, 0.1)
    assert record["itl_p99_vs_reference"] == 1.2 and not record["passed"] and "12.0 ms" in record["failures"][0]
    for spec in (9.0, 10.9):  # below, and above by less than the tolerance
        record = {"itl_p99_ms": spec, "failures": [], "passed": True}
        cli.compare_itl(record, reference, 0.1)
        assert record["passed"] and record["itl_p99_vs_reference"] == spec / 10


def test_only_loopback_is_reachable() -> None:
    for url in ("http://10.0.0.1:30000", "https://127.0.0.1:1", "http://example.com"):
        with pytest.raises(NotLoopback):
            Endpoint.parse(url)
    assert Endpoint.parse("http://localhost:8000") == Endpoint("localhost", 8000)


def test_without_speculation_drops_every_speculative_option() -> None:
    args = ["--model-path", "m", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d",
            "--speculative-num-steps=3", "--tp", "2", "--speculative-eagle-topk", "1", "--disable-cuda-graph"]  # fmt: skip
    assert without_speculation(args) == ["--model-path", "m", "--tp", "2", "--disable-cuda-graph"]


def test_parse_metric_takes_the_largest_label_set() -> None:
    page = ("# HELP sglang:num_used_tokens x\nsglang:num_used_tokens{tp_rank=\"0\"} 24.0\n"
            "sglang:num_used_tokens{tp_rank=\"1\"} 3.0\nsglang:num_used_tokens_total 99\n")  # fmt: skip
    assert parse_metric(page) == 24.0 and parse_metric("other 1") is None


def test_percentile_interpolates() -> None:
    assert percentile([], 50) is None
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5 and percentile([5.0], 99) == 5.0



def test_only_the_servers_own_processes_count_as_dead(tmp_path: Path) -> None:
    """A compile worker that exits after start-up is reported, not a failure; a scheduler is."""
    from benchmark.soak.server import LaunchedServer, is_core

    assert is_core(10, "", root=10) and is_core(11, "sglang::scheduler_TP0", root=10)
    assert not is_core(12, "/usr/bin/python3 -c from multiprocessing.resource_tracker import main", root=10)
    server = LaunchedServer([], 1, tmp_path / "log")
    server.tree = {2**22 + 1: "sglang::scheduler_TP0", 2**22 + 3: "python3 compile_worker", os.getpid(): "sglang me"}
    assert server.dead_processes() == [f"{2**22 + 1} sglang::scheduler_TP0"]
    assert server.exited_helpers() == [f"{2**22 + 3} python3 compile_worker"]
