"""sgl-kernel's own small-M W4A16 MoE (``fastpath_kernels.moe``) on CPU under ``TRITON_INTERPRET=1``.

The kernels run in a child process started with ``TRITON_INTERPRET=1`` (Triton decides
interpreted or compiled at its first import, which other tests do earlier). fp16 only (the
interpreter's bf16 arithmetic is not trustworthy, moe-triton.md). Every ``torch.empty`` in the
child returns NaN (floats) or a huge id (ints), so an output or workspace element the kernels
forget to write shows up as NaN or a crash. Checked against ``moe_reference`` in float64.
Shapes: E 4 and 8, top-2, gate/up N = 64 and 128, K = 128 and 256, odd M, one pair with expert
-1 (off this rank) and one token whose experts are all off this rank. Also: the packing order, the
layout conversions, the config checks, and ``default_config``'s kernels cross-compiled for sm_120.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from fastpath_fixtures import script_env
from fastpath_kernels.moe.layout import (
    W4Weights,
    dequantize,
    from_compressed_tensors,
    from_sglang_loaded,
    pack_int4,
    unpack_int4,
)

# slow: the TRITON_INTERPRET child process takes about 45 s on 2 cores (test/README.md).
pytestmark = pytest.mark.slow

TOP_K = 2
# (name, E, I, hidden, M, config kwargs; tiles are GemmTile fields): BLOCK_K below, at and above the
# group; split-K on both GEMMs; pipelined K loops; each way of running the down GEMM; grouped runs
# with an expert used by several tokens.
CASES = [
    ("pairs-token-bk64", 4, 32, 128, 3, {"up": (16, 64, 1), "down": (16, 32, 1)}),
    ("pairs-token-split", 4, 32, 128, 3, {"up": (32, 32, 4, 4, 3), "down": (32, 32, 1)}),
    ("pairs-token-downsplit", 8, 64, 256, 5, {"up": (16, 128, 2), "down": (16, 32, 2)}),
    ("pairs-expert", 8, 64, 256, 5, {"up": (16, 256, 1), "down": (64, 64, 1), "down_by_token": False}),
    ("grouped-expert", 4, 32, 128, 7, {"up": (16, 64, 2), "down": (32, 32, 1, 4, 2), "grouped": True,
                                           "down_by_token": False}),
    ("grouped-token", 4, 64, 256, 5, {"up": (8, 32, 8), "down": (16, 64, 1), "grouped": True}),
]


def make_problem(e: int, inter: int, hidden: int, m: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)

    def weights(n: int, k: int) -> W4Weights:
        q = torch.randint(0, 16, (e, n, k), generator=g)
        return W4Weights(pack_int4(q), (torch.rand(e, n, k // 32, generator=g) / 16 + 1 / 64).half())

    w13, w2 = weights(2 * inter, hidden), weights(hidden, inter)
    x = torch.randn(m, hidden, generator=g).half()
    ids = torch.stack([torch.randperm(e, generator=g)[:TOP_K] for _ in range(m)]).to(torch.int32)
    ids[0, 1] = -1  # one pair off this rank
    ids[m - 1] = -1  # a token with every expert off this rank: its output row must be 0
    rw = torch.rand(m, TOP_K, generator=g)
    return x, w13, w2, rw, ids


def _poison_empty() -> None:
    """Make every ``torch.empty`` in this process come back full of NaN / huge ints."""
    real = torch.empty

    def poisoned(*args, **kwargs):
        t = real(*args, **kwargs)
        return t.fill_(float("nan") if t.is_floating_point() else 2**30)

    torch.empty = poisoned


def _child() -> list[dict]:
    """In the TRITON_INTERPRET=1 process: run every case, report errors as plain data."""
    import triton
    from fastpath_kernels.moe import w4a16_small_m as k
    from fastpath_kernels.moe.reference import moe_reference

    assert type(k._gate_up).__name__ == "InterpretedFunction", type(k._gate_up)
    assert triton.__version__
    _poison_empty()
    results = []
    for name, e, inter, hidden, m, kw in CASES:
        x, w13, w2, rw, ids = make_problem(e, inter, hidden, m)
        cfg = k.SmallMConfig(k.GemmTile(*kw["up"]), k.GemmTile(*kw["down"]), grouped=kw.get("grouped", False),
                             down_by_token=kw.get("down_by_token", True))
        out = k.fused_moe_w4a16(x, w13, w2, rw, ids, cfg).double()
        ref = moe_reference(x, w13, w2, rw, ids)
        results.append({
            "name": name, "label": cfg.label(), "nan": bool(torch.isnan(out).any()),
            "rel": ((out - ref).abs().max() / ref.abs().max()).item(),
            "dtype": str(k.fused_moe_w4a16(x, w13, w2, rw, ids, cfg).dtype),
            "off_rank_row_zero": bool((out[m - 1] == 0).all()),
            "shared_experts": len(ids[ids >= 0].tolist()) - len(set(ids[ids >= 0].tolist())),
        })
    return results


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    env = script_env(TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return {r["name"]: r for r in json.loads(done.stdout.splitlines()[-1])}


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_kernel_matches_float64_reference(results: dict[str, dict], name: str):
    case = results[name]
    assert not case["nan"], f"{case['label']}: NaN in the output (an unwritten element)"
    assert case["rel"] < 5e-3, f"{case['label']}: max relative error {case['rel']}"
    assert case["dtype"] == "torch.float16"
    assert case["off_rank_row_zero"], f"{case['label']}: a token whose experts are all -1 got a nonzero row"


def test_grouped_cases_share_experts_between_tokens(results: dict[str, dict]):
    """A grouped run must really hold several pairs, or the grouped path is untested."""
    assert results["grouped-expert"]["shared_experts"] >= 3 and results["grouped-token"]["shared_experts"] >= 2


def test_pack_int4_is_the_compressed_tensors_order():
    """Value 8j+i in bits 4i of word j, low nibble first; bit 31 wraps to a negative int32."""
    q = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8, 15, 0, 0, 0, 0, 0, 0, 9]])
    words = pack_int4(q)
    assert words.dtype == torch.int32
    assert words.tolist() == [[0x87654321 - 2**32, 0x9000000F - 2**32]]
    assert torch.equal(unpack_int4(words), q.to(torch.uint8))
    # the same bytes read as uint8 [.., K/2]: SGLang's Triton INT4 layout (even K in the low nibble)
    as_bytes = words.view(torch.uint8)
    assert torch.equal(as_bytes & 0xF, q[:, 0::2].to(torch.uint8)) and torch.equal(as_bytes >> 4, q[:, 1::2].to(torch.uint8))


def test_conversions_into_the_layout():
    g = torch.Generator().manual_seed(1)
    q = torch.randint(0, 16, (3, 16, 64), generator=g)
    packed, scale = pack_int4(q), torch.rand(3, 16, 2, generator=g)
    ours = from_compressed_tensors(list(packed), list(scale), torch.float16)
    assert ours.scale.dtype == torch.float16 and (ours.n, ours.k, ours.num_experts) == (16, 64, 3)
    loaded = from_sglang_loaded(packed.transpose(1, 2).contiguous(), scale.transpose(1, 2).contiguous(), torch.float16)
    assert torch.equal(loaded.packed, ours.packed) and torch.equal(loaded.scale, ours.scale)
    w = dequantize(ours, 2)
    assert w[5, 40].item() == pytest.approx((int(q[2, 5, 40]) - 8) * float(ours.scale[2, 5, 1]))
    with pytest.raises(ValueError, match="scale must be"):
        W4Weights(packed, scale[:, :, :1].contiguous())


def test_config_checks_and_defaults_at_kimi_shapes():
    pytest.importorskip("triton")
    from fastpath_kernels.moe.w4a16_small_m import GemmTile, SmallMConfig, check_config, default_config

    for tp in (2, 8):
        inter = 2048 // tp
        for m in (1, 2, 4, 8, 16, 32, 64):
            check_config(default_config(m, 8, 7168, inter), 7168, inter)
    with pytest.raises(ValueError, match="block_k"):
        check_config(SmallMConfig(GemmTile(16, 48, 1, 4)), 7168, 256)
    with pytest.raises(ValueError, match="split_k"):
        check_config(SmallMConfig(GemmTile(16, 256, 1, 4), GemmTile(16, 256, 2, 4)), 7168, 256)


if __name__ == "__main__":
    print(json.dumps(_child()))


def _signature(kernel, pointers: dict[str, str], ints: tuple[str, ...], constexprs: dict):
    from triton.compiler import ASTSource

    names = list(kernel.arg_names)
    sig = {n: pointers.get(n, "i32" if n in ints else "constexpr") for n in names}
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in pointers}
    return ASTSource(kernel, sig, constexprs=constexprs, attrs=attrs)


@pytest.mark.parametrize("tp", [2, 8])
def test_default_configs_compile_for_sm120_without_spills(tp: int, monkeypatch):
    """The kernels at ``default_config``'s tiles, Kimi shapes, cross-compiled for sm_120 (RTX PRO
    6000) on CPU: no register spills and shared memory within its 101376 B."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    import triton
    from fastpath_kernels.moe import w4a16_small_m as k
    from fastpath_kernels.ptxas import ptxas_usage
    from triton.backends.compiler import GPUTarget

    if type(k._gate_up).__name__ != "JITFunction":
        pytest.skip("fastpath_kernels was imported under TRITON_INTERPRET in this process")
    hidden, inter = 7168, 2048 // tp
    common = {"h_ptr": "*fp32", "w_ptr": "*i32", "s_ptr": "*bf16", "ids_ptr": "*i32"}
    seen = {}
    for m in (1, 64):
        cfg = k.default_config(m, 8, hidden, inter)
        up, dn = cfg.gate_up, cfg.down
        jobs = [(k._gate_up, {**common, "xp_ptr": "*fp32", "order_ptr": "*i64"}, ("P", "split_k"),
                 {"K": hidden, "INTER": inter, "TOP_K": 8, "GROUPED": False, "RUN_MAX": 1, "BLOCK_N": up.block_n,
                  "BLOCK_K": up.block_k, "ATOMIC": up.split_k > 1, "NUM_STAGES": up.stages}, up.num_warps)]
        dn_consts = {"HIDDEN": hidden, "INTER": inter, "TOP_K": 8, "BLOCK_N": dn.block_n, "BLOCK_K": dn.block_k,
                     "ATOMIC": True, "NUM_STAGES": dn.stages}
        if cfg.down_by_token:
            jobs.append((k._down_by_token, {**common, "out_ptr": "*bf16", "rw_ptr": "*fp32"}, ("split_k",),
                         {**dn_consts, "ATOMIC": False}, dn.num_warps))
        else:
            jobs.append((k._down_by_expert, {**common, "out_ptr": "*fp32", "order_ptr": "*i64", "rw_ptr": "*fp32"},
                         ("P", "split_k"), {**dn_consts, "GROUPED": False, "RUN_MAX": 1}, dn.num_warps))
        for kernel, pointers, ints, consts, warps in jobs:
            key = (kernel.fn.__name__, tuple(sorted(consts.items())), warps)
            if key in seen:
                continue
            compiled = triton.compile(_signature(kernel, pointers, ints, consts), target=GPUTarget("cuda", 120, 32),
                                      options={"num_warps": warps})
            registers, spills = ptxas_usage(compiled.asm["ptx"], 120)
            seen[key] = (registers, spills, compiled.metadata.shared)
            assert spills == 0, f"{key}: {spills} B of spills on sm_120 ({registers} registers)"
            assert compiled.metadata.shared <= 101376, f"{key}: {compiled.metadata.shared} B of shared memory"
    assert len(seen) >= 3 and all(regs > 0 for regs, _, _ in seen.values()), seen
