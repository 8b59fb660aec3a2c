"""``demo.sh``, the one command from a clone to an EAGLE-3 answer: its CPU half.

Each precondition it refuses (wrong Python, no CUDA driver, a driver too old for torch 2.11's
CUDA 13, too little disk) ends in one line and exit 2 before anything is installed; an
environment that already holds the fork is reused; without a GPU it stops after the install
and says what it verified. The online install itself is docker/install.sh: CI runs demo.sh's
install half in test_docker.py (``image_env``). ``--bundle`` is tested here on a small bundle of
stand-in wheels (the real install code and pip, offline), and on the real slim bundle with
Python 3.12 in test_bundle.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from fastpath_fixtures import make_wheel

from sglang_fastpath.digest import sha256_of
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


# ---------------------------------------------------------------- --bundle, on stand-in wheels

# The stand-in CLI: prints what `python -m sglang_fastpath demo ...` was started with.
STANDIN_MAIN = """import json, os, sys
print(json.dumps({"argv": sys.argv[1:], "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
                  "flashinfer": os.environ.get("SGLANG_IS_FLASHINFER_AVAILABLE"),
                  "offline": os.environ.get("HF_HUB_OFFLINE")}))
"""


def _bundle(folder: Path, python: str = "%d.%d" % sys.version_info[:2], torch: str = "2.11.0") -> Path:
    """A bundle laid out like `sglang-fastpath bundle`'s (manifest.json, SHA256SUMS, wheels/), for this Python."""
    (folder / "wheels").mkdir(parents=True)
    make_wheel(folder / "wheels", "sglang", FORK, {"sglang/__init__.py": "",
                                               f"sglang-{FORK}.dist-info/fastpath.json": json.dumps({"version": FORK})})
    make_wheel(folder / "wheels", "sglang_fastpath", "0.1.0", {"sglang_fastpath/__init__.py": "",
                                                           "sglang_fastpath/__main__.py": STANDIN_MAIN})
    manifest = {"profile": "slim", "target": {"python": python, "implementation": "cp", "pip_args": []},
                "sglang": {"version": FORK}, "left_to_host": {"torch": torch}}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "manifest.json")
    (folder / "SHA256SUMS").write_text("".join(f"{sha256_of(p)}  {p.relative_to(folder)}\n" for p in files))
    return folder


def _demo_bundle(bundle: Path, site: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return _demo(site, SGLANG_FASTPATH_BUNDLE=str(bundle), **env) if not args else subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
        env={**os.environ, "SGLANG_FASTPATH_ENV": str(site), "SGLANG_FASTPATH_PYTHON": sys.executable,
             "SGLANG_FASTPATH_NVIDIA_SMI": "no-such-nvidia-smi", **env})


def test_bundle_installs_into_a_site_and_stops_without_a_gpu(tmp_path: Path) -> None:
    bundle, site = _bundle(tmp_path / "bundle"), tmp_path / "site"
    proc = _demo_bundle(bundle, site, "--bundle", str(bundle))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith(f"demo.sh: installing sglang {FORK} from the offline bundle {bundle}")
    assert lines[-2].startswith("install: 2 wheels installed into") and "SHA256SUMS (2 files)" in lines[-2]
    assert lines[-1].startswith("demo.sh: no GPU here") and "installed from the bundle" in lines[-1]
    assert [d.version for d in metadata.distributions(name="sglang", path=[str(site)])] == [FORK]
    again = _demo_bundle(bundle, site)  # SGLANG_FASTPATH_BUNDLE instead of --bundle: the same bundle, reused
    assert again.returncode == 0, again.stderr
    assert again.stderr.splitlines()[0].startswith(f"demo.sh: reusing {site} (sglang {FORK} from bundle ")
    assert len(again.stderr.strip().splitlines()) == 2


def test_bundle_with_a_gpu_runs_the_demo_from_the_site(tmp_path: Path) -> None:
    torch = metadata.version("torch")  # this Python's torch plays the host's
    bundle, site = _bundle(tmp_path / "bundle", torch=torch), tmp_path / "site"
    smi = _tool(tmp_path, "nvidia-smi", "echo 580.95.05\n")
    proc = _demo_bundle(bundle, site, "--bundle", str(bundle), "--log", "server.log",
                        SGLANG_FASTPATH_NVIDIA_SMI=str(smi))
    assert proc.returncode == 0, proc.stderr
    started = json.loads(proc.stdout.strip().splitlines()[-1])
    assert started["argv"] == ["demo", "--log", "server.log"]
    assert started["PYTHONPATH"].split(":")[0] == str(site.resolve())
    assert (started["flashinfer"], started["offline"]) == ("false", "1")  # slim: no flashinfer JIT; air-gapped


@pytest.mark.parametrize("case, message", [
    ("no bundle", "no offline bundle at"),
    ("other Python", "the bundle is for Python 3.99"),
    ("other torch", "the bundle was made for the host's torch 1.0.0"),
])
def test_bundle_preconditions_stop_before_the_install(tmp_path: Path, case: str, message: str) -> None:
    if case == "no bundle":
        bundle = tmp_path / "empty"
        bundle.mkdir()
    else:
        bundle = _bundle(tmp_path / "bundle", **({"python": "3.99"} if case == "other Python" else {"torch": "1.0.0"}))
    smi = _tool(tmp_path, "nvidia-smi", "echo 580.95.05\n")
    proc = _demo_bundle(bundle, tmp_path / "site", "--bundle", str(bundle), SGLANG_FASTPATH_NVIDIA_SMI=str(smi))
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "site").exists()


def test_a_damaged_bundle_is_refused_by_the_installer(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path / "bundle")
    next((bundle / "wheels").glob("sglang-*.whl")).write_bytes(b"damaged")
    proc = _demo_bundle(bundle, tmp_path / "site", "--bundle", str(bundle))
    assert proc.returncode == 1 and "bundle files differ from SHA256SUMS" in proc.stderr, proc.stderr
    assert "no GPU here" not in proc.stderr
