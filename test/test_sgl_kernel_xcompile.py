"""sgl-kernel/moe_tuning/xcompile.py: SGLang 0.5.17's ``fused_moe_kernel_gptq_awq`` (from the pinned
tree) cross-compiled on CPU for sm_120 and sm_90 with the installed Triton, checking the search space's
assumptions: the shared-memory estimate, mma.sync at BLOCK_SIZE_M <= 32 (wgmma on sm_90 at 64),
and that ptxas's register/spill report is read.
"""

from __future__ import annotations


import pytest

from moe_tuning import search_space as ss
from moe_tuning.shapes import SM120_SMEM, device, rank_shapes
from moe_tuning.xcompile import CompileStats, arch_of, compile_stats, compiled_rejections, strides
from sglang_trees import load_defs, source, trees  # noqa: F401 (trees: a module-scoped fixture)

KERNELS = "sglang.kernels.ops.moe.fused_moe_triton_kernels"
TP8 = rank_shapes(8)
SM120 = device("rtx-pro-6000-server")


@pytest.fixture(scope="module")
def kernel(trees, monkeypatch_module):  # noqa: F811
    monkeypatch_module.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch_module.setenv("TRITON_DEFAULT_FP_FUSION", "1")  # Triton 3.6's default, without 3.9's warning
    defs = load_defs(source(trees.pristine, KERNELS), ["write_zeros_to_output", "fused_moe_kernel_gptq_awq"])
    fn = defs["fused_moe_kernel_gptq_awq"]
    assert type(fn).__name__ == "JITFunction"
    return fn


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def test_strides_model_the_triton_int4_layout():
    s = strides(TP8.gate_up, top_k=8)
    assert (s["stride_am"], s["stride_bn"], s["stride_be"]) == (7168, 3584, 512 * 3584)
    assert (s["stride_bse"], s["stride_bsn"], s["stride_cm"]) == (512 * 224, 224, 512)
    assert strides(TP8.down, top_k=8)["stride_bsn"] == 8  # 256 / 32: not a multiple of 16


@pytest.mark.parametrize("cfg", [
    ss.KernelConfig(16, 64, 64, 1, 4, 3),
    ss.KernelConfig(16, 32, 128, 1, 4, 5),
    ss.KernelConfig(32, 128, 256, 1, 8, 4),
], ids=lambda c: c.label().replace(" ", "-"))
def test_shared_memory_estimate_is_exact_on_the_long_k_loop(kernel, cfg: ss.KernelConfig):
    stats = compile_stats(kernel, TP8.gate_up, cfg, arch=120)
    assert stats.shared == ss.smem_estimate(cfg)
    assert (stats.shared <= SM120_SMEM) == (ss.smem_rule(cfg, SM120) is None)


def test_shared_memory_estimate_bounds_a_one_step_k_loop(kernel):
    cfg = ss.KernelConfig(32, 128, 256, 1, 8, 4)  # down at TP=8: K = 256 = BK
    stats = compile_stats(kernel, TP8.down, cfg, arch=120)
    assert stats.shared < ss.smem_estimate(cfg)


@pytest.mark.parametrize("block_m, arch, mma", [(16, 90, "mma.sync"), (32, 90, "mma.sync"), (64, 90, "wgmma"),
                                                (64, 120, "mma.sync")])
def test_block_m_64_is_where_sm90_switches_to_wgmma(kernel, block_m: int, arch: int, mma: str):
    stats = compile_stats(kernel, TP8.gate_up, ss.KernelConfig(block_m, 64, 64, 1, 4, 3), arch=arch)
    assert stats.mma == mma


def test_ptxas_report_is_read(kernel):
    small = compile_stats(kernel, TP8.gate_up, ss.KernelConfig(16, 64, 64, 1, 4, 3), arch=120)
    assert 0 < small.registers <= 255 and small.spill_bytes == 0
    # BN·BK = 32768 on 8 warps with a [BK, BN] scale gather: spills with Triton 3.9.0's ptxas.
    big = compile_stats(kernel, TP8.gate_up, ss.KernelConfig(32, 128, 256, 1, 8, 4), arch=120)
    assert big.spill_bytes > 0


def test_compiled_rejections_is_the_cpu_prefilter(kernel):
    assert arch_of(SM120) == 120 and arch_of(device("h200")) == 90
    good = compile_stats(kernel, TP8.gate_up, ss.KernelConfig(16, 64, 64, 1, 4, 3), arch=arch_of(SM120))
    assert compiled_rejections(good, SM120) == []
    wgmma = CompileStats(90, 32768, 122, 0, "wgmma")
    assert ["wgmma" in r for r in compiled_rejections(wgmma, device("h200"))] == [True]
    over = CompileStats(120, 114688, 255, 3512, "mma.sync")
    assert len(compiled_rejections(over, SM120)) == 2
