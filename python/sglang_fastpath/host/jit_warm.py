"""Compile SGLang's slow JIT kernels once per host, before the first server start.

SGLang 0.5.17 builds some CUDA kernels with nvcc the first time a model uses them, for the
GPU it runs on, and caches the shared object under ``TVM_FFI_CACHE_DIR`` (default
``~/.cache/tvm-ffi``). The Marlin MoE GEMM that Kimi-K2.5's INT4 experts run is the slow
one: 273 s on an H200 host, spent inside the first CUDA-graph capture with no log line.
Building it here, ahead of time, makes that first start as fast as later ones.

With ``arch`` ("9.0" for H100/H200, "12.0" for RTX PRO 6000 Blackwell) the build needs no GPU, only
nvcc and an environment where the fork's sglang imports: it targets that architecture through
SGLang's own ``override_jit_cuda_arch``, so the cache folder (same name, same ``.so``) is the one a
server on such a GPU looks for. ``sglang-fastpath bundle --jit-cache`` carries such a folder to
air-gapped hosts, whose install then seeds their cache.
"""

from __future__ import annotations

import contextlib
import importlib
import re
import time
from dataclasses import dataclass
from pathlib import Path

from sglang_fastpath.bundle.jit_cache import kernels_in
from sglang_fastpath.errors import FastpathError
from sglang_fastpath.install.jit_cache import jit_cache_dir

# name -> (module, builder, what it is for); the builder takes (dtype, is_ep, has_bias) in 0.5.17.
KERNELS: dict[str, tuple[str, str, str]] = {
    "marlin-moe": (
        "sglang.kernels.ops.moe.moe_wna16_marlin",
        "_jit_moe_wna16_marlin_module",
        "Marlin MoE GEMM (INT4/INT8 weight-only experts: Kimi-K2.5, GPTQ/AWQ MoE)",
    ),
}
DTYPES = ("bfloat16", "float16")
# name -> the start of its cache folders' names (SGLang's load_jit: "sgl_kernel_jit_" + its marker args).
CACHE_PREFIX: dict[str, str] = {"marlin-moe": "sgl_kernel_jit_moe_wna16_marlin_"}
# quantization_config.quant_method values whose MoE experts run the Marlin kernel in 0.5.17
# (docs/moe-path-kimi-int4.md: CompressedTensorsWNA16MoE; GPTQ/AWQ Marlin MoE).
MARLIN_QUANT_METHODS = ("compressed-tensors", "gptq", "awq")


@dataclass(frozen=True)
class Warmed:
    kernel: str
    seconds: float


cache_dir = jit_cache_dir  # where SGLang's load_jit looks: $TVM_FFI_CACHE_DIR, else ~/.cache/tvm-ffi


def _builder(kernel: str):
    module_name, attr, _ = KERNELS[kernel]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise FastpathError(f"{kernel}: cannot import {module_name} ({exc}); install SGLang 0.5.17 (the fork's "
                            "wheel or the bundle) in this environment") from exc
    builder = getattr(module, attr, None)
    if builder is None:
        raise FastpathError(f"{kernel}: {module_name} has no {attr}; this SGLang is not the 0.5.17 layout "
                            "warm-jit knows")
    return builder


def built_for(kernel: str, capability: tuple[int, int], cache: Path | None = None) -> list[Path]:
    """The cache folders that hold ``kernel`` built for a GPU of ``capability`` (any source hash, any tvm-ffi)."""
    folder = cache or cache_dir()
    arch = re.compile(rf"{capability[0]}\.{capability[1]}[a-z]?")  # SGLang's target: 9.0a, 12.0f, 8.9
    return [folder / k.dir for k in kernels_in(folder)
            if k.dir.startswith(CACHE_PREFIX[kernel]) and arch.fullmatch(k.arch)]


def parse_arch(text: str) -> tuple[int, int]:
    """ "9.0" -> (9, 0): a CUDA compute capability, as ``torch.cuda.get_device_capability`` gives it."""
    match = re.fullmatch(r"(\d+)\.(\d+)", text.strip())
    if not match:
        raise FastpathError(f"--arch {text!r}: write the compute capability as MAJOR.MINOR, e.g. 9.0 (H100/H200) "
                            "or 12.0 (RTX PRO 6000 Blackwell)")
    return int(match.group(1)), int(match.group(2))


def _target(arch: str | None):
    """The context the builds run in: this host's GPU, or ``arch`` through SGLang's arch override."""
    if arch is None:
        import torch

        if not torch.cuda.is_available():
            raise FastpathError("no CUDA GPU visible: the kernels are compiled for a GPU architecture; run warm-jit "
                                "on the GPU host, or name the architecture with --arch (needs nvcc, no GPU)")
        return contextlib.nullcontext()
    major, minor = parse_arch(arch)
    try:
        from sglang.kernels.jit.utils.arch import override_jit_cuda_arch
    except ImportError as exc:
        raise FastpathError(f"--arch: cannot import sglang.kernels.jit.utils.arch ({exc}); install the fork's "
                            "wheel (or the bundle) in this environment") from exc
    return override_jit_cuda_arch(major, minor)


def warm(kernels: list[str], dtype: str = "bfloat16", arch: str | None = None) -> list[Warmed]:
    """Build each kernel for this host's GPU, or for ``arch`` without one (a cache hit takes well under a second)."""
    unknown = [k for k in kernels if k not in KERNELS]
    if unknown:
        raise FastpathError(f"unknown kernel {', '.join(unknown)}: choose from {', '.join(KERNELS)}")
    if dtype not in DTYPES:
        raise FastpathError(f"--dtype {dtype}: choose from {', '.join(DTYPES)}")
    import torch

    target = _target(arch)
    builders = {k: _builder(k) for k in kernels}
    done = []
    with target:
        for kernel, builder in builders.items():
            start = time.perf_counter()
            try:
                builder(getattr(torch, dtype), False, False)
            except Exception as exc:  # nvcc missing or failing: say which kernel, keep SGLang's message
                raise FastpathError(f"{kernel}: the JIT build failed: {type(exc).__name__}: {exc}") from exc
            done.append(Warmed(kernel, time.perf_counter() - start))
    return done
