"""``demo.sh``, the one command from a clone to an EAGLE-3 answer: its CPU half.

Each precondition it refuses (wrong Python, no CUDA driver, a driver too old for torch 2.11's
CUDA 13, too little disk) ends in one line and exit 2 before anything is installed; an
environment that already holds the fork is reused; without a GPU it stops after the install
and says what it verified. The install itself is docker/install.sh, tested in test_docker.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sglang_fastpath.pins import fastpath_version

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "demo.sh"
FORK = fastpath_version()


def _tool(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def _demo(env_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "SGLANG_FASTPATH_ENV": str(env_dir), "SGLANG_FASTPATH_PYTHON": sys.executable,
            "SGLANG_FASTPATH_NVIDIA_SMI": "no-such-nvidia-smi", **env}
    return subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=120, env=full)


@pytest.mark.parametrize("smi_output, message", [
    ("echo 535.104.05", "NVIDIA driver 535.104.05 is older than 580"),
    ('echo "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver"; exit 9',
     "no CUDA driver answers (NVIDIA-SMI has failed"),
])
def test_a_missing_or_old_driver_stops_before_the_install(tmp_path: Path, smi_output: str, message: str) -> None:
    smi = _tool(tmp_path, "nvidia-smi", smi_output + "\n")
    proc = _demo(tmp_path / "env", SGLANG_FASTPATH_NVIDIA_SMI=str(smi))
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "env").exists()


def test_a_python_without_a_lock_is_refused(tmp_path: Path) -> None:
    python = _tool(tmp_path, "python3.10", 'echo cp310\n')  # answers like a Python 3.10
    proc = _demo(tmp_path / "env", SGLANG_FASTPATH_PYTHON=str(python))
    assert proc.returncode == 2 and "no Python 3.12 or 3.11" in proc.stderr, proc.stderr
    assert not (tmp_path / "env").exists()


def test_too_little_disk_is_refused(tmp_path: Path) -> None:
    proc = _demo(tmp_path / "env", SGLANG_FASTPATH_MIN_FREE_GB="1000000000")
    assert proc.returncode == 2 and "the install needs 1000000000 GB" in proc.stderr, proc.stderr
    assert not (tmp_path / "env").exists()


def _fake_fork_env(env_dir: Path, version: str) -> None:
    """A venv whose metadata shows sglang ``version`` with the fork's fastpath.json."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    site = next(env_dir.glob("lib/python3*/site-packages"))
    info = site / f"sglang-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
    (info / "fastpath.json").write_text('{"version": "%s"}' % version)


def test_without_a_gpu_it_reuses_the_environment_and_stops(tmp_path: Path) -> None:
    _fake_fork_env(tmp_path / "env", FORK)
    proc = _demo(tmp_path / "env")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0] == f"demo.sh: reusing {tmp_path / 'env'} (sglang {FORK})"
    assert lines[1].startswith("demo.sh: no GPU here") and "the EAGLE-3 demo needs a GPU" in lines[1]
    assert len(lines) == 2


def test_an_environment_without_the_fork_is_installed_again(tmp_path: Path) -> None:
    _fake_fork_env(tmp_path / "env", "0.5.17")  # a manifest, but not of this release
    proc = _demo(tmp_path / "env", SGLANG_FASTPATH_MIN_FREE_GB="1000000000")  # stop at the disk check
    assert proc.returncode == 2 and "reusing" not in proc.stderr and "the install needs" in proc.stderr


def test_with_a_gpu_it_goes_on_to_the_demo(tmp_path: Path) -> None:
    smi = _tool(tmp_path, "nvidia-smi", "echo 580.95.05; echo 580.95.05\n")  # two GPUs, a new enough driver
    _fake_fork_env(tmp_path / "env", FORK)  # metadata only: the demo's module is not there
    proc = _demo(tmp_path / "env", SGLANG_FASTPATH_NVIDIA_SMI=str(smi))
    assert proc.returncode != 0 and "No module named sglang_fastpath" in proc.stderr, proc.stderr
    assert "no GPU here" not in proc.stderr
