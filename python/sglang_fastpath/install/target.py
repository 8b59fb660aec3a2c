"""The Python environment an install writes into: what its interpreter reports, and pip run by it.

``wheelhouse`` (the modes ``full`` and ``overlay``) and ``bundle`` (the offline bundle) share
this probe and this one ``pip install`` call.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sglang_fastpath.errors import FastpathError

_PROBE = """
import json, os, platform, sys, sysconfig
from importlib import metadata
try:
    version = metadata.version("sglang")
except metadata.PackageNotFoundError:
    version = None
marker = os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
print(json.dumps({
    "tag": "cp%d%d" % sys.version_info[:2],
    "machine": platform.machine(),
    "sglang": version,
    "purelib": sysconfig.get_paths()["purelib"],
    "externally_managed": os.path.isfile(marker) and sys.prefix == sys.base_prefix,
}))
"""


@dataclass(frozen=True)
class Target:
    """The Python environment being installed into, as its interpreter reports it."""

    python: str
    tag: str  # e.g. cp312
    machine: str
    sglang: str | None  # the installed sglang version, None when absent
    externally_managed: bool  # a PEP 668 system Python: pip needs --break-system-packages
    purelib: str = ""  # where pip installs pure-Python packages for this interpreter


def _target_env() -> dict[str, str]:
    """The environment for the target interpreter: without the driver's PYTHONPATH."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def run_python(python: str, code: str) -> dict:
    """Run ``code`` with the target interpreter; its last stdout line, parsed as JSON."""
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, env=_target_env())
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise FastpathError(f"{python} failed: {last}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def probe(python: str) -> Target:
    """What ``python`` is: its tag, machine, installed sglang, site and whether pip may write to it."""
    try:
        info = run_python(python, _PROBE)
    except FileNotFoundError:
        raise FastpathError(f"no interpreter at {python!r}: pass --python the environment's python") from None
    return Target(python, info["tag"], info["machine"], info["sglang"], info["externally_managed"], info["purelib"])


def pip_install(target: Target, *args: str, env: dict[str, str] | None = None, wheels: tuple[Path, ...] = ()) -> None:
    """``pip install --no-deps ARGS WHEELS`` with the target interpreter (``env`` added to its environment).

    The command is echoed first; many ``wheels`` of one folder are echoed as their count and folder.
    """
    cmd = [target.python, "-m", "pip", "install", "--no-deps", "--disable-pip-version-check"]
    if target.externally_managed:
        cmd.append("--break-system-packages")
    cmd += list(args)
    named = [str(w) for w in wheels]
    folders = {str(w.parent) for w in wheels}
    shown = named if len(named) < 4 or len(folders) > 1 else [f"<{len(named)} wheels of {folders.pop()}>"]
    print("+ " + " ".join(cmd + shown), flush=True)
    cmd += named
    proc = subprocess.run(cmd, env={**_target_env(), **(env or {})})
    if proc.returncode != 0:
        raise FastpathError(f"pip install exited with status {proc.returncode} (its message is above)")


def pip_check(python: str) -> list[str]:
    """``pip check``'s problem lines; empty when every requirement is met."""
    proc = subprocess.run([python, "-m", "pip", "check", "--disable-pip-version-check"],
                          capture_output=True, text=True, env=_target_env())
    if proc.returncode == 0:
        return []
    lines = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
    return lines or [proc.stderr.strip() or "pip check failed with no output"]


class VerifyError(FastpathError):
    """The install ran but its result is wrong (exit status 1)."""
