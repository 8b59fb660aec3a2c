"""Cross-compile patch 0032's ``_verify_mla_tma_stage1`` for sm_90 (or another arch) on a CPU machine, as a GPU launch
would specialize it at Kimi's shapes (MLA 576/512, one KV head, bf16, 64-token pages, chain mask), and report
shared memory, registers, spills (ptxas -v with the Triton wheel's own ptxas) and what the PTX contains: TMA
(``cp.async.bulk.tensor``), ``wgmma``, mbarrier waits, ``setmaxnreg`` (warp specialization's register
reallocation) and the number of warps.

    PYTHONPATH=sgl-kernel python -m fastpath_kernels.attention_tma.xcompile [--arch 90] [--heads 8,32] [--k 4] [--tiles n64s2,n32s4]

Run it from the repository root. Needs only the ``triton`` wheel (no GPU; torch is stubbed when missing, so a bare
``pip install triton==3.6.0`` venv works: that is the GPU host's Triton) and no SGLang.

Where the kernel comes from (``load_module``): the committed patches, not an installed SGLang (a CPU machine has
none, and a GPU host's fork may predate the patch). benchmark/tools/attn_verify_bench.py's ``module_from_series``
writes the two files the kernel's module needs into a temporary folder: 0032's ``verify_mla_tma.py`` and 0007's
``verify_grouped_attention.py``, from which it imports ``_verify_grouped_merge``, ``_max_shared_memory``,
``_multiprocessor_count`` and ``MAX_VERIFY_TOKENS``. Both are executed as standalone modules; while they run,
``sys.modules`` maps 0007's module name to the standalone 0007 module and 0007's own SGLang import
(``decode_attention._extract_kv_strides``, whose module pulls in ``sglang.srt``; only 0007's host wrapper calls
it) to a stub, and is put back as it was afterwards. The tests check that the patch text is the patched tree's
file (test/test_verify_attention_tma.py). Tile variants: ``bench.CANDIDATE_TILES``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import types
from pathlib import Path

from fastpath_kernels.launch_signature import launch_signature, mla_stage1_ints, stub_torch_if_missing

stub_torch_if_missing()  # before anything that imports torch

import triton  # noqa: E402

from benchmark.tools.attn_verify_bench import ROOT, module_from_series  # noqa: E402
from fastpath_kernels.attention_tma.bench import CANDIDATE_TILES  # noqa: E402
from fastpath_kernels.ptxas import ptxas_usage  # noqa: E402

TMA_FILE = "python/sglang/kernels/ops/attention/verify_mla_tma.py"
GROUPED_FILE = "python/sglang/kernels/ops/attention/verify_grouped_attention.py"
GROUPED = "sglang.kernels.ops.attention.verify_grouped_attention"
DECODE = "sglang.kernels.ops.attention.decode_attention"


def _extract_kv_strides(*args, **kwargs):
    raise NotImplementedError("decode_attention stub (fastpath_kernels.attention_tma.xcompile): compile only")


def load_module(patch_dir: Path = ROOT / "patches") -> types.ModuleType:
    """Patch 0032's ``verify_mla_tma`` (with patch 0007's module it imports) from the patch texts (see above)."""
    folder = Path(tempfile.mkdtemp(prefix="verify-mla-tma-"))
    decode = types.ModuleType(DECODE)
    decode._extract_kv_strides = _extract_kv_strides
    saved = {name: sys.modules.get(name) for name in (DECODE, GROUPED)}
    try:
        sys.modules[DECODE] = decode
        sys.modules[GROUPED] = module_from_series(GROUPED_FILE, "fastpath_xcompile_verify_grouped_attention",
                                                  patch_dir, folder)
        return module_from_series(TMA_FILE, "fastpath_xcompile_verify_mla_tma", patch_dir, folder)
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def compile_stage1(arch: int = 90, k: int = 4, heads: int = 8, max_splits: int = 16,
                   module: types.ModuleType | None = None, **tile) -> dict:
    """Stage 1 of ``module`` (default: ``load_module()``) compiled for sm_<arch> with ``tile`` (overrides of the
    module's DEFAULT_TILE, ``use_tma`` among them) at K=k draft tokens, ``heads`` query heads, bs 1 and
    ``max_splits`` splits (1: the direct store)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    vt = module or load_module()
    # bs 1 and max_kv_splits given: the plan needs no device.
    plan = vt.verify_mla_tma_plan(k, 1, heads, None, max_splits, **tile)
    stage1 = vt._verify_mla_tma_stage1
    kernel = stage1.fn if hasattr(stage1, "fn") and not hasattr(stage1, "arg_names") else stage1
    direct = max_splits == 1
    out = "*bf16" if direct else "*fp32"
    pointers = {"Q": "*bf16", "K_Ext": "*bf16", "V_Ext": "*bf16", "KV": "*bf16",
                "desc_lat": f"tensordesc<bf16[{plan['block_n']},256]>",
                "desc_pe": f"tensordesc<bf16[{plan['block_n']},64]>",
                "kv_indptr": "*i32", "kv_indices": "*i64", "mask_ptr": "*i32", "mask_indptr": "*i32",
                "Out": out, "Lse": out}
    ints = mla_stage1_ints(heads, max_splits, plan["min_split_len"])
    constexprs = {"NUM_TOKENS": k, "BLOCK_H": plan["block_h"], "BLOCK_M": plan["block_m"],
                  "BLOCK_N": plan["block_n"], "BLOCK_T": max(16, triton.next_power_of_2(k)),
                  "NUM_STAGES": plan["num_stages"], "INDEX_AHEAD": plan["index_ahead"], "USE_TMA": plan["use_tma"],
                  "USE_CUSTOM_MASK": False, "DIRECT_OUT": direct}
    signature, attrs = launch_signature(kernel.arg_names, pointers, ints, constexprs)
    compiled = triton.compile(ASTSource(kernel, signature, constexprs=constexprs, attrs=attrs),
                              target=GPUTarget("cuda", arch, 32), options={"num_warps": plan["num_warps"]})
    ptx = compiled.asm["ptx"]
    registers, spills = ptxas_usage(ptx, arch)
    ttgir = compiled.asm.get("ttgir", "")
    warps = re.search(r'"ttg.num-warps" = (\d+)', ttgir)
    total_warps = re.search(r'"ttg.total-num-warps" = (\d+)', ttgir)
    return {
        "triton": triton.__version__, "arch": arch, "k": k, "heads": heads, "block_h": plan["block_h"],
        "tile": {key: plan[key] for key in vt.DEFAULT_TILE}, "use_tma": plan["use_tma"],
        "shared": compiled.metadata.shared, "shared_planned": vt._shared_bytes(plan),
        "registers": registers, "spill_bytes": spills,
        "tma": "cp.async.bulk.tensor" in ptx, "cp_async": "cp.async.cg" in ptx or "cp.async.ca" in ptx,
        "wgmma": "wgmma.mma_async" in ptx, "mma_sync": "mma.sync" in ptx,
        "mbarrier_waits": len(re.findall(r"mbarrier\.try_wait", ptx)),
        "setmaxnreg": len(re.findall(r"setmaxnreg", ptx)),
        "warp_specialize_op": "ttg.warp_specialize" in ttgir,
        "num_warps": int(warps[1]) if warps else plan["num_warps"],
        "total_warps": int(total_warps[1]) if total_warps else None,
        "global_scratch": getattr(compiled.metadata, "global_scratch_size", 0),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--heads", default="8,32")
    ap.add_argument("--tiles", default=",".join(CANDIDATE_TILES))
    ap.add_argument("--max-splits", type=int, default=16)
    ap.add_argument("--no-tma", action="store_true", help="the pointer-load path instead of the descriptors")
    args = ap.parse_args(argv)
    vt = load_module()
    for name in args.tiles.split(","):
        for heads in (int(h) for h in args.heads.split(",")):
            try:
                tile = {**CANDIDATE_TILES[name], **({"use_tma": False} if args.no_tma else {})}
                r = compile_stage1(args.arch, args.k, heads, args.max_splits, vt, **tile)
                r["name"] = name
            except Exception as e:  # noqa: BLE001
                r = {"name": name, "heads": heads, "error": f"{type(e).__name__}: {e}"[:400]}
            print(json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
