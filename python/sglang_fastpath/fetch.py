"""Download SGLang wheels from the package index and verify them against the pins."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from sglang_fastpath.digest import sha256_of
from sglang_fastpath.errors import FastpathError
from sglang_fastpath.paths import wheel_cache
from sglang_fastpath.pins import WheelPin, find_pin
from sglang_fastpath.pip_run import run_pip

_WHEEL_NAME = re.compile(r"^sglang-(?P<version>[^-]+)-(?P<py>[^-]+)-[^-]+-[^-]+\.whl$")


def wheel_version(path: Path) -> str:
    match = _WHEEL_NAME.match(path.name)
    if not match:
        raise FastpathError(f"{path.name} is not an sglang wheel file name (sglang-VERSION-PY-ABI-PLAT.whl)")
    return match.group("version")


def verify_wheel(path: Path, pin: WheelPin) -> Path:
    """Refuse ``path`` unless it is exactly the pinned wheel; return it."""
    if not path.is_file():
        raise FastpathError(f"wheel not found: {path}")
    version = wheel_version(path)
    if version != pin.version:
        raise FastpathError(
            f"{path.name} is sglang {version}, but the series is pinned to sglang {pin.version}; "
            f"use {pin.filename}"
        )
    actual = sha256_of(path)
    if actual != pin.sha256:
        raise FastpathError(
            f"{path.name} has sha256 {actual}, expected {pin.sha256} (pins.py); "
            "the file is corrupt or not the PyPI release: delete it and fetch again"
        )
    return path


def _pip_download(requirement: str, dest: Path, pin: WheelPin | None) -> None:
    args = ["download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(dest)]
    if pin is not None and pin.python_version:
        args += ["--python-version", pin.python_version, "--implementation", "cp"]
    if pin is not None and pin.platform:
        args += ["--platform", pin.platform]
    run_pip([*args, requirement], f"download {requirement}")


def fetch_pinned(version: str, python_tag: str | None = None, cache: Path | None = None) -> Path:
    """The verified pinned wheel for ``version``/``python_tag``, downloaded once into the cache."""
    pin = find_pin(version, python_tag)
    if pin is None:
        raise FastpathError(f"no pin for sglang {version} ({python_tag or 'default tag'}); see pins.py")
    cache = cache or wheel_cache()
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / pin.filename
    if not path.exists():
        _pip_download(f"sglang=={pin.version}", cache, pin)
    return verify_wheel(path, pin)


def released_versions() -> list[str]:
    """Every SGLang release on the package index, newest first (``pip index versions``)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "sglang"], capture_output=True, text=True
    )
    match = re.search(r"^Available versions: (.+)$", proc.stdout, re.MULTILINE)
    if proc.returncode != 0 or not match:
        raise FastpathError("could not ask the package index for the sglang releases (pip index versions sglang)")
    return [v.strip() for v in match.group(1).split(",") if v.strip()]


def newest_release() -> str:
    """The newest SGLang version on the package index."""
    return released_versions()[0]


def fetch_release(version: str | None, cache: Path | None = None) -> Path:
    """Any SGLang release (``None``: the newest on the index), unverified: for rebase previews."""
    version = version or newest_release()
    cache = (cache or wheel_cache()) / "unpinned"
    cache.mkdir(parents=True, exist_ok=True)
    existing = sorted(cache.glob(f"sglang-{version}-*.whl"))
    if not existing:
        _pip_download(f"sglang=={version}", cache, None)
        existing = sorted(cache.glob(f"sglang-{version}-*.whl"))
    if not existing:
        raise FastpathError(f"pip reported success but no sglang {version} wheel is in {cache}")
    return existing[0]
