"""Where a worker process writes what it measured: JSON lines, appended and flushed one by one.

Line types: ``record`` (a figure), ``error`` (a point or phase that failed, with the
traceback's tail) and ``info`` (versions, runners). A sink without a path (TP ranks
other than 0) drops everything; errors are printed to stderr either way.
"""

from __future__ import annotations

import json
import sys
import traceback
from typing import Any


class Sink:
    def __init__(self, path: str | None) -> None:
        self.path = path

    def _write(self, item: dict[str, Any]) -> None:
        if self.path:
            with open(self.path, "a") as out:
                out.write(json.dumps(item, default=str) + "\n")

    def record(self, **fields: Any) -> None:
        self._write({"type": "record", **fields})

    def info(self, what: str, data: dict[str, Any]) -> None:
        self._write({"type": "info", "what": what, "data": {"what": what, **data}})

    def error(self, where: str, exc: BaseException) -> None:
        tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-3000:]
        print(f"[bench] FAILED {where}: {type(exc).__name__}: {exc}\n{tail}", file=sys.stderr, flush=True)
        self._write({"type": "error", "where": where, "error": f"{type(exc).__name__}: {exc}", "traceback": tail})
