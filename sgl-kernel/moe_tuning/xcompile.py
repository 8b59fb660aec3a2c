"""Cross-compile SGLang's INT4 MoE kernel for a GPU architecture on a CPU machine, and read what it costs.

Triton compiles for any ``GPUTarget`` without a GPU (its wheel bundles ptxas), so the
shared memory, registers, spills and MMA flavour of a config can be checked here: the
CPU pre-filter of moe-triton.md §5. The kernel is specialised the way a launch at the
Kimi shapes specialises it: contiguous tensors, strides of 1 as constants, pointers and
strides divisible by 16 marked so, N and K as constants. The caller passes the kernel
(``fused_moe_kernel_gptq_awq`` as a plain ``triton.jit`` function, not interpreted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastpath_kernels.ptxas import ptxas_usage
from moe_tuning.search_space import KernelConfig
from moe_tuning.shapes import Device, Gemm

POINTERS = {
    "a_ptr": "*fp16", "b_ptr": "*u8", "c_ptr": "*fp16", "b_scale_ptr": "*fp16", "b_zp_ptr": "*u8",
    "topk_weights_ptr": "*fp32", "sorted_token_ids_ptr": "*i32", "expert_ids_ptr": "*i32",
    "num_tokens_post_padded_ptr": "*i32",
}
RUNTIME_INTS = ("EM", "num_valid_tokens")  # vary with the batch: no divisibility assumed
DIVISIBILITY = 16


@dataclass(frozen=True)
class CompileStats:
    arch: int  # 90, 120
    shared: int  # bytes of shared memory per program, as Triton reports it
    registers: int
    spill_bytes: int  # spill stores + spill loads, from ptxas -v
    mma: str  # "wgmma", "mma.sync" or "none"


def strides(gemm: Gemm, top_k: int) -> dict[str, int]:
    """The stride arguments of one launch on contiguous tensors in the Triton INT4 layout."""
    n, k, groups = gemm.n, gemm.k, gemm.scale_groups
    return {
        "stride_am": k, "stride_ak": 1,  # A [M, K]
        "stride_be": n * gemm.packed_k, "stride_bk": 1, "stride_bn": gemm.packed_k,  # B [E, N, K/2]
        "stride_cm": n, "stride_cn": 1,  # C [M, top_k, N]
        "stride_bse": n * groups, "stride_bsk": 1, "stride_bsn": groups,  # scales [E, N, K/group]
        "stride_bze": 0, "stride_bzk": 0, "stride_bzn": 0,  # no zero points (symmetric)
    }


def _source(kernel: Any, gemm: Gemm, cfg: KernelConfig, top_k: int) -> Any:
    import triton.language as tl
    from triton.compiler import ASTSource

    names: list[str] = list(kernel.arg_names)
    constexprs: dict[str, Any] = {
        "N": gemm.n, "K": gemm.k, "group_size": gemm.group_size, "MUL_ROUTED_WEIGHT": False, "top_k": top_k,
        "compute_type": tl.float16, "has_zp": False, "use_int4_w4a16": True, "use_int8_w8a16": False,
        "even_Ks": gemm.k % cfg.block_k == 0, "filter_expert": True, **cfg.kwargs(),
    }
    for name in ("num_warps", "num_stages"):  # compile options, not kernel arguments
        constexprs.pop(name)
    signature: dict[str, str] = {**POINTERS, **{name: "i32" for name in RUNTIME_INTS}}
    attrs: dict[tuple[int, ...], list[list[Any]]] = {(names.index(p),): [["tt.divisibility", DIVISIBILITY]]
                                                   for p in POINTERS}
    for name, value in strides(gemm, top_k).items():
        if value == 1:
            constexprs[name] = 1
        else:
            signature[name] = "i32"
            if value % DIVISIBILITY == 0:
                attrs[(names.index(name),)] = [["tt.divisibility", DIVISIBILITY]]
    signature.update({name: "constexpr" for name in constexprs})
    missing = set(names) - set(signature)
    assert not missing, f"kernel arguments not modelled: {sorted(missing)} (upstream signature changed)"
    return ASTSource(kernel, {name: signature[name] for name in names}, constexprs=constexprs, attrs=attrs)


def compile_stats(kernel: Any, gemm: Gemm, cfg: KernelConfig, arch: int, top_k: int = 8) -> CompileStats:
    """Compile ``kernel`` for ``sm_<arch>`` at ``gemm``'s shape with ``cfg``; no GPU needed."""
    import triton
    from triton.backends.compiler import GPUTarget

    compiled = triton.compile(_source(kernel, gemm, cfg, top_k), target=GPUTarget("cuda", arch, 32),
                              options={"num_warps": cfg.num_warps, "num_stages": cfg.num_stages})
    ptx = compiled.asm["ptx"]
    mma = "wgmma" if "wgmma" in ptx else ("mma.sync" if "mma.sync" in ptx else "none")
    registers, spill_bytes = ptxas_usage(ptx, arch)
    return CompileStats(arch, compiled.metadata.shared, registers, spill_bytes, mma)


def arch_of(dev: Device) -> int:
    """``sm_120`` -> 120."""
    return int(dev.arch.removeprefix("sm_"))


def compiled_rejections(stats: CompileStats, dev: Device) -> list[str]:
    """The pre-filter of moe-triton.md §5 on a compiled config: fits, no spills, mma.sync."""
    reasons = []
    if stats.shared > dev.smem_bytes:
        reasons.append(f"compiled shared memory {stats.shared} B is over {dev.arch}'s {dev.smem_bytes} B")
    if stats.spill_bytes:
        reasons.append(f"spills {stats.spill_bytes} B on {dev.arch} ({stats.registers} registers)")
    if stats.mma != "mma.sync":
        reasons.append(f"uses {stats.mma}, not mma.sync: its timings do not carry over to sm_120")
    return reasons
