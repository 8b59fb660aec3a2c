"""Cross-compile the warp-specialized Gluon stage 1 (``attention_ws.kernel._verify_mla_ws_stage1``) for sm_90a on a
CPU machine, as a GPU launch would specialize it at Kimi's shapes (MLA 576/512, one KV head, bf16, 64-token pages,
chain mask), and report shared memory, registers, spills (ptxas -v with the Triton wheel's own ptxas, through
``fastpath_kernels.ptxas.ptxas_usage``) and whether it is warp-specialized: ``ttg.warp_specialize`` in the TTGIR,
``setmaxnreg`` in the PTX (the producer's register hint), TMA (``cp.async.bulk.tensor``), ``wgmma``, mbarrier
waits and the warps (``ttg.total-num-warps``).

    PYTHONPATH=sgl-kernel /tmp/t36/bin/python -m fastpath_kernels.attention_ws.xcompile [--heads 8,32] [--k 4] [--tiles n32b4,n64b2]

Run it from the repository root. Needs only the ``triton`` wheel (3.6.0: the GPU hosts'; 3.9 works too): torch is
stubbed when missing, as in ``attention_tma.xcompile``. Prints one JSON line per (tile, heads).
"""

from __future__ import annotations

import argparse
import json
import re
import sys

from fastpath_kernels.launch_signature import launch_signature, mla_stage1_ints, stub_torch_if_missing

stub_torch_if_missing()  # before anything that imports torch

import triton  # noqa: E402

from fastpath_kernels.ptxas import ptxas_usage  # noqa: E402

# Tile variants (overrides of kernel.DEFAULT_TILE); bench.py times the same names.
TILES = {
    "n32b4": {"block_n": 32, "num_buffers": 4},  # 3 x 37 KB in flight while one tile is consumed
    "n64b2": {"block_n": 64, "num_buffers": 2},  # the default (fastest on an H200 from 8k): 1 x 74 KB in flight
    "n32b3": {"block_n": 32, "num_buffers": 3},  # 37 KB less shared memory
    "n32b4-r40": {"block_n": 32, "num_buffers": 4, "producer_regs": 40},  # a roomier producer
}


def gluon_hopper_missing() -> str | None:
    """Why this Triton cannot build the kernel (None: it can)."""
    try:
        from triton.experimental import gluon  # noqa: F401
        from triton.experimental.gluon import language as gl
        from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma  # noqa: F401
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor  # noqa: F401
    except ImportError as e:
        return f"Triton {triton.__version__} has no Gluon Hopper API ({e})"
    if not hasattr(gl, "warp_specialize"):
        return f"Triton {triton.__version__}'s Gluon has no warp_specialize"
    return None


def barrier_protocol(ptx: str, tensordesc_meta) -> dict:
    """The ring's mbarrier protocol as compiled (the facts a hang or a race would break), from the PTX and the
    compile's TMA descriptor metadata (box sizes):

    - ``mbarrier_init_counts``: the arrival count of each ``mbarrier.init`` (the kernel's design: all 1);
    - ``expect_tx_bytes``: the byte count of each ``mbarrier.arrive.expect_tx`` (the producer's one arrival on
      ``ready``), and ``tma_bytes``: what the TMA copies of one tile deliver (copies x box bytes; None when the
      boxes differ in size). They must be equal: fewer expected bytes release the consumers before the tile has
      landed, more never complete the phase;
    - ``release_arrives``: the plain ``mbarrier.arrive``s (the consumers' release of ``empty``), and
      ``release_after_barrier``: whether each is one predicated arrival (no count operand) whose last preceding
      barrier is a ``bar.sync`` over the consumer warps issued after a ``wgmma.wait_group 0`` with no wgmma
      issued in between, i.e. both warpgroups' reads of the slot are complete when the one arrival lands."""
    lines = [ln.strip() for ln in ptx.splitlines()]
    inits = [int(m[1]) for ln in lines if (m := re.search(r"mbarrier\.init\.shared\S*\s*\[[^\]]+\],\s*(\d+);", ln))]
    expects = [int(m[1]) for ln in lines
               if (m := re.search(r"mbarrier\.arrive\.expect_tx\.shared\S*\s+_,\s*\[[^\]]+\],\s*(\d+);", ln))]
    boxes = {m["elem_size"] * m["block_size"][0] * m["block_size"][1] for m in (tensordesc_meta or [])}
    copies = sum("cp.async.bulk.tensor" in ln for ln in lines)
    releases, ok = 0, True
    for i, ln in enumerate(lines):
        if not re.search(r"mbarrier\.arrive\.shared\S*\s+_,", ln):
            continue
        releases += 1
        ok &= ln.startswith("@") and bool(re.search(r"\[[^\]]+\];", ln))  # one thread, count 1 (no operand)
        seen_bar = seen_wait = False
        for prev in reversed(lines[:i]):
            if "wgmma.mma_async" in prev or "mbarrier." in prev or "barrier.sync" in prev:
                ok = False  # a wgmma, another mbarrier op or a CTA-wide barrier before the consumers' bar.sync
                break
            if re.match(r"bar\.sync\s+\d+,\s*256;", prev):
                seen_bar = True
            elif "wgmma.wait_group.sync.aligned 0;" in prev:
                seen_wait = True
                break
        ok &= seen_bar and seen_wait
    return {"mbarrier_init_counts": inits, "expect_tx_bytes": expects,
            "tma_bytes": copies * boxes.pop() if len(boxes) == 1 else None,
            "release_arrives": releases, "release_after_barrier": bool(releases) and ok}


def compile_stage1(arch: int = 90, k: int = 4, heads: int = 8, max_splits: int = 16, tree: bool = False,
                   **tile) -> dict:
    """The stage 1 kernel compiled for sm_<arch> with ``tile`` (overrides of DEFAULT_TILE) at K=k draft tokens,
    ``heads`` query heads, bs 1 and ``max_splits`` splits (1: the direct store); ``tree``: the custom (tree) mask
    (uint8) instead of the chain."""
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    from fastpath_kernels.attention_ws import kernel as ws

    plan = ws.verify_mla_ws_plan(k, 1, heads, None, max_splits, **tile)
    fn = ws._verify_mla_ws_stage1
    lat_layout, pe_layout = ws.tma_layouts(plan["block_n"])
    direct = max_splits == 1
    out = "*bf16" if direct else "*fp32"
    bn = plan["block_n"]
    pointers = {"Q": "*bf16", "K_Ext": "*bf16", "V_Ext": "*bf16", "KV": "*bf16",
                "desc_lat": f"tensordesc<bf16[{bn},512],{lat_layout!r}>",
                "desc_pe": f"tensordesc<bf16[{bn},64],{pe_layout!r}>",
                "kv_indptr": "*i32", "kv_indices": "*i64", "mask_ptr": "*u8" if tree else "*i32",
                "mask_indptr": "*i64" if tree else "*i32",
                "Out": out, "Lse": out}
    ints = mla_stage1_ints(heads, max_splits, plan["min_split_len"])
    constexprs = {"NUM_TOKENS": k, "BLOCK_H": plan["block_h"], "BLOCK_N": bn, "NUM_BUF": plan["num_buffers"],
                  "PRODUCER_REGS": plan["producer_regs"], "USE_CUSTOM_MASK": tree, "DIRECT_OUT": direct}
    signature, attrs = launch_signature(fn.arg_names, pointers, ints, constexprs)
    compiled = triton.compile(GluonASTSource(fn, signature, constexprs=constexprs, attrs=attrs),
                              target=GPUTarget("cuda", arch, 32),
                              options={"num_warps": plan["num_warps"], "maxnreg": plan["maxnreg"]})
    ptx = compiled.asm["ptx"]
    registers, spills = ptxas_usage(ptx, arch)
    ttgir = compiled.asm.get("ttgir", "")
    threads = re.search(r"\.reqntid (\d+)", ptx)
    return {
        "triton": triton.__version__, "arch": arch, "k": k, "heads": heads, "block_h": plan["block_h"],
        "max_splits": max_splits, "tree": tree,
        "tile": {key: plan[key] for key in ws.DEFAULT_TILE}, "shared": compiled.metadata.shared,
        "shared_planned": plan["shared_planned"], "registers": registers, "spill_bytes": spills,
        "warp_specialize_op": "ttg.warp_specialize" in ttgir,
        # the register counts partitions move to: the consumers' increase, the producer's decrease
        "setmaxnreg_inc": sorted({int(n) for n in re.findall(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+(\d+)", ptx)}),
        "setmaxnreg_dec": sorted({int(n) for n in re.findall(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+(\d+)", ptx)}),
        "tma": "cp.async.bulk.tensor" in ptx, "wgmma": "wgmma.mma_async" in ptx,
        "mbarrier_waits": len(re.findall(r"mbarrier\.try_wait", ptx)),
        "tma_copies": len(re.findall(r"cp\.async\.bulk\.tensor", ptx)),
        "wgmma_shapes": sorted(set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m\d+n\d+k\d+)", ptx))),
        "total_warps": int(threads[1]) // 32 if threads else None,
        "num_warps": plan["num_warps"], "maxnreg": plan["maxnreg"],
        **barrier_protocol(ptx, getattr(compiled.metadata, "tensordesc_meta", None)),
    }


def root_cause(e: BaseException) -> str:
    """The innermost exception of a chain (a CompilationError wraps the real one), in one line."""
    while (e.__cause__ or e.__context__) is not None:
        e = e.__cause__ or e.__context__
    return f"{type(e).__name__}: {e}"[:600]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--heads", default="8,32")
    ap.add_argument("--tiles", default=",".join(TILES))
    ap.add_argument("--max-splits", type=int, default=16, help="1: the direct store (no partials)")
    ap.add_argument("--tree", action="store_true", help="the tree (custom) mask instead of the chain")
    args = ap.parse_args(argv)
    missing = gluon_hopper_missing()
    if missing:
        print(json.dumps({"error": missing}))
        return 1
    rc = 0
    for name in args.tiles.split(","):
        for heads in (int(h) for h in args.heads.split(",")):
            try:
                r = {"name": name, **compile_stage1(args.arch, args.k, heads, args.max_splits, args.tree,
                                                      **TILES[name])}
            except Exception as e:  # noqa: BLE001
                r, rc = {"name": name, "heads": heads, "error": root_cause(e)}, 1
            print(json.dumps(r), flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
