"""Cross-compile ``verify_tma._stage1`` for sm_90 (or another arch) on a CPU machine, as a GPU launch would
specialize it at Kimi's shapes (MLA 576/512, one KV head, bf16, 64-token pages, chain mask), and report shared
memory, registers, spills (ptxas -v with the Triton wheel's own ptxas) and what the PTX contains: TMA
(``cp.async.bulk.tensor``), ``wgmma``, mbarrier waits, ``setmaxnreg`` (warp specialization's register
reallocation) and the number of warps.

    python -m fastpath_kernels.attention_tma.xcompile [--arch 90] [--heads 8,32] [--k 4] [--tiles n64s2,n32s4]

Needs only the ``triton`` wheel (no GPU; torch is stubbed when missing, so a bare ``pip install triton==3.6.0``
venv works: that is the GPU host's Triton).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import types

try:
    import torch  # noqa: F401
except ImportError:  # a bare triton venv: the kernel module needs torch only at call time
    sys.modules["torch"] = types.ModuleType("torch")

import triton  # noqa: E402

from fastpath_kernels.attention_tma import verify_tma as vt  # noqa: E402
from fastpath_kernels.ptxas import ptxas_usage  # noqa: E402


def compile_stage1(arch: int = 90, k: int = 4, heads: int = 8, max_splits: int = 16, use_tma: bool = True,
                   **tile) -> dict:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    cfg = {**vt.DEFAULT_TILE, **tile}
    block_h, _ = vt.tile_rows(k, heads, cfg["block_m"])
    direct = max_splits == 1
    out = "*bf16" if direct else "*fp32"
    kernel = vt._stage1.fn if hasattr(vt._stage1, "fn") and not hasattr(vt._stage1, "arg_names") else vt._stage1
    pointers = {"Q": "*bf16", "K_Ext": "*bf16", "V_Ext": "*bf16", "KV": "*bf16",
                "desc_lat": f"tensordesc<bf16[{cfg['block_n']},256]>",
                "desc_pe": f"tensordesc<bf16[{cfg['block_n']},64]>",
                "kv_indptr": "*i32", "kv_indices": "*i64", "mask_ptr": "*i32", "mask_indptr": "*i32",
                "Out": out, "Lse": out}
    s = max_splits
    ints = {"stride_qt": heads * 576, "stride_qh": 576, "stride_ket": 576, "stride_vet": 576, "stride_kv": 576,
            "stride_ot": heads * 512 * (1 if direct else s), "stride_oh": 512 * (1 if direct else s),
            "stride_os": 0 if direct else 512, "stride_lt": 0 if direct else heads * s, "stride_lh": s,
            "num_heads": heads, "max_splits": max_splits, "min_split_len": 2 * cfg["block_n"]}
    constexprs = {"NUM_TOKENS": k, "BLOCK_H": block_h, "BLOCK_M": cfg["block_m"], "BLOCK_N": cfg["block_n"],
                  "BLOCK_T": 16, "NUM_STAGES": cfg["num_stages"], "WARP_SPECIALIZE": cfg["warp_specialize"],
                  "INDEX_AHEAD": cfg["index_ahead"],
                  "USE_TMA": use_tma, "USE_CUSTOM_MASK": False, "DIRECT_OUT": direct}
    signature, attrs = {}, {}
    for i, name in enumerate(kernel.arg_names):
        if name in pointers:
            signature[name] = pointers[name]
            if pointers[name].startswith("*"):
                attrs[(i,)] = [["tt.divisibility", 16]]
        elif name in constexprs:
            signature[name] = "constexpr"
        elif name == "sm_scale":
            signature[name] = "fp32"
        elif ints[name] in (0, 1) and name.startswith("stride"):
            signature[name], constexprs[name] = "constexpr", ints[name]
        else:
            signature[name] = "i32"
            if ints[name] % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    compiled = triton.compile(ASTSource(kernel, signature, constexprs=constexprs, attrs=attrs),
                              target=GPUTarget("cuda", arch, 32), options={"num_warps": cfg["num_warps"]})
    ptx = compiled.asm["ptx"]
    registers, spills = ptxas_usage(ptx, arch)
    ttgir = compiled.asm.get("ttgir", "")
    warps = re.search(r'"ttg.num-warps" = (\d+)', ttgir)
    total_warps = re.search(r'"ttg.total-num-warps" = (\d+)', ttgir)
    return {
        "triton": triton.__version__, "arch": arch, "k": k, "heads": heads, "block_h": block_h,
        "tile": cfg, "use_tma": use_tma,
        "shared": compiled.metadata.shared, "registers": registers, "spill_bytes": spills,
        "tma": "cp.async.bulk.tensor" in ptx, "cp_async": "cp.async.cg" in ptx or "cp.async.ca" in ptx,
        "wgmma": "wgmma.mma_async" in ptx, "mma_sync": "mma.sync" in ptx,
        "mbarrier_waits": len(re.findall(r"mbarrier\.try_wait", ptx)),
        "setmaxnreg": len(re.findall(r"setmaxnreg", ptx)),
        "warp_specialize_op": "ttg.warp_specialize" in ttgir,
        "num_warps": int(warps[1]) if warps else cfg["num_warps"],
        "total_warps": int(total_warps[1]) if total_warps else None,
        "global_scratch": getattr(compiled.metadata, "global_scratch_size", 0),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--heads", default="8,32")
    ap.add_argument("--tiles", default=",".join(vt.CANDIDATE_TILES))
    ap.add_argument("--max-splits", type=int, default=16)
    ap.add_argument("--no-tma", action="store_true", help="the pointer-load path instead of the descriptors")
    args = ap.parse_args(argv)
    for name in args.tiles.split(","):
        for heads in (int(h) for h in args.heads.split(",")):
            try:
                r = compile_stage1(args.arch, args.k, heads, args.max_splits, not args.no_tma,
                                   **vt.CANDIDATE_TILES[name])
                r["name"] = name
            except Exception as e:  # noqa: BLE001
                r = {"name": name, "heads": heads, "error": f"{type(e).__name__}: {e}"[:400]}
            print(json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
