"""Install an offline bundle (``sglang-fastpath bundle``) with no network: ``install --mode bundle``.

The bundle's own ``install.sh`` runs this module from the bundle's ``sglang_fastpath`` wheel (a
host without a checkout), ``demo.sh --bundle`` runs it from the checkout; both through
``sglang-fastpath install``'s code (``target.py``: the same interpreter probe and pip call).

Steps: refuse a Python other than the bundle's (unless ``cross``: pip then installs the
bundle's wheels by their tags and nothing is imported); check every file against
``SHA256SUMS``; ``pip install --no-index --no-deps`` of every wheel of the bundle into a site
folder (``pip --target`` with the host's tags) or the interpreter's own environment; with
``stock``, turn the patched sglang back into pristine SGLang (the stock overlay); then verify
that every wheel's distribution is in the site at the wheel's version and that sglang is the
fork (its ``fastpath.json``) or, with ``stock``, the base release; last, unless ``jit_cache`` is off,
copy the bundle's prebuilt JIT kernels into the host's TVM-FFI cache (``install.jit_cache``: never
overwriting, a failure only a warning). Only standard-library imports:
it runs on a GPU host that has torch but not necessarily ``packaging``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from sglang_fastpath.digest import sha256_of
from sglang_fastpath.errors import FastpathError
from sglang_fastpath.install.jit_cache import JitSeed, seed_jit_cache
from sglang_fastpath.install.lock import canonical_name
from sglang_fastpath.install.target import Target, VerifyError, pip_install, probe
from sglang_fastpath.pins import BASE_VERSION
from sglang_fastpath.wheel.archive import MANIFEST

STOCK_MARKER = "STOCK"


@dataclass(frozen=True)
class BundleSpec:
    """What to install: the bundle folder, where (a site folder, or None for the environment), how."""

    bundle: Path
    site: Path | None
    stock: bool = False
    cross: bool = False
    jit_cache: bool = True  # seed the host's JIT cache with the bundle's kernels


@dataclass
class BundleReport:
    dest: Path
    version: str  # the installed sglang's version: the fork's, or BASE_VERSION with stock
    wheels: int
    files_checked: int  # files of SHA256SUMS
    warnings: list[str] = field(default_factory=list)
    jit: JitSeed | None = None  # the JIT cache seeding; None when skipped or the bundle has no kernels


def read_manifest(bundle: Path) -> dict:
    path = bundle / "manifest.json"
    if not path.is_file():
        raise FastpathError(f"no bundle at {bundle} (no manifest.json): make one with 'sglang-fastpath bundle --out DIR'")
    return json.loads(path.read_text())


def check_sums(bundle: Path) -> int:
    """The number of files checked; VerifyError when one is missing or differs from SHA256SUMS."""
    sums = bundle / "SHA256SUMS"
    if not sums.is_file():
        raise VerifyError(f"{bundle} has no SHA256SUMS: copy the bundle again")
    lines = [line.split("  ", 1) for line in sums.read_text().splitlines() if line.strip()]
    bad = [name for digest, name in lines if not (bundle / name).is_file() or sha256_of(bundle / name) != digest]
    if bad:
        raise VerifyError(f"bundle files differ from SHA256SUMS ({bad[0]}" + (f" and {len(bad) - 1} more" if len(bad) > 1
                          else "") + "): copy the bundle again")
    return len(lines)


def wheel_project(wheel: Path) -> tuple[str, str]:
    """(canonical project name, version) from a wheel's file name."""
    name, version = wheel.name.split("-")[:2]
    return canonical_name(name), version


def apply_stock_overlay(bundle: Path, dest: Path, fork_version: str) -> None:
    """Turn the fork in ``dest`` into pristine SGLang BASE_VERSION: restore, delete, relabel."""
    files = bundle / "stock-overlay" / "files"
    if files.is_dir():
        shutil.copytree(files, dest, dirs_exist_ok=True)
    remove = bundle / "stock-overlay" / "REMOVE"
    if remove.is_file():
        for name in filter(None, remove.read_text().splitlines()):
            (dest / name).unlink(missing_ok=True)
    info, stock = dest / f"sglang-{fork_version}.dist-info", dest / f"sglang-{BASE_VERSION}.dist-info"
    meta = info / "METADATA"
    meta.write_text("".join(f"Version: {BASE_VERSION}\n" if line.startswith("Version: ") else line
                            for line in meta.read_text().splitlines(keepends=True)))
    (info / STOCK_MARKER).write_text(f"pristine SGLang {BASE_VERSION}: sglang-fastpath bundle stock overlay over "
                                     f"{fork_version}\n")
    shutil.rmtree(stock, ignore_errors=True)
    info.rename(stock)
    for cache in list((dest / "sglang").rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)


def verify_site(dest: Path, wheels: list[Path], fork_version: str, stock: bool) -> str:
    """Every wheel's distribution in ``dest`` at its version; sglang the fork (or stock). sglang's version."""
    found = {canonical_name(d.metadata["Name"]): d for d in metadata.distributions(path=[str(dest)])}
    for wheel in wheels:
        name, version = wheel_project(wheel)
        want = BASE_VERSION if stock and name == "sglang" else version
        dist = found.get(name)
        if dist is None or dist.version != want:
            have = f"{dist.version}" if dist else "nothing"
            raise VerifyError(f"{dest} has {have} for {name}, not {want} from {wheel.name}")
    sglang = found["sglang"]
    if stock:
        if sglang.read_text(STOCK_MARKER) is None:
            raise VerifyError(f"{dest}: sglang {sglang.version} carries no {STOCK_MARKER} marker after --stock")
    else:
        manifest = json.loads(sglang.read_text(MANIFEST) or "{}")
        if manifest.get("version") != fork_version:
            raise VerifyError(f"{dest}: sglang has no {MANIFEST} for {fork_version}: the fork wheel did not land")
    return sglang.version


def sgl_kernel_warning(dest: Path) -> str | None:
    """sgl_kernel loads sm90/common_ops on compute capability 9.0 and sm100/ on any other GPU: is it there?"""
    if not (dest / "sgl_kernel").is_dir() or shutil.which("nvidia-smi") is None:
        return None
    proc = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                          capture_output=True, text=True)
    cc = (proc.stdout.strip().splitlines() or [""])[0].strip() if proc.returncode == 0 else ""
    if not cc:
        return None
    ops = "sm90" if cc == "9.0" else "sm100"
    if any((dest / "sgl_kernel" / ops).glob("common_ops.*")):
        return None
    return (f"this GPU (compute capability {cc}) loads sgl_kernel/{ops}/common_ops, which this bundle left out "
            "(rebuild with 'sglang-fastpath bundle --arch')")


def _check_python(target: Target, manifest: dict, spec: BundleSpec) -> None:
    want = manifest["target"]["python"]
    have = f"{target.tag[2]}.{target.tag[3:]}"
    if spec.site is None and spec.cross:
        raise FastpathError(f"installing into {target.python}'s environment imports it: give a site folder with --cross")
    if have != want and not spec.cross:
        raise FastpathError(f"this bundle is for Python {want} but {target.python} is {have} "
                            "(--cross installs without importing)")


def install_bundle(spec: BundleSpec, python: str) -> BundleReport:
    manifest = read_manifest(spec.bundle)
    target = probe(python)
    _check_python(target, manifest, spec)
    checked = check_sums(spec.bundle)
    wheels = sorted((spec.bundle / "wheels").glob("*.whl"))
    args = ["--no-index", "--find-links", str(spec.bundle / "wheels"), "--no-compile", "--no-cache-dir",
            "--root-user-action=ignore", "-q"]
    if spec.site is not None:
        spec.site.mkdir(parents=True, exist_ok=True)
        dest = spec.site.resolve()
        # The host's tags (manifest "target"): pip --target then installs for the host, not for this Python.
        args += ["--target", str(dest), "--upgrade", *manifest["target"]["pip_args"]]
    else:
        dest = Path(target.purelib)
        args.append("--only-binary=:all:")
    # No pip configuration file: only this bundle's wheels, whatever the host's pip.conf says.
    pip_install(target, *args, env={"PIP_CONFIG_FILE": os.devnull}, wheels=tuple(wheels))
    fork = manifest["sglang"]["version"]
    if spec.stock:
        apply_stock_overlay(spec.bundle, dest, fork)
    version = verify_site(dest, wheels, fork, spec.stock)
    jit = seed_jit_cache(spec.bundle, manifest.get("jit_cache", [])) if spec.jit_cache else None
    warnings = [w for w in (sgl_kernel_warning(dest), jit.warning if jit else None) if w]
    return BundleReport(dest, version, len(wheels), checked, warnings, jit)
