from __future__ import annotations

import argparse
import os

from sglang_fastpath.host.jit_warm import DTYPES, KERNELS, cache_dir, warm


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "warm-jit",
        help="compile SGLang's slow JIT kernels (Marlin MoE) for this GPU before the first server start",
        description="SGLang 0.5.17 compiles the Marlin MoE GEMM (Kimi-K2.5's INT4 experts) with nvcc on first "
        "use, inside the first CUDA-graph capture: about 4.5 minutes on an H200 host, with no log line. This "
        "builds it now into the JIT cache (TVM_FFI_CACHE_DIR, default ~/.cache/tvm-ffi) that every later "
        "server on this host reuses. Needs the GPU and nvcc the server will use, or, with --arch, only nvcc: "
        "then it builds for that architecture on any machine (a CPU-only build host, for a bundle's "
        "--jit-cache).",
    )
    p.add_argument("--kernels", default=",".join(KERNELS),
                   help=f"comma-separated, from: {', '.join(f'{k} ({v[2]})' for k, v in KERNELS.items())}")
    p.add_argument("--dtype", default="bfloat16", choices=DTYPES, help="activation dtype the server runs (--dtype)")
    p.add_argument("--arch", metavar="MAJOR.MINOR",
                   help="build for this compute capability instead of the visible GPU's (9.0: H100/H200, 12.0: "
                   "RTX PRO 6000 Blackwell); needs no GPU")
    p.add_argument("--cache-dir", metavar="DIR",
                   help="JIT cache folder to build into (sets TVM_FFI_CACHE_DIR; default: its value, else "
                   "~/.cache/tvm-ffi)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    kernels = [k for k in args.kernels.split(",") if k]
    if args.cache_dir:
        os.environ["TVM_FFI_CACHE_DIR"] = os.path.abspath(os.path.expanduser(args.cache_dir))
    for done in warm(kernels, args.dtype, args.arch):
        print(f"{done.kernel}: ready in {done.seconds:.1f} s")
    print(f"cache: {cache_dir()}")
    return 0
