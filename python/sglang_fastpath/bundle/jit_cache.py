"""``sglang-fastpath bundle --jit-cache DIR``: SGLang's prebuilt JIT kernels, carried in the bundle's ``jit-cache/``.

SGLang 0.5.17 builds some CUDA kernels with nvcc on first use (the Marlin MoE GEMM: ~300 s on a GPU host)
and caches each under ``${TVM_FFI_CACHE_DIR:-~/.cache/tvm-ffi}/<module>__arch_<arch>__tvmffi_<version>/``
as ``<module>.so``; its ``load_jit`` loads that file when it is there (and rebuilds when it does not load).
A cache folder made on a build host (``sglang-fastpath warm-jit --arch 9.0 --cache-dir DIR``) is carried
here as ``jit-cache/<build folder>/<module>.so.xz``, the shared objects only, xz-compressed (the Marlin MoE
kernel for sm_90a: 3.3 MiB, 2.6 MiB compressed, which keeps the slim bundle inside one device call's carry);
the bundle's install seeds the host's cache with them (``install.jit_cache``).
"""

from __future__ import annotations

import lzma
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from sglang_fastpath.digest import sha256_of
from sglang_fastpath.errors import FastpathError
from sglang_fastpath.install.jit_cache import XZ

# SGLang's _jit_build_dir_name: f"{module_name}__arch_{arch}__tvmffi_{tvm_ffi version}".
_BUILD_DIR = re.compile(r"(?P<module>.+)__arch_(?P<arch>.+?)__tvmffi_(?P<tvmffi>.+)")


@dataclass(frozen=True)
class JitKernel:
    """One prebuilt kernel of a TVM-FFI cache: its build folder's name and its ``<module>.so``."""

    dir: str
    so: Path
    arch: str
    tvmffi: str


def parse_build_dir(name: str) -> tuple[str, str, str] | None:
    """(module, arch, tvm-ffi version) of a JIT build folder's name; None for any other name."""
    match = _BUILD_DIR.fullmatch(name)
    return (match["module"], match["arch"], match["tvmffi"]) if match else None


def _kernel(folder: Path) -> JitKernel | None:
    parsed = parse_build_dir(folder.name)
    if parsed is None or not folder.is_dir():
        return None
    module, arch, tvmffi = parsed
    so = folder / f"{module}.so"
    return JitKernel(folder.name, so, arch, tvmffi) if so.is_file() else None


def kernels_in(cache: Path) -> list[JitKernel]:
    """The prebuilt kernels of the TVM-FFI cache folder ``cache``, by build folder name (none if it is missing)."""
    if not cache.is_dir():
        return []
    return [k for k in map(_kernel, sorted(cache.iterdir())) if k is not None]


def find_kernels(cache: Path) -> list[JitKernel]:
    """The prebuilt kernels of the TVM-FFI cache folder ``cache``; FastpathError when it has none."""
    if not cache.is_dir():
        raise FastpathError(f"--jit-cache {cache}: no such folder (a TVM-FFI JIT cache, e.g. ~/.cache/tvm-ffi, "
                            "or one made by 'sglang-fastpath warm-jit --arch 9.0 --cache-dir DIR')")
    kernels = kernels_in(cache)
    if not kernels:
        hint = (f": give its parent folder, {cache.parent}" if _kernel(cache) is not None else
                ": build them with 'sglang-fastpath warm-jit --arch 9.0 --cache-dir DIR'")
        raise FastpathError(f"--jit-cache {cache} holds no prebuilt kernel (no <module>__arch_<arch>__tvmffi_<version>/"
                            f"<module>.so folder){hint}")
    return kernels


def collect_kernels(caches: tuple[Path, ...]) -> list[JitKernel]:
    """The kernels of every ``--jit-cache`` folder, by build folder; the same folder twice must be the same file."""
    found: dict[str, JitKernel] = {}
    for cache in caches:
        for kernel in find_kernels(cache):
            seen = found.setdefault(kernel.dir, kernel)
            if seen is not kernel and sha256_of(seen.so) != sha256_of(kernel.so):
                raise FastpathError(f"--jit-cache: {kernel.dir} differs between {seen.so.parents[1]} and "
                                    f"{cache}: give one of them")
    return [found[name] for name in sorted(found)]


def copy_kernels(kernels: list[JitKernel], dest: Path) -> list[dict]:
    """Compress each kernel's .so to ``dest/<build folder>/<module>.so.xz``; the manifest's ``jit_cache`` entries
    (``file``, ``bytes`` and ``sha256`` are the .so's, which the install checks after decompressing)."""
    entries = []
    for kernel in kernels:
        target = dest / kernel.dir / f"{kernel.so.name}{XZ}"
        target.parent.mkdir(parents=True, exist_ok=True)
        with kernel.so.open("rb") as src, lzma.open(target, "wb", preset=9) as out:
            shutil.copyfileobj(src, out)
        entries.append({"dir": kernel.dir, "file": kernel.so.name, "stored": target.name,
                        "bytes": kernel.so.stat().st_size, "sha256": sha256_of(kernel.so), "arch": kernel.arch,
                        "tvmffi": kernel.tvmffi})
    return entries
