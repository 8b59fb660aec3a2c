from __future__ import annotations

import argparse

from sglang_fastpath.host.jit_warm import DTYPES, KERNELS, cache_dir, warm


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "warm-jit",
        help="compile SGLang's slow JIT kernels (Marlin MoE) for this GPU before the first server start",
        description="SGLang 0.5.17 compiles the Marlin MoE GEMM (Kimi-K2.5's INT4 experts) with nvcc on first "
        "use, inside the first CUDA-graph capture: about 4.5 minutes on an H200 host, with no log line. This "
        "builds it now into the JIT cache (TVM_FFI_CACHE_DIR, default ~/.cache/tvm-ffi) that every later "
        "server on this host reuses. Needs the GPU and nvcc the server will use.",
    )
    p.add_argument("--kernels", default=",".join(KERNELS),
                   help=f"comma-separated, from: {', '.join(f'{k} ({v[2]})' for k, v in KERNELS.items())}")
    p.add_argument("--dtype", default="bfloat16", choices=DTYPES, help="activation dtype the server runs (--dtype)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    kernels = [k for k in args.kernels.split(",") if k]
    for done in warm(kernels, args.dtype):
        print(f"{done.kernel}: ready in {done.seconds:.1f} s")
    print(f"cache: {cache_dir()}")
    return 0
