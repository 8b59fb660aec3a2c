"""Stack dumps when a launched server goes quiet while a client runs (GPU host diagnostics).

``with_stack_dumps(env, marker_dir)`` puts ``stack_dump_hook/`` first on ``PYTHONPATH`` and sets
``FASTPATH_STACK_DUMP_DIR``: every Python process started with that environment (the server, the
scheduler and detokenizer it spawns, the benchmark client) registers ``faulthandler`` on SIGUSR2,
prints all its threads' stacks to its stderr when it gets one and goes on, and leaves a file named by
its pid in ``marker_dir``.

``StallWatch(log, root_pid, marker_dir, extra_pids)`` is a thread that watches the server's log file.
When the log has not grown for ``quiet_s`` seconds while it is armed (a client is running and the
server has logged since it started: the server logs a
line per prefill and per 40 decode steps, so a running server is never that quiet), it sends SIGUSR2
to every live process of the server's tree and of ``extra_pids`` that left its marker (only those
registered the handler: SIGUSR2's default action ends a process, and a compiler or other non-Python
child inherits the environment without running the hook), one process every ``stagger_s`` (they share
the server's log, and dumps written at once interleave there), and records a ``Stall`` (when it began, relative to the watch's start;
how long it lasted once the log grew again; the processes signalled). At most ``dumps_per_stall``
dumps per stall, ``quiet_s`` apart. A quiet spell that the client's end closes (its wind-down after
the last response) is recorded with ``ended_by`` "end", one inside the run with "log". Session 24 met an 11-s stall of an EAGLE-3 kimi16 server under
SGLang's serving benchmark at concurrency 8 whose cause the logs did not show; in session 25 a 4-s
stall of the same server's first request dumped its scheduler inside Triton's compiler (a JIT compile
of the extend attention kernel).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from benchmark.soak.server import children_of, is_alive

HOOK_DIR = Path(__file__).resolve().parent / "stack_dump_hook"
MARKER_ENV = "FASTPATH_STACK_DUMP_DIR"


def with_stack_dumps(env: dict[str, str], marker_dir: Path) -> dict[str, str]:
    """``env`` with the hook first on ``PYTHONPATH`` and its processes' markers going to ``marker_dir``."""
    marker_dir.mkdir(parents=True, exist_ok=True)
    path = os.pathsep.join(p for p in (str(HOOK_DIR), env.get("PYTHONPATH", "")) if p)
    return {**env, "PYTHONPATH": path, MARKER_ENV: str(marker_dir)}


def hooked(pids: Iterable[int], marker_dir: Path) -> list[int]:
    """The live ``pids`` that registered the handler (left a marker in ``marker_dir``)."""
    return sorted(p for p in set(pids) if (marker_dir / str(p)).exists() and is_alive(p))


@dataclass
class Stall:
    began_s: float  # since the watch started
    quiet_s: float = 0.0  # from the log's last growth to its next (or to the watch's end)
    dumps: int = 0
    # "log": the log grew again (a stall inside the run); "end": the client ended first (its own
    # wind-down after the last response: not a stall of the server's)
    ended_by: str = ""
    signalled: list[int] = field(default_factory=list)


class StallWatch(threading.Thread):
    def __init__(self, log: Path, root_pid: int, marker_dir: Path,
                 extra_pids: Callable[[], Iterable[int]] = lambda: (), quiet_s: float = 3.0,
                 dumps_per_stall: int = 2, poll_s: float = 0.2, stagger_s: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.log, self.root_pid, self.marker_dir, self.extra_pids = log, root_pid, marker_dir, extra_pids
        self.quiet_s, self.dumps_per_stall, self.poll_s = quiet_s, dumps_per_stall, poll_s
        self.stagger_s = stagger_s  # between two processes' dumps
        self.stalls: list[Stall] = []
        self._armed = threading.Event()
        self._halt = threading.Event()
        self._t0 = self._grew = time.monotonic()
        self._size, self._heard = 0, False

    def arm(self) -> None:
        """Watch from the log's next growth on (a client starts: its imports take seconds before its first
        request, which the server logs)."""
        self._size, self._grew, self._heard = self._log_size(), time.monotonic(), False
        self._armed.set()

    def disarm(self) -> None:
        self._armed.clear()
        self._close_stall(time.monotonic(), "end")

    def stop(self) -> list[Stall]:
        self.disarm()
        self._halt.set()
        if self.is_alive():
            self.join(timeout=5)
        return self.stalls

    def _log_size(self) -> int:
        try:
            return self.log.stat().st_size
        except OSError:
            return 0

    def _targets(self) -> list[int]:
        return hooked([self.root_pid, *children_of(self.root_pid), *self.extra_pids()], self.marker_dir)

    def _close_stall(self, now: float, ended_by: str) -> None:
        if self.stalls and not self.stalls[-1].ended_by:
            self.stalls[-1].quiet_s = round(now - self._grew, 2)
            self.stalls[-1].ended_by = ended_by

    def run(self) -> None:
        last_dump = 0.0
        while not self._halt.wait(self.poll_s):
            if not self._armed.is_set():
                continue
            now, size = time.monotonic(), self._log_size()
            stall = self.stalls[-1] if self.stalls and not self.stalls[-1].ended_by else None
            if size != self._size:
                self._size, self._heard = size, True
                # A dump's own lines grow the log: the stall goes on until the log grows past them.
                if stall is None or now - last_dump > 1.0:
                    self._close_stall(now, "log")
                    self._grew = now
                continue
            if not self._heard:
                continue
            if now - self._grew < self.quiet_s:
                continue
            if stall is None:
                stall = Stall(began_s=round(self._grew - self._t0, 2))
                self.stalls.append(stall)
            if stall.dumps < self.dumps_per_stall and now - last_dump >= self.quiet_s:
                targets = self._targets()
                for i, pid in enumerate(targets):
                    # One process at a time: the server's processes share one log, and dumps written at
                    # once interleave there line by line.
                    if i and self._halt.wait(self.stagger_s):
                        break
                    try:
                        os.kill(pid, signal.SIGUSR2)
                    except OSError:
                        pass
                stall.dumps += 1
                stall.signalled = sorted(set(stall.signalled) | set(targets))
                last_dump = time.monotonic()
