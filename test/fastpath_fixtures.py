"""Helpers shared by the CPU tests: a throw-away project root; an interpreter of a given Python version; the
environment of a child process that runs a test file as a script; a small pure-Python wheel pip installs."""

from __future__ import annotations

import configparser
import glob
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

from sglang_fastpath.wheel.archive import record_hash

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


def make_wheel(folder: Path, name: str, version: str, files: dict[str, bytes | str]) -> Path:
    """A pure-Python wheel pip installs: ``files`` (text is UTF-8), METADATA, WHEEL and a RECORD with their hashes."""
    info = f"{name}-{version}.dist-info/"
    files = {**files, info + "METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             info + "WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        record = ""
        for member, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            zf.writestr(member, data)
            record += f"{member},{record_hash(data)},{len(data)}\n"
        zf.writestr(info + "RECORD", record + f"{info}RECORD,,\n")
    return path


def installed_gpu_module(name: str, what: str):
    """The installed fork's module ``name`` for a GPU test; skips without CUDA, or when it does not import
    (``what``: the fork it needs, e.g. "the fork with patch 0032")."""
    import importlib

    import pytest
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    try:
        return importlib.import_module(name)
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"{name} not importable ({what} is not installed): {type(e).__name__}: {e}")


def replay_in_cuda_graph(call, out) -> None:
    """Capture ``call(out)`` in a CUDA graph (after one warm call), NaN-fill ``out``, replay and synchronize: what
    the GPU tests check a kernel's output against after an eager run."""
    import torch

    call(out)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call(out)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
