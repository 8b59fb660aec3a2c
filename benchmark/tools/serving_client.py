"""SGLang's serving benchmark client kept alive between runs: ``python -m benchmark.tools.serving_client``.

``serving_bench.py`` used to start ``python -m sglang.benchmark.serving`` afresh for every point (a pre-warm run and
one per concurrency, per server mode), and each of those processes spent 20-25 s importing SGLang before it sent a
request: about 3 minutes of scarce GPU-host time in a call of 8 points. This process imports
``sglang.benchmark.serving`` once, then runs each point in-process through the module's own ``cli_main``.

Protocol, one JSON object a line:

* at start, on stdout: ``{"ready": true}``, or ``{"ready": false, "error": "..."}`` and exit status 1 when the
  import fails (its traceback goes to stderr);
* then, per line read from stdin, ``{"argv": [...], "log": "PATH"}`` (``argv``: the arguments that follow
  ``-m sglang.benchmark.serving``): file descriptors 1 and 2 go to ``PATH`` while the point runs (``os.dup2``, so
  C extensions' and other threads' output and the stack-dump hook's dumps land there too), ``sys.argv`` is set as
  a fresh process would see it, ``cli_main()`` runs, and ``{"rc": N}`` answers on stdout (``SystemExit``'s code,
  ``None`` meaning 0; 1 after any other exception, whose traceback goes to the log);
* end of stdin: exit status 0.

Outside a point, fd 1 points at stderr, so nothing printed can break the protocol, which writes to a duplicate of
the original stdout. ``cli_main`` parses ``sys.argv`` and calls ``run_benchmark``, which reseeds ``random`` and
``numpy`` from ``--seed`` on every call: a point's prompts are the same as a fresh process's.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import IO

MODULE = "sglang.benchmark.serving"


def exit_code(code: object) -> int:
    """The exit status ``SystemExit(code)`` gives a process (a message is printed to stderr, status 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run_point(cli_main: Callable[[], object], argv: list[str], log: str) -> int:
    """``cli_main()`` with ``sys.argv`` as ``python -m MODULE *argv`` sees it, fds 1 and 2 on ``log``; its status."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    target = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        os.close(target)
        sys.argv = [MODULE, *argv]
        try:
            cli_main()
            return 0
        except SystemExit as exc:
            return exit_code(exc.code)
        except Exception:  # noqa: BLE001 - the point failed, the client goes on
            traceback.print_exc()
            return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def answer(protocol: IO[str], doc: dict[str, object]) -> None:
    protocol.write(json.dumps(doc) + "\n")
    protocol.flush()


def serve(cli_main: Callable[[], object], requests: IO[str], protocol: IO[str]) -> None:
    """Run each request line of ``requests`` until its end, answering on ``protocol``."""
    while line := requests.readline():
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            argv, log = [str(a) for a in request["argv"]], str(request["log"])
        except (ValueError, KeyError, TypeError) as exc:
            answer(protocol, {"rc": 2, "error": f"bad request: {exc}"})
            continue
        try:
            rc = run_point(cli_main, argv, log)
        except OSError as exc:  # the log cannot be opened
            answer(protocol, {"rc": 1, "error": f"{type(exc).__name__}: {exc}"})
            continue
        answer(protocol, {"rc": rc})


def main() -> int:
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # stray prints (the import's, between points) go to stderr, never into the protocol
    try:
        cli_main = importlib.import_module(MODULE).cli_main
    except Exception as exc:  # noqa: BLE001 - say why, the caller prints our stderr's tail
        traceback.print_exc()
        answer(protocol, {"ready": False, "error": f"{type(exc).__name__}: {exc}"[:500]})
        return 1
    answer(protocol, {"ready": True})
    serve(cli_main, sys.stdin, protocol)
    return 0


if __name__ == "__main__":
    sys.exit(main())
