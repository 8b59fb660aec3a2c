from __future__ import annotations

import argparse
from pathlib import Path

from sglang_fastpath.bundle.build import BundleOptions, build_bundle
from sglang_fastpath.bundle.host_manifest import DEFAULT_HOST
from sglang_fastpath.bundle.profiles import ARCHES, DEFAULT_ARCHES, DEFAULT_PROFILE, PROFILES, SLIM_BUDGET_BYTES
from sglang_fastpath.errors import FastpathError
from sglang_fastpath.install.jit_cache import JIT_CACHE

_MIB = 1024 * 1024


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bundle",
        help="offline wheelhouse for a CPython 3.12 x86_64 GPU host: patched sglang + what the host lacks",
        description="Build an offline bundle: the patched sglang wheel and every distribution the host "
        "lacks (absent, or present at a version sglang's requirements exclude), install.sh (no network; "
        "--stock builds pristine 0.5.17 from the stock overlay), SHA256SUMS and manifest.json; with "
        "--jit-cache, SGLang's prebuilt JIT kernels too, which the install copies into the host's JIT cache. "
        "See docs/bundle.md.",
    )
    p.add_argument("--out", type=Path, required=True, help="bundle folder (empty, or a previous bundle)")
    p.add_argument("--profile", choices=PROFILES, default=DEFAULT_PROFILE,
                   help="slim: what an LLM server with Triton attention imports, trimmed to fit one device "
                   f"call ({SLIM_BUDGET_BYTES // _MIB} MiB); full: all of sglang's runtime dependencies the host "
                   f"lacks, several GB (default: {DEFAULT_PROFILE})")
    p.add_argument("--host-manifest", type=Path, default=DEFAULT_HOST,
                   help="what the host has, one 'name==version' or 'name' a line (default: the H200 device image)")
    p.add_argument("--arch", action="append", choices=ARCHES, default=None,
                   help="slim only: GPU whose sgl_kernel common_ops to keep (repeatable; default: "
                   f"{', '.join(DEFAULT_ARCHES)}); sm120 keeps the sm100 build, which every non-sm90 GPU loads")
    p.add_argument("--cache", type=Path, default=None, help="download cache (default: build/cache/bundle)")
    p.add_argument("--jit-cache", type=Path, action="append", default=None, metavar="DIR",
                   help="a TVM-FFI JIT cache folder (like ~/.cache/tvm-ffi: one "
                   "<module>__arch_<arch>__tvmffi_<version>/ folder per kernel): each folder's prebuilt <module>.so "
                   "ships in jit-cache/, and install.sh copies them into the host's cache (TVM_FFI_CACHE_DIR) so "
                   "SGLang skips their nvcc build (repeatable). 'sglang-fastpath warm-jit --arch 9.0 --cache-dir DIR' "
                   "on a machine with nvcc makes such a folder without a GPU")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.arch and args.profile != "slim":
        raise FastpathError("--arch only applies to --profile slim (full ships sgl_kernel whole)")
    arches = tuple(a for a in ARCHES if a in (args.arch or DEFAULT_ARCHES))
    bundle = build_bundle(BundleOptions(args.out, args.profile, args.host_manifest, arches, args.cache,
                                        tuple(args.jit_cache or ())))
    m = bundle.manifest
    sizes = {f["path"]: f["size"] for f in m["files"]}
    for wheel in m["wheels"]:
        print(f"{sizes[wheel['file']] / _MIB:9.1f} MiB  {wheel['file']}  ({wheel['origin']})")
    for kernel in m["jit_cache"]:
        path = f"{JIT_CACHE}/{kernel['dir']}/{kernel['file']}"
        print(f"{kernel['bytes'] / _MIB:9.1f} MiB  {path}  (JIT kernel, arch {kernel['arch']})")
    print(f"{len(m['wheels'])} wheels, {len(m['trimmed'])} trimmed, {len(m['jit_cache'])} JIT kernels; "
          f"{len(m['left_to_host'])} requirements left to the host, {len(m['not_shipped'])} not shipped "
          "(manifest.json)")
    verdict = "fits" if bundle.fits_device else "does NOT fit"
    print(f"{bundle.out}: {bundle.total_bytes / _MIB:.1f} MiB, {verdict} one device call's "
          f"{SLIM_BUDGET_BYTES // _MIB} MiB; install: bash {bundle.out}/install.sh SITE")
    return 0
