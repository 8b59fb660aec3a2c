"""Seed the host's TVM-FFI JIT cache with a bundle's prebuilt SGLang kernels (``bundle --jit-cache``).

Each ``jit-cache/<build folder>/<module>.so.xz`` of the bundle (manifest.json ``jit_cache``) is decompressed to
``${TVM_FFI_CACHE_DIR:-~/.cache/tvm-ffi}/<build folder>/<module>.so``, where SGLang's ``load_jit`` looks
before it runs nvcc. A file already there is kept (never overwritten). A kernel built for another GPU
architecture or tvm-ffi sits under another folder name and is simply never looked up; one that does not
load makes SGLang log a warning and build it as it would have anyway. So seeding only saves time, and a
failure to seed is a warning, not a failed install. Standard-library imports only, as ``install``.
"""

from __future__ import annotations

import lzma
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from sglang_fastpath.digest import sha256_of

JIT_CACHE = "jit-cache"  # the bundle's folder of kernels
XZ = ".xz"  # each stored xz-compressed: <module>.so.xz


@dataclass
class JitSeed:
    cache: Path
    seeded: int = 0
    present: int = 0  # already in the cache: kept
    failed: list[str] = field(default_factory=list)  # "<dir>/<file>: error"

    @property
    def line(self) -> str:
        """The install's one line about the cache."""
        kernels = "kernel" if self.seeded == 1 else "kernels"
        failed = f", {len(self.failed)} failed" if self.failed else ""
        return f"JIT cache: seeded {self.seeded} {kernels} into {self.cache} ({self.present} already there{failed})"

    @property
    def warning(self) -> str | None:
        if not self.failed:
            return None
        more = f" and {len(self.failed) - 1} more" if len(self.failed) > 1 else ""
        return (f"could not seed the JIT cache {self.cache} ({self.failed[0]}{more}): SGLang builds those kernels "
                "with nvcc on first use instead (set TVM_FFI_CACHE_DIR to a writable folder, or --no-jit-cache)")


def jit_cache_dir() -> Path:
    """Where SGLang's ``load_jit`` looks: ``$TVM_FFI_CACHE_DIR``, else ``~/.cache/tvm-ffi``."""
    return Path(os.environ.get("TVM_FFI_CACHE_DIR", "~/.cache/tvm-ffi")).expanduser()


def _plain(name: str) -> bool:
    """A single path component: a manifest entry cannot point outside the bundle or the cache."""
    return bool(name) and name not in (".", "..") and "/" not in name and os.sep not in name


def _seed_one(src: Path, target: Path, sha256: str) -> bool:
    """Decompress ``src`` to ``target`` unless it is there; True when written. Written under a temporary name
    and checked against ``sha256`` first, so a server starting meanwhile never loads half a file or a bad one."""
    if target.exists():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.seeding-{os.getpid()}")
    try:
        with lzma.open(src, "rb") as packed, partial.open("wb") as out:
            shutil.copyfileobj(packed, out)
        if sha256_of(partial) != sha256:
            raise OSError(f"decompressed {src.name} does not match its manifest sha256")
        partial.chmod(0o755)
        if target.exists():
            return False
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return True


def seed_jit_cache(bundle: Path, entries: list[dict], cache: Path | None = None) -> JitSeed | None:
    """Copy the bundle's kernels (manifest ``jit_cache`` entries) into ``cache`` (default: ``jit_cache_dir()``);
    None when the bundle has none."""
    if not entries:
        return None
    result = JitSeed(cache or jit_cache_dir())
    for entry in entries:
        name = f"{entry['dir']}/{entry['file']}"
        if not (_plain(entry["dir"]) and _plain(entry["file"])):
            result.failed.append(f"{name}: not a plain folder and file name")
            continue
        src = bundle / JIT_CACHE / entry["dir"] / f"{entry['file']}{XZ}"
        try:
            copied = _seed_one(src, result.cache / entry["dir"] / entry["file"], entry["sha256"])
        except (OSError, lzma.LZMAError) as exc:
            result.failed.append(f"{name}: {getattr(exc, 'strerror', None) or exc}")
            continue
        if copied:
            result.seeded += 1
        else:
            result.present += 1
    return result
