"""pip, pointed at the GPU host (CPython 3.12, manylinux x86_64): download pinned wheels, resolve.

Downloads land in a cache folder and are reused when a wheel of the same project and
version with a tag the host accepts is already there. Resolution reads metadata only
(``pip install --dry-run --report``), so the full dependency set is known without
fetching the large wheels.
"""

from __future__ import annotations

import email.parser
import hashlib
import json
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from packaging import tags
from packaging.requirements import Requirement
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from sglang_fastpath.bundle.profiles import TARGET_PLATFORMS, TARGET_PYTHON
from sglang_fastpath.errors import FastpathError
from sglang_fastpath.pip_run import run_pip


@dataclass(frozen=True)
class Dist:
    """One resolved distribution: its name, version and Requires-Dist lines."""

    name: str  # canonical
    version: str
    requires: tuple[str, ...]


def target_args() -> list[str]:
    """pip options that make pip choose wheels for the host instead of this machine."""
    args = ["--only-binary=:all:", "--python-version", TARGET_PYTHON, "--implementation", "cp"]
    for platform in TARGET_PLATFORMS:
        args += ["--platform", platform]
    return args


@lru_cache(maxsize=1)
def _host_tags() -> dict[tags.Tag, int]:
    """Tags the host accepts, most preferred first (lower = better)."""
    version = tuple(int(p) for p in TARGET_PYTHON.split("."))
    ordered = [*tags.cpython_tags(version, platforms=TARGET_PLATFORMS),
               *tags.compatible_tags(version, f"cp{version[0]}{version[1]}", TARGET_PLATFORMS)]
    return {tag: rank for rank, tag in reversed(list(enumerate(ordered)))}


def find_cached(cache: Path, name: str, version: str) -> Path | None:
    """The best wheel in ``cache`` for ``name==version`` that the host can install, if any."""
    want_name, want_version = canonicalize_name(name), Version(version)
    best: tuple[int, Path] | None = None
    for path in cache.glob("*.whl"):
        try:
            dist, ver, _build, wheel_tags = parse_wheel_filename(path.name)
        except InvalidWheelFilename:
            continue
        if dist != want_name or ver != want_version:
            continue
        ranks = [_host_tags()[t] for t in wheel_tags if t in _host_tags()]
        if ranks and (best is None or min(ranks) < best[0]):
            best = (min(ranks), path)
    return best[1] if best else None


def download(requirements: list[str], cache: Path) -> dict[str, Path]:
    """Wheels for each exact ``name==version`` requirement, from the cache or the package index."""
    cache.mkdir(parents=True, exist_ok=True)
    pins = {}
    for text in requirements:
        req = Requirement(text)
        spec = [s for s in req.specifier if s.operator == "=="]
        if len(spec) != 1:
            raise FastpathError(f"'{text}' is not an exact pin (name==version)")
        pins[canonicalize_name(req.name)] = spec[0].version
    missing = [f"{n}=={v}" for n, v in pins.items() if find_cached(cache, n, v) is None]
    if missing:
        run_pip(["download", "--no-deps", "-q", *target_args(), "-d", str(cache), *missing],
             f"download {len(missing)} wheels for CPython {TARGET_PYTHON} x86_64")
    found = {}
    for name, version in pins.items():
        path = find_cached(cache, name, version)
        if path is None:
            raise FastpathError(f"pip downloaded no host-compatible wheel of {name}=={version} into {cache}")
        found[name] = path
    return found


def wheel_dist(path: Path) -> Dist:
    """Name, version and requirements of a wheel, from its METADATA."""
    with zipfile.ZipFile(path) as zf:
        meta = [n for n in zf.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
        if len(meta) != 1:
            raise FastpathError(f"{path.name}: expected one .dist-info/METADATA, found {len(meta)}")
        msg = email.parser.Parser().parsestr(zf.read(meta[0]).decode("utf-8", "replace"), headersonly=True)
    return Dist(canonicalize_name(msg["Name"]), msg["Version"], tuple(msg.get_all("Requires-Dist") or ()))


def resolve(root_wheel: Path, cache: Path) -> dict[str, Dist]:
    """Everything ``root_wheel`` needs on the host, as pip resolves it from scratch (metadata only).

    The report is cached next to the downloads, keyed by the root's requirements and the
    target, since a resolution takes minutes.
    """
    key = json.dumps([wheel_dist(root_wheel).requires, target_args()]).encode()
    report_path = cache / f"resolve-{hashlib.sha256(key).hexdigest()[:16]}.json"
    if not report_path.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            partial = Path(tmp) / "report.json"
            run_pip(["install", "--dry-run", "--ignore-installed", "-q", *target_args(), "--target",
                  str(Path(tmp) / "site"), "--report", str(partial), str(root_wheel)],
                 f"resolve the dependencies of {root_wheel.name}")
            shutil.move(str(partial), report_path)
    report = json.loads(report_path.read_text())
    dists = {}
    for item in report.get("install", []):
        meta = item["metadata"]
        dist = Dist(canonicalize_name(meta["name"]), meta["version"], tuple(meta.get("requires_dist") or ()))
        dists[dist.name] = dist
    return dists
