"""Compile SGLang's slow JIT kernels once per host, before the first server start.

SGLang 0.5.17 builds some CUDA kernels with nvcc the first time a model uses them, for the
GPU it runs on, and caches the shared object under ``TVM_FFI_CACHE_DIR`` (default
``~/.cache/tvm-ffi``). The Marlin MoE GEMM that Kimi-K2.5's INT4 experts run is the slow
one: 273 s on an H200 host, spent inside the first CUDA-graph capture with no log line.
Building it here, ahead of time, makes that first start as fast as later ones.
"""

from __future__ import annotations

import importlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from sglang_fastpath.errors import FastpathError

# name -> (module, builder, what it is for); the builder takes (dtype, is_ep, has_bias) in 0.5.17.
KERNELS: dict[str, tuple[str, str, str]] = {
    "marlin-moe": (
        "sglang.kernels.ops.moe.moe_wna16_marlin",
        "_jit_moe_wna16_marlin_module",
        "Marlin MoE GEMM (INT4/INT8 weight-only experts: Kimi-K2.5, GPTQ/AWQ MoE)",
    ),
}
DTYPES = ("bfloat16", "float16")


@dataclass(frozen=True)
class Warmed:
    kernel: str
    seconds: float


def cache_dir() -> Path:
    return Path(os.environ.get("TVM_FFI_CACHE_DIR", "~/.cache/tvm-ffi")).expanduser()


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


def warm(kernels: list[str], dtype: str = "bfloat16") -> list[Warmed]:
    """Build each kernel for this host's GPU (a cache hit takes well under a second)."""
    unknown = [k for k in kernels if k not in KERNELS]
    if unknown:
        raise FastpathError(f"unknown kernel {', '.join(unknown)}: choose from {', '.join(KERNELS)}")
    if dtype not in DTYPES:
        raise FastpathError(f"--dtype {dtype}: choose from {', '.join(DTYPES)}")
    import torch

    if not torch.cuda.is_available():
        raise FastpathError("no CUDA GPU visible: the kernels are compiled for this host's GPU architecture; "
                            "run warm-jit on the GPU host")
    builders = {k: _builder(k) for k in kernels}
    done = []
    for kernel, builder in builders.items():
        start = time.perf_counter()
        try:
            builder(getattr(torch, dtype), False, False)
        except Exception as exc:  # nvcc missing or failing: say which kernel, keep SGLang's message
            raise FastpathError(f"{kernel}: the JIT build failed: {type(exc).__name__}: {exc}") from exc
        done.append(Warmed(kernel, time.perf_counter() - start))
    return done
