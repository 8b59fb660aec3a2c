"""Helpers shared by the CPU tests: a throw-away project root; an interpreter of a given Python version; the
environment of a child process that runs a test file as a script."""

from __future__ import annotations

import configparser
import glob
import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def make_project(tmp: Path, with_patches: bool = False) -> Path:
    """A project root under ``tmp`` with a patches/series (empty, or a copy of the repo's)."""
    root = tmp / "project"
    (root / "patches").mkdir(parents=True)
    if with_patches:
        shutil.copytree(REPO / "patches", root / "patches", dirs_exist_ok=True)
    else:
        (root / "patches" / "series").write_text("# test series\n")
    return root


def find_python(version: str) -> str | None:
    """An interpreter of Python ``version`` (e.g. "3.12") on PATH or under pyenv that can make a venv, else None."""
    candidates = [shutil.which(f"python{version}"),
                  *sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}*/bin/python{version}")))]
    for candidate in filter(None, candidates):
        if subprocess.run([candidate, "-c", "import ensurepip, venv"], capture_output=True).returncode == 0:
            return candidate
    return None


def script_env(**extra: str) -> dict[str, str]:
    """This environment plus ``extra`` for a child ``python test/<file>.py``: PYTHONPATH starts with the
    import roots of pytest.ini's ``pythonpath`` (pytest puts them on its own sys.path only)."""
    ini = configparser.ConfigParser()
    ini.read(REPO / "pytest.ini")
    roots = [str(REPO / root) for root in ini["pytest"]["pythonpath"].split()]
    if os.environ.get("PYTHONPATH"):
        roots.append(os.environ["PYTHONPATH"])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(roots), **extra}
