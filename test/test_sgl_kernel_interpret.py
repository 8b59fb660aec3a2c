"""SGLang 0.5.17's own ``fused_moe_kernel_gptq_awq`` under ``TRITON_INTERPRET=1`` on CPU, at tiny
INT4 shapes, for configs drawn from sgl-kernel's search space, against a plain torch dequant-matmul.

The kernel is executed from the pinned pristine tree with ``load_defs`` (its module imports GPU-only
helpers), in a child process started with ``TRITON_INTERPRET=1``: Triton decides interpreted or
compiled when ``triton.language`` is first imported, which other tests do earlier. fp16 only: the interpreter's bf16 ``tl.dot`` multiplies raw bit patterns (moe-triton.md).
Routing is sorted by hand the way ``moe_align_block_size`` does: each expert's (token, slot) rows
padded to BLOCK_SIZE_M with the sentinel ``M * top_k``; an expert marked -1 (not on this EP rank)
must come out as zeros.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fastpath_fixtures import script_env
from moe_tuning import search_space as ss
from moe_tuning.shapes import Gemm, device
from sglang_trees import load_defs, source, trees  # noqa: F401 (trees: a module-scoped fixture)

KERNELS = "sglang.kernels.ops.moe.fused_moe_triton_kernels"
E, TOP_K, N, K, GROUP, M = 4, 2, 64, 128, 32, 3
TINY = Gemm("tiny", n=N, k=K, group_size=GROUP)
SPACE = ss.SearchSpace(block_n=(16, 32, 64), block_k=(16, 32, 64, 128), num_warps=(4,), num_stages=(2,))
PICKED = [(16, 32), (32, 16), (128, 64)]  # (BLOCK_SIZE_K, BLOCK_SIZE_N): BK below, at, above the group


def picked_configs() -> list[ss.KernelConfig]:
    """Configs of the filtered space with BK 16, 32 and 128 (the last spans all 4 groups of K)."""
    found = {(c.block_k, c.block_n): c for c in ss.candidates(TINY, device("rtx-pro-6000-server"), M, SPACE)}
    return [found[key] for key in PICKED]


def make_problem(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(M, K, generator=g) / 4).half()
    q = torch.randint(0, 16, (E, N, K), generator=g, dtype=torch.uint8)  # 4-bit values, zero point 8
    packed = (q[:, :, 0::2] | (q[:, :, 1::2] << 4)).contiguous()  # [E, N, K/2], even k in the low nibble
    scale = (torch.rand(E, N, K // GROUP, generator=g) / 16 + 1 / 64).half()  # [E, N, K/group]
    topk_ids = torch.stack([torch.randperm(E, generator=g)[:TOP_K] for _ in range(M)]).to(torch.int32)
    topk_weights = torch.rand(M, TOP_K, generator=g).float()
    return a, q, packed, scale, topk_ids, topk_weights


def align(topk_ids: torch.Tensor, block_m: int, skip_expert: int | None):
    """sorted_token_ids, expert_ids per block, total rows: what moe_align_block_size produces."""
    flat = topk_ids.flatten().tolist()
    sentinel = len(flat)
    rows: list[int] = []
    experts: list[int] = []
    for e in range(E):
        ids = [i for i, x in enumerate(flat) if x == e]
        if not ids:
            continue
        blocks = -(-len(ids) // block_m)
        rows += ids + [sentinel] * (blocks * block_m - len(ids))
        experts += [-1 if e == skip_expert else e] * blocks
    return (torch.tensor(rows, dtype=torch.int32), torch.tensor(experts, dtype=torch.int32),
            torch.tensor([len(rows)], dtype=torch.int32))


def reference(a, q, scale, topk_ids, topk_weights, skip_expert: int | None) -> torch.Tensor:
    w = (q.float() - 8) * scale.float().repeat_interleave(GROUP, dim=2)  # [E, N, K]
    out = torch.zeros(M, TOP_K, N)
    for t in range(M):
        for j in range(TOP_K):
            e = int(topk_ids[t, j])
            if e != skip_expert:
                out[t, j] = (a[t].float() @ w[e].T) * topk_weights[t, j]
    return out


def run(kernel, tl, cfg: ss.KernelConfig, skip_expert: int | None = None):
    a, q, packed, scale, topk_ids, topk_weights = make_problem()
    sorted_ids, expert_ids, total = align(topk_ids, cfg.block_m, skip_expert)
    c = torch.full((M, TOP_K, N), float("nan"), dtype=torch.float16)
    grid = (-(-sorted_ids.shape[0] // cfg.block_m) * -(-N // cfg.block_n),)
    # Argument order and strides as SGLang's invoke_fused_moe_kernel passes them.
    kernel[grid](
        a, packed, c, scale, None, topk_weights, sorted_ids, expert_ids, total,
        N, K, sorted_ids.shape[0], topk_ids.numel(),
        a.stride(0), a.stride(1), packed.stride(0), packed.stride(2), packed.stride(1),
        c.stride(-2), c.stride(-1), scale.stride(0), scale.stride(2), scale.stride(1), 0, 0, 0,
        group_size=GROUP, MUL_ROUTED_WEIGHT=True, top_k=TOP_K, compute_type=tl.float16, has_zp=False,
        use_int4_w4a16=True, use_int8_w8a16=False, even_Ks=K % cfg.block_k == 0, filter_expert=True,
        **cfg.kwargs(),
    )
    return c.float(), reference(a, q, scale, topk_ids, topk_weights, skip_expert)


def _child(tree: str) -> list[dict]:
    """In the TRITON_INTERPRET=1 process: run every case, report errors as plain data."""
    import triton.language as tl

    kernel = load_defs(source(Path(tree), KERNELS), ["write_zeros_to_output", "fused_moe_kernel_gptq_awq"])[
        "fused_moe_kernel_gptq_awq"]
    assert type(kernel).__name__ == "InterpretedFunction", type(kernel)
    topk_ids = make_problem()[4]
    skip = int(topk_ids[0, 0])
    cases = [(cfg, None) for cfg in picked_configs()] + [(picked_configs()[2], skip)]
    results = []
    for cfg, skip_expert in cases:
        out, ref = run(kernel, tl, cfg, skip_expert)
        skipped = topk_ids == (-1 if skip_expert is None else skip_expert)
        results.append({
            "config": cfg.label(), "skip_expert": skip_expert, "nan": bool(torch.isnan(out).any()),
            "rel": ((out - ref).abs().max() / ref.abs().max()).item(),
            "skipped_rows": int(skipped.sum()), "skipped_zero": bool((out[skipped] == 0).all()),
        })
    return results


@pytest.fixture(scope="module")
def results(trees) -> list[dict]:  # noqa: F811
    env = script_env(TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, __file__, str(trees.pristine)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_picked_configs_come_from_the_filtered_space():
    picked = picked_configs()
    assert [c.block_k for c in picked] == [16, 32, 128]
    assert all(c.block_m == 16 for c in picked)  # M=3: the M rule keeps BLOCK_SIZE_M 16 only


@pytest.mark.parametrize("index", [0, 1, 2], ids=["bk16", "bk32", "bk128"])
def test_kernel_matches_torch_reference(results: list[dict], index: int):
    case = results[index]
    assert case["config"] == picked_configs()[index].label() and case["skip_expert"] is None
    assert not case["nan"]
    assert case["rel"] < 1e-2, f"{case['config']}: max relative error {case['rel']}"


def test_expert_off_this_rank_writes_zeros(results: list[dict]):
    case = results[3]
    assert case["skip_expert"] is not None and case["skipped_rows"] > 0 and case["skipped_zero"]
    assert not case["nan"] and case["rel"] < 1e-2


if __name__ == "__main__":
    print(json.dumps(_child(sys.argv[1])))
