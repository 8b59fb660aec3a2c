"""``python -m pip`` of this interpreter, a failure turned into one line."""

from __future__ import annotations

import subprocess
import sys

from sglang_fastpath.errors import FastpathError


def run_pip(args: list[str], what: str) -> subprocess.CompletedProcess[str]:
    """``python -m pip ARGS``; on failure one line: what pip could not do and its last error."""
    proc = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        errors = [line for line in proc.stderr.splitlines() if line.startswith("ERROR")]
        detail = (errors or proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise FastpathError(f"pip could not {what}: {detail}")
    return proc
