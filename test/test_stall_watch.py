"""benchmark/tools/stall_watch.py: stack dumps when a launched server's log goes quiet while a client runs.

Real processes on CPU: a stand-in "server" (Python, its own session, its output to a log file) that logs a line
every 50 ms, goes quiet for 2.5 s inside a function named ``quiet_spell_here``, then logs again; it starts a
Python child with the same environment and a ``sleep`` child (not Python: it inherits the environment but never
runs the hook). The watch must record one stall of about 2.5 s, dump the stacks of the hooked processes into the
log (the quiet function's name appears), one process at a time (the signals ``stagger_s`` apart, every dumped
line whole: dumps written at once interleave in the shared log), signal only them (``sleep`` lives on: SIGUSR2
would have ended it) and leave every process running. Also: the hook chains to the next ``sitecustomize`` on the path, and nothing is
recorded while the watch is disarmed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from benchmark.tools import stall_watch
from benchmark.tools.stall_watch import HOOK_DIR, MARKER_ENV, StallWatch, hooked, with_stack_dumps

SERVER = textwrap.dedent("""
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    sleeper = subprocess.Popen(["sleep", "60"])
    print("children", child.pid, sleeper.pid, flush=True)

    def quiet_spell_here():
        time.sleep(QUIET)

    for phase in range(2):
        for _ in range(10):
            print("log line", flush=True)
            time.sleep(0.05)
        if phase == 0:
            quiet_spell_here()
    time.sleep(60)
""")


def _start_server(tmp_path: Path, quiet_s: float) -> tuple[subprocess.Popen, Path, Path]:
    markers = tmp_path / "markers"
    env = with_stack_dumps({k: v for k, v in os.environ.items() if k != MARKER_ENV}, markers)
    log = tmp_path / "server.log"
    script = tmp_path / "server.py"
    script.write_text(SERVER.replace("QUIET", str(quiet_s)))
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, str(script)], stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    return proc, log, markers


def _children(log: Path) -> tuple[int, int]:
    for _ in range(100):
        for line in log.read_text().splitlines():
            if line.startswith("children"):
                _, child, sleeper = line.split()
                return int(child), int(sleeper)
        time.sleep(0.05)
    raise AssertionError(log.read_text())


def test_env_puts_the_hook_first_and_keeps_the_path(tmp_path: Path) -> None:
    env = with_stack_dumps({"PYTHONPATH": "/a:/b", "X": "1"}, tmp_path / "m")
    assert env["PYTHONPATH"] == f"{HOOK_DIR}{os.pathsep}/a:/b" and env["X"] == "1"
    assert env[MARKER_ENV] == str(tmp_path / "m") and (tmp_path / "m").is_dir()
    assert with_stack_dumps({}, tmp_path / "m")["PYTHONPATH"] == str(HOOK_DIR)


def test_a_quiet_server_gets_its_stacks_dumped_and_lives_on(tmp_path: Path, monkeypatch) -> None:
    proc, log, markers = _start_server(tmp_path, quiet_s=2.5)
    watch = StallWatch(log, proc.pid, markers, quiet_s=1.0, dumps_per_stall=1, poll_s=0.05, stagger_s=0.3)
    sent: list[tuple[int, float]] = []
    real_kill = os.kill

    def recording_kill(pid: int, sig: int) -> None:
        if sig == signal.SIGUSR2:
            sent.append((pid, time.monotonic()))
        real_kill(pid, sig)

    monkeypatch.setattr(stall_watch.os, "kill", recording_kill)
    try:
        child, sleeper = _children(log)
        watch.start()
        watch.arm()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and log.read_text().count("log line") < 20:
            time.sleep(0.1)
        time.sleep(0.3)
        stalls = watch.stop()
        text = log.read_text()
        assert text.count("log line") == 20, text[-2000:]
        assert len(stalls) == 1, stalls
        assert 2.0 <= stalls[0].quiet_s <= 4.0 and stalls[0].dumps == 1 and stalls[0].ended_by == "log", stalls
        assert sorted(stalls[0].signalled) == sorted([proc.pid, child]), (stalls, proc.pid, child, sleeper)
        assert "quiet_spell_here" in text and "thread 0x" in text.lower(), text[-3000:]
        # One process at a time (they share the log): the signals stagger_s apart, and every dump line whole.
        assert len(sent) == 2 and sent[1][1] - sent[0][1] >= 0.3, sent
        dump = [line for line in text.splitlines() if line != "log line" and not line.startswith("children")]
        whole = re.compile(r'^((Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):|  File ".+", line \d+ in \S+|)$')
        assert all(whole.match(line) for line in dump), dump
        assert sleeper not in hooked([proc.pid, child, sleeper], markers)
        for pid in (proc.pid, child, sleeper):
            os.kill(pid, 0)  # all alive: the dump did not end the hooked ones, and sleep was never signalled
        assert proc.poll() is None
    finally:
        watch.stop()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_nothing_is_recorded_while_disarmed(tmp_path: Path) -> None:
    proc, log, markers = _start_server(tmp_path, quiet_s=1.5)
    watch = StallWatch(log, proc.pid, markers, quiet_s=0.5, poll_s=0.05)
    try:
        _children(log)
        watch.start()
        time.sleep(2.5)  # the quiet spell passes unwatched
        assert watch.stop() == [] and "quiet_spell_here" not in log.read_text()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_the_hook_runs_the_next_sitecustomize(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import os\nos.environ['OTHER_SITECUSTOMIZE_RAN'] = '1'\n")
    env = with_stack_dumps({**os.environ, "PYTHONPATH": str(other)}, tmp_path / "m")
    out = subprocess.run([sys.executable, "-c", "import os, signal, faulthandler; "
                          "print(os.environ.get('OTHER_SITECUSTOMIZE_RAN'), os.getpid())"],
                         env=env, capture_output=True, text=True, timeout=60)
    ran, pid = out.stdout.split()
    assert ran == "1", out
    assert (tmp_path / "m" / pid).exists()  # the hook left its marker


def test_a_client_that_starts_slowly_or_winds_down_is_not_a_server_stall(tmp_path: Path) -> None:
    """Armed while the log is quiet (a client importing for seconds before its first request): no stall until the
    log has grown once. A quiet spell that the disarm closes is recorded as the client's end."""
    log = tmp_path / "server.log"
    log.write_text("started\n")
    watch = StallWatch(log, os.getpid(), tmp_path / "none", quiet_s=0.3, poll_s=0.05)
    watch.start()
    watch.arm()
    time.sleep(1.0)  # quiet, but nothing logged since the arm: the client has not reached the server yet
    assert watch.stalls == []
    with open(log, "a") as f:
        f.write("first request\n")
    time.sleep(0.8)  # now a quiet spell counts
    stalls = watch.stop()
    assert len(stalls) == 1 and stalls[0].ended_by == "end" and stalls[0].signalled == [], stalls
