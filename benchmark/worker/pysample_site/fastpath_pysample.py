"""A sampling profiler of SGLang's scheduler loop, started at interpreter start-up.

Loaded by this folder's ``sitecustomize.py`` when the folder is on ``PYTHONPATH`` and
``FASTPATH_PYSAMPLE_DIR`` is set, so it reaches the scheduler processes the engine spawns
without patching SGLang. In a process whose title starts with ``sglang::scheduler`` (``FASTPATH_PYSAMPLE_TITLE``) a daemon
thread records the main thread's Python stack every ``FASTPATH_PYSAMPLE_INTERVAL_US``
(default 500 µs), weighted by the wall time since its last look, but only while the file ``$FASTPATH_PYSAMPLE_DIR/on`` exists; the file's
text labels the samples (the benchmark writes e.g. ``spec-bs1`` around the runs it wants
sampled). The thread needs the GIL to look, so the GIL switch interval is lowered to the
a tenth of the sampling interval while sampling (the wait to look is short, the look is timely). Microseconds per (label, stack) are written as JSON to
``samples-<pid>.json`` every two seconds and at exit; ``benchmark/pysample.py`` reads them.

Beside the stacks, each label gets the process's host facts over its sampled spans (``host``):
CPU seconds (user, system) and context switches (voluntary, involuntary) of the whole process, the
CPUs the main thread was seen on (looked up every 50 ms) with their clock (kHz, where cpufreq
exposes it), and the process's CPU affinity. Host-bound engines differ 1.2-2x in speed between
processes of one configuration; these say whether the scheduler thread was preempted, moved or
slowed when they do. It also gets the cyclic garbage collector's passes over those spans, per generation:
how many and their wall seconds (``gc``), from ``gc.callbacks`` in the process being sampled.

Self-contained on purpose (standard library only): it runs before ``sys.path`` holds the
repository.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import resource
import sys
import threading
import time
from collections import Counter

MAX_DEPTH = 60
TITLE_PREFIX = os.environ.get("FASTPATH_PYSAMPLE_TITLE", "sglang::scheduler")


def _title() -> str:
    try:
        with open("/proc/self/cmdline", "rb") as f:
            return f.read().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return ""


def _main_thread_cpu(tid: int) -> int | None:
    """The CPU the thread ``tid`` of this process last ran on (field 39 of its ``stat``)."""
    try:
        with open(f"/proc/self/task/{tid}/stat") as f:
            return int(f.read().rpartition(")")[2].split()[36])
    except (OSError, ValueError, IndexError):
        return None


def _cpu_khz(cpu: int) -> int | None:
    try:
        with open(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


USAGE_KEYS = ("cpu_user_s", "cpu_sys_s", "ctx_voluntary", "ctx_involuntary")


def _usage() -> dict:
    """Process-wide CPU seconds and context switches so far (``USAGE_KEYS``)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {"cpu_user_s": ru.ru_utime, "cpu_sys_s": ru.ru_stime, "ctx_voluntary": ru.ru_nvcsw,
            "ctx_involuntary": ru.ru_nivcsw}


class HostFacts:
    """Per label: CPU time, context switches and the main thread's CPUs over the sampled spans."""

    def __init__(self, tid: int) -> None:
        self.tid = tid
        self.labels: dict = {}
        self.open: tuple | None = None  # (label, usage at its start, wall at its start)
        self.gc_started: float | None = None

    def _facts(self, label: str) -> dict:
        return self.labels.setdefault(label, {"wall_s": 0.0, "cpus": {}, "gc": {}, **dict.fromkeys(USAGE_KEYS, 0)})

    def gc_pass(self, phase: str, info: dict) -> None:
        """``gc.callbacks`` hook: count each collector pass and its wall time under the open label."""
        if phase == "start":
            self.gc_started = time.perf_counter()
            return
        started, self.gc_started = self.gc_started, None
        if self.open is None or started is None:
            return
        seen = self._facts(self.open[0])["gc"].setdefault(str(info.get("generation", "?")), {"passes": 0, "s": 0.0})
        seen["passes"] += 1
        seen["s"] += time.perf_counter() - started

    def begin(self, label: str, now: float) -> None:
        self.open = (label, _usage(), now)

    def end(self, now: float) -> None:
        if self.open is None:
            return
        label, start, t0 = self.open
        self.open = None
        facts = self._facts(label)
        facts["wall_s"] += now - t0
        for key, value in _usage().items():
            facts[key] += value - start[key]

    def look(self) -> None:
        """Note the CPU the main thread is on now (and its clock) for the open label."""
        if self.open is None:
            return
        cpu = _main_thread_cpu(self.tid)
        if cpu is None:
            return
        seen = self._facts(self.open[0])["cpus"].setdefault(str(cpu), {"looks": 0, "khz_max": 0})
        seen["looks"] += 1
        seen["khz_max"] = max(seen["khz_max"], _cpu_khz(cpu) or 0)

    def record(self) -> dict:
        try:
            affinity = sorted(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            affinity = []
        return {"affinity": affinity, "labels": self.labels}


def _frame_name(code) -> str:
    path = code.co_filename
    cut = path.rfind("sglang/")
    path = path[cut:] if cut >= 0 else os.path.basename(path)
    return f"{path}:{code.co_qualname if hasattr(code, 'co_qualname') else code.co_name}"


class Sampler:
    """Counts the main thread's stacks under the label in ``<folder>/on``."""

    def __init__(self, folder: str, interval_s: float) -> None:
        self.folder = folder
        self.interval_s = interval_s
        self.counts: Counter = Counter()
        self.seconds: Counter = Counter()  # label -> wall seconds sampled
        self.main_id = threading.main_thread().ident
        self.names: dict = {}
        self.dirty = False
        self.switch_default = sys.getswitchinterval()
        self.host = HostFacts(threading.main_thread().native_id)

    def _label(self) -> str | None:
        try:
            with open(os.path.join(self.folder, "on")) as f:
                return f.read().strip() or "on"
        except OSError:
            return None

    def _stack(self, frame) -> tuple:
        names = []
        while frame is not None and len(names) < MAX_DEPTH:
            code = frame.f_code
            name = self.names.get(code)
            if name is None:
                name = self.names[code] = _frame_name(code)
            names.append(name)
            frame = frame.f_back
        return tuple(reversed(names))

    def run(self) -> None:
        while not _title().startswith(TITLE_PREFIX):  # the title is set early in the scheduler process
            time.sleep(1.0)
        label, next_check, next_dump, last = None, 0.0, time.monotonic() + 2.0, None
        while True:
            now = time.monotonic()
            frame = sys._current_frames().get(self.main_id) if label is not None else None
            if frame is not None and last is not None:
                # Weighted by the wall time since the last look: while the main thread holds the
                # GIL this thread waits for it, and that wait was spent where the stack is now.
                self.counts[(label, self._stack(frame))] += int(1e6 * (now - last))
                self.seconds[label] += now - last
                self.dirty = True
            last = now if label is not None else None
            if now >= next_check:
                new = self._label()
                if new != label:
                    sys.setswitchinterval(self.interval_s / 10 if new else self.switch_default)
                    self.host.end(now)
                    if new:
                        self.host.begin(new, now)
                    label, last = new, None
                    self.dirty = True
                self.host.look()
                next_check = now + 0.05
            if now >= next_dump:
                self.dump()
                next_dump = now + 2.0
            time.sleep(self.interval_s if label is not None else 0.05)

    def dump(self) -> None:
        if not self.dirty:
            return
        self.dirty = False
        rows = [{"label": label, "stack": list(stack), "n": n} for (label, stack), n in self.counts.items()]
        body = {"pid": os.getpid(), "title": _title(), "interval_s": self.interval_s,
                "seconds": dict(self.seconds), "samples": rows, "host": self.host.record()}
        path = os.path.join(self.folder, f"samples-{os.getpid()}.json")
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(body, f)
        os.replace(tmp, path)


def start_if_enabled() -> None:
    folder = os.environ.get("FASTPATH_PYSAMPLE_DIR")
    if not folder:
        return
    interval_s = float(os.environ.get("FASTPATH_PYSAMPLE_INTERVAL_US", "500")) / 1e6
    sampler = Sampler(folder, interval_s)
    gc.callbacks.append(sampler.host.gc_pass)
    threading.Thread(target=sampler.run, name="fastpath-pysample", daemon=True).start()
    atexit.register(sampler.dump)
