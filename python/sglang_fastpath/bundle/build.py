"""``sglang-fastpath bundle``: an offline wheelhouse of the fork for a CPython 3.12 x86_64 GPU host.

The bundle folder holds:

- ``wheels/``: the patched sglang wheel and every distribution the host lacks (see
  ``bundle.plan``); for the slim profile some are trimmed (``wheel.trim``, ``bundle.profiles``);
- ``stock-overlay/``: the pristine 0.5.17 versions of the files the series changes
  (``files/``) and the list of files it adds (``REMOVE``), so that ``install.sh --stock``
  builds a stock SGLang site from the same bundle;
- ``jit-cache/``: with ``--jit-cache``, SGLang's prebuilt JIT kernels (``bundle.jit_cache``), which
  the install copies into the host's TVM-FFI cache;
- ``install.sh``: the offline installer; ``SHA256SUMS``, which it checks first;
- ``manifest.json``: every file with sha256 and size, the profile, what was trimmed, what
  is left to the host and what is not shipped at all.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from sglang_fastpath import __version__
from sglang_fastpath.bundle.host_manifest import DATA_DIR, DEFAULT_HOST, parse_host_manifest
from sglang_fastpath.bundle.host_pip import download, resolve, target_args, wheel_dist
from sglang_fastpath.bundle.jit_cache import collect_kernels, copy_kernels
from sglang_fastpath.bundle.plan import Plan, full_plan, slim_plan
from sglang_fastpath.bundle.profiles import (
    DEFAULT_ARCHES, DEFAULT_PROFILE, PROFILES, SLIM_BUDGET_BYTES, SLIM_OMITS_REASON, SLIM_PACKAGES, TARGET_PYTHON,
    slim_trims,
)
from sglang_fastpath.digest import sha256_of
from sglang_fastpath.errors import FastpathError
from sglang_fastpath.fetch import fetch_pinned
from sglang_fastpath.install.jit_cache import JIT_CACHE
from sglang_fastpath.paths import build_dir
from sglang_fastpath.pins import BASE_VERSION
from sglang_fastpath.pip_run import run_pip
from sglang_fastpath.wheel.build import BuiltWheel, build_wheels
from sglang_fastpath.wheel.trim import TrimResult, trim_wheel

TARGET_TAG = "cp" + TARGET_PYTHON.replace(".", "")
_OUTPUTS = ("wheels", "stock-overlay", JIT_CACHE, "install.sh", "SHA256SUMS", "manifest.json")


@dataclass(frozen=True)
class BundleOptions:
    out: Path
    profile: str = DEFAULT_PROFILE
    host_manifest: Path = DEFAULT_HOST
    arches: tuple[str, ...] = DEFAULT_ARCHES
    cache: Path | None = None  # default: build/cache/bundle
    jit_cache: tuple[Path, ...] = ()  # TVM-FFI cache folders whose prebuilt kernels ship in jit-cache/


@dataclass(frozen=True)
class Bundle:
    out: Path
    manifest: dict
    total_bytes: int  # every file of the bundle, manifest.json included

    @property
    def fits_device(self) -> bool:
        return self.total_bytes <= SLIM_BUDGET_BYTES


def _prepare(out: Path) -> None:
    """Empty ``out`` of a previous bundle; refuse a folder that holds anything else."""
    if out.exists() and any(out.iterdir()) and not (out / "manifest.json").is_file():
        raise FastpathError(f"--out {out} is not empty and holds no bundle (manifest.json): use an empty folder")
    for name in _OUTPUTS:
        path = out / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    (out / "wheels").mkdir(parents=True)


def _plan(opts: BundleOptions, fork: BuiltWheel, cache: Path) -> tuple[Plan, dict[str, Path], dict[str, str]]:
    """What to ship, where each wheel is, and why (by canonical name)."""
    host = parse_host_manifest(opts.host_manifest)
    root = wheel_dist(fork.path)
    why = {root.name: f"the fork, sglang {fork.version}"}
    if opts.profile == "slim":
        paths = download([p.requirement for p in SLIM_PACKAGES], cache / "downloads")
        why |= {canonicalize_name(p.name): p.why for p in SLIM_PACKAGES}
        plan = slim_plan(root.name, {root.name: root, **{n: wheel_dist(p) for n, p in paths.items()}}, host)
    else:
        dists = resolve(fork.path, cache) | {root.name: root}
        plan = full_plan(root.name, dists, host)
        paths = download([f"{n}=={v}" for n, v in plan.ship.items() if n != root.name], cache / "downloads")
    if plan.conflicts:
        raise FastpathError(f"{len(plan.conflicts)} version conflicts with host manifest {opts.host_manifest}: "
                            + "; ".join(plan.conflicts[:3]) + " (fix the pins in bundle/profiles.py)")
    return plan, paths | {root.name: fork.path}, why


def _stock_overlay(fork: BuiltWheel, dest: Path) -> dict:
    """Pristine copies of the files the series modifies or deletes; REMOVE lists those it adds."""
    pristine = fetch_pinned(BASE_VERSION, TARGET_TAG)
    restored, added = [], []
    (dest / "files").mkdir(parents=True)
    with zipfile.ZipFile(pristine) as zf:
        names = set(zf.namelist())
        for member in fork.patched_files:
            if member in names:
                target = dest / "files" / member
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zf.read(member))
                restored.append(member)
            else:
                added.append(member)
    (dest / "REMOVE").write_text("".join(f"{m}\n" for m in added))
    return {"base_wheel": pristine.name, "base_sha256": sha256_of(pristine), "restored": restored, "removed": added}


def _install_script(dest: Path) -> None:
    """The bundle's install.sh: runs ``sglang-fastpath install --mode bundle`` from the bundle's tool wheel."""
    shutil.copyfile(DATA_DIR / "install.sh", dest)
    dest.chmod(0o755)


def _files(out: Path) -> list[dict]:
    return [{"path": p.relative_to(out).as_posix(), "sha256": sha256_of(p), "size": p.stat().st_size}
            for p in sorted(out.rglob("*")) if p.is_file() and p.name not in ("manifest.json", "SHA256SUMS")]


def _trim_entry(result: TrimResult, reason: str) -> dict:
    return {"wheel": result.path.name, "upstream": result.upstream, "upstream_sha256": result.upstream_sha256,
            "reason": reason, "dropped_bytes": result.dropped_bytes,
            "dropped": {p: {"files": n, "bytes": b} for p, (n, b) in result.by_pattern.items()},
            "stripped": result.stripped, "edited": result.edited}


def _tool_wheel(dest: Path) -> Path:
    """Build the sglang-fastpath wheel (pure Python) into ``dest``, so the host has the CLI too.

    Built from a clean copy of ``python/``: setuptools packs whatever an earlier build left in
    ``python/build/lib``, so a module since moved or deleted would ship again."""
    source = Path(__file__).resolve().parents[2]
    before = set(dest.glob("sglang_fastpath-*.whl"))
    with tempfile.TemporaryDirectory() as tmp:
        clean = Path(tmp) / "python"
        shutil.copytree(source, clean, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        run_pip(["wheel", "-q", "--no-deps", "-w", str(dest), str(clean)],
                f"build the sglang-fastpath wheel from {source}")
    built = sorted(set(dest.glob("sglang_fastpath-*.whl")) - before)
    if not built:
        raise FastpathError(f"pip reported success but wrote no sglang-fastpath wheel into {dest}")
    return built[-1]


def build_bundle(opts: BundleOptions) -> Bundle:
    """Write the bundle described by ``opts`` into ``opts.out`` and return its manifest."""
    if opts.profile not in PROFILES:
        raise FastpathError(f"--profile {opts.profile}: choose one of {', '.join(PROFILES)}")
    cache = opts.cache or build_dir() / "cache" / "bundle"
    kernels = collect_kernels(opts.jit_cache)  # before _prepare: a wrong --jit-cache leaves --out as it was
    _prepare(opts.out)
    fork = build_wheels(cache / "fork", [TARGET_TAG])[0]
    plan, paths, why = _plan(opts, fork, cache)
    trims = slim_trims(opts.arches) if opts.profile == "slim" else {}
    wheels, trimmed = [], []
    for name in sorted(plan.ship):
        src = paths[name]
        if name in trims:
            result = trim_wheel(src, trims[name], opts.out / "wheels")
            trimmed.append(_trim_entry(result, trims[name].reason))
            dest, origin = result.path, "trimmed"
        else:
            dest = opts.out / "wheels" / src.name
            shutil.copyfile(src, dest)
            origin = "fork" if src == fork.path else "index"
        wheels.append({"file": f"wheels/{dest.name}", "project": name, "version": plan.ship[name],
                       "origin": origin, "why": why.get(name, "required (pip resolution)")})
    tool = _tool_wheel(opts.out / "wheels")
    wheels.append({"file": f"wheels/{tool.name}", "project": "sglang-fastpath", "version": __version__,
                   "origin": "tool", "why": "this CLI on the host: install (install.sh runs it), doctor, demo, models"})
    overlay = _stock_overlay(fork, opts.out / "stock-overlay")
    jit_cache = copy_kernels(kernels, opts.out / JIT_CACHE)
    _install_script(opts.out / "install.sh")
    files = _files(opts.out)
    (opts.out / "SHA256SUMS").write_text("".join(f"{f['sha256']}  {f['path']}\n" for f in files))
    manifest = {
        "format": 1,
        "created_by": f"sglang-fastpath {__version__}",
        "profile": opts.profile,
        "arches": list(opts.arches) if opts.profile == "slim" else None,
        "target": {"python": TARGET_PYTHON, "implementation": "cp", "pip_args": target_args()},
        "sglang": {"version": fork.version, "base_version": BASE_VERSION, "patched_files": fork.patched_files},
        "host_manifest": {"file": opts.host_manifest.name, "sha256": sha256_of(opts.host_manifest)},
        "wheels": wheels,
        "trimmed": trimmed,
        "stock_overlay": overlay,
        "jit_cache": jit_cache,
        "left_to_host": dict(sorted(plan.on_host.items())),
        "not_shipped": dict(sorted(plan.unmet.items())),
        "not_shipped_reason": SLIM_OMITS_REASON if opts.profile == "slim" else
        "required, but pip did not resolve it for this machine's Python (environment markers)",
        "device_carry_budget_bytes": SLIM_BUDGET_BYTES,
        "files": files,
    }
    manifest["files_bytes"] = sum(f["size"] for f in files)
    (opts.out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(p.stat().st_size for p in opts.out.rglob("*") if p.is_file())
    return Bundle(opts.out, manifest, total)
