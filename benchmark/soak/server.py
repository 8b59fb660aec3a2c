"""The server under soak: started here (``python -m sglang.launch_server``) or already running.

``LaunchedServer`` starts the real server from whatever SGLang is first on
``PYTHONPATH``, on loopback with metrics on, logs to a file, and stops its
whole process group at the end. It remembers the server's process tree once
healthy, so the soak can tell afterwards whether a scheduler or detokenizer
process died. ``server_facts`` reads what the soak needs to know about the
model (name, vocab size, context length) from the server itself, and
``kv_reading`` reads the KV pool usage (``/v1/loads`` and ``/metrics``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmark.soak.http_client import Endpoint, get

METRIC = "sglang:num_used_tokens"
LOG_PATTERNS = {
    "memory_leak_warnings": re.compile(r"memory leak detected", re.I),
    "tracebacks": re.compile(r"^Traceback \(most recent call last\)", re.M),
    "device_asserts": re.compile(r"device-side assert", re.I),
}


class ServerFailed(RuntimeError):
    """The server did not come up (or went away) while the soak needed it."""


@dataclass(frozen=True)
class ServerFacts:
    model: str
    vocab_size: int
    context_len: int
    # the running-batch cap the server resolved (0.5.17 sets 48 for a speculative server unless
    # --max-running-requests is given): what a TTFT under load is to be read against
    max_running_requests: int | None = None


def children_of(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def process_name(pid: int) -> str:
    """The command line of ``pid`` (SGLang sets ``sglang::scheduler`` and the like as its process
    titles), or its ``comm`` where the command line is empty; "" once it is gone."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        return (cmdline or Path(f"/proc/{pid}/comm").read_text().strip())[:160]
    except OSError:
        return ""


def is_core(pid: int, name: str, root: int) -> bool:
    """Whether the server stops serving without this process: the launched one, and SGLang's own
    (scheduler, detokenizer, tokenizer: named ``sglang::...`` or running SGLang's module). Other
    descendants (compile workers, resource trackers) may exit on their own."""
    return pid == root or "sglang" in name


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def is_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def launch_command(args: list[str], port: int) -> list[str]:
    cmd = [sys.executable, "-m", "sglang.launch_server", *args]
    if "--host" not in args:
        cmd += ["--host", "127.0.0.1"]
    if "--port" not in args:
        cmd += ["--port", str(port)]
    if "--enable-metrics" not in args:
        cmd.append("--enable-metrics")
    return cmd


def without_speculation(args: list[str]) -> list[str]:
    """The same launch arguments with every ``--speculative-*`` option (and its value) removed."""
    out: list[str] = []
    skip_value = False
    for arg in args:
        if skip_value:
            skip_value = False
            if not arg.startswith("--"):
                continue
        if arg.startswith("--speculative-"):
            skip_value = "=" not in arg
            continue
        out.append(arg)
    return out


class LaunchedServer:
    """``python -m sglang.launch_server ARGS`` in its own process group, logging to ``log``."""

    def __init__(self, args: list[str], port: int, log: Path, env: dict[str, str] | None = None) -> None:
        self.cmd = launch_command(args, port)
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        self.env = {**os.environ, **env} if env else None  # None: this process's environment
        self.proc: subprocess.Popen | None = None
        self.tree: dict[int, str] = {}  # pid -> name, as the tree was once healthy

    def start(self, timeout_s: float) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "w") as out:
            out.write("$ " + shlex.join(self.cmd) + "\n")
            out.flush()
            self.proc = subprocess.Popen(self.cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                         env=self.env)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServerFailed(f"the server exited with status {self.proc.returncode} while starting (log: {self.log})")
            reply = asyncio.run(get(Endpoint.parse(self.url), "/health", timeout=5))
            if reply.status == 200:
                pids = {self.proc.pid} | children_of(self.proc.pid)
                self.tree = {pid: process_name(pid) for pid in pids}
                return
            time.sleep(2)
        raise ServerFailed(f"the server was not healthy after {timeout_s:.0f} s (log: {self.log})")

    def _gone(self, core: bool) -> list[str]:
        root = self.proc.pid if self.proc else -1
        return [f"{pid} {name}".strip() for pid, name in sorted(self.tree.items())
                if is_core(pid, name, root) == core and not is_alive(pid)]

    def dead_processes(self) -> list[str]:
        """The server's own processes (``is_core``) of its tree as it was once healthy that are gone now."""
        return self._gone(core=True)

    def exited_helpers(self) -> list[str]:
        """The other processes of that tree that are gone now: reported, not a failure."""
        return self._gone(core=False)

    def log_findings(self) -> dict[str, int]:
        text = self.log.read_text(errors="replace") if self.log.is_file() else ""
        return {name: len(pattern.findall(text)) for name, pattern in LOG_PATTERNS.items()}

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def parse_metric(text: str, name: str = METRIC) -> float | None:
    """The largest value of ``name`` over its label sets in a Prometheus text page, or None."""
    values = [
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and line[len(name) : len(name) + 1] in ("{", " ")
    ]
    return max(values) if values else None


@dataclass(frozen=True)
class KvReading:
    """KV tokens in use, two ways.

    ``loads``: ``num_used_tokens`` of ``/v1/loads`` summed over DP ranks, computed by the
    scheduler when asked. ``gauge``: ``sglang:num_used_tokens`` on ``/metrics``, the value
    the scheduler last published (during a load at its prefill/decode log lines; when idle
    only once the published running-request count is wrong or 30 s have passed).
    """

    loads: float | None
    gauge: float | None

    @property
    def value(self) -> float | None:
        return self.loads if self.loads is not None else self.gauge


async def kv_reading(ep: Endpoint) -> KvReading:
    loads = None
    reply = await get(ep, "/v1/loads?include=core", timeout=10)
    data = reply.json() if reply.status == 200 else None
    if isinstance(data, dict) and isinstance(data.get("loads"), list):
        values = [r.get("num_used_tokens") for r in data["loads"] if isinstance(r, dict)]
        if values and all(isinstance(v, (int, float)) for v in values):
            loads = float(sum(values))
    reply = await get(ep, "/metrics", timeout=10)
    gauge = parse_metric(reply.body.decode("utf-8", "replace")) if reply.status == 200 else None
    return KvReading(loads, gauge)


async def server_facts(ep: Endpoint, vocab_size: int | None, context_len: int | None) -> ServerFacts:
    """Model name, vocab size and context length: given, else read from the server and its model's config."""
    models = (await get(ep, "/v1/models", timeout=10)).json() or {}
    card = (models.get("data") or [{}])[0]
    model = card.get("id", "default")
    context_len = context_len or card.get("max_model_len")
    if vocab_size is None:
        info = (await get(ep, "/get_model_info", timeout=10)).json() or {}
        config = Path(str(info.get("model_path", ""))) / "config.json"
        if config.is_file():
            data = json.loads(config.read_text())
            vocab_size = data.get("vocab_size") or (data.get("text_config") or {}).get("vocab_size")
    if not vocab_size or not context_len:
        raise ServerFailed(
            f"could not learn the vocab size ({vocab_size}) or context length ({context_len}) from the server: "
            "pass --vocab-size and --context-len"
        )
    return ServerFacts(model, int(vocab_size), int(context_len), await max_running_requests(ep))


async def max_running_requests(ep: Endpoint) -> int | None:
    """``max_running_requests`` of ``/server_info`` (the resolved server args); None where it is not served."""
    reply = await get(ep, "/server_info", timeout=10)
    info = reply.json() if reply.status == 200 else None
    value = info.get("max_running_requests") if isinstance(info, dict) else None
    return value if isinstance(value, int) else None
