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

Self-contained on purpose (standard library only): it runs before ``sys.path`` holds the
repository.
"""

from __future__ import annotations

import atexit
import json
import os
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
                    label, last = new, None
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
                "seconds": dict(self.seconds), "samples": rows}
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
    threading.Thread(target=sampler.run, name="fastpath-pysample", daemon=True).start()
    atexit.register(sampler.dump)
