"""SGLang 0.5.17's own MoE paths for INT4 experts, called on our ``W4Weights``: benchmark baselines.

GPU host only (needs SGLang importable). Both return ``call(x, topk_weights, topk_ids) -> out``:

- ``triton_default``: ``fused_experts_impl`` with ``use_int4_w4a16`` (``fused_moe_kernel_gptq_awq``
  with SGLang's config lookup, which finds no file for these shapes and uses its default). Our
  int32 words viewed as uint8 ``[E, N, K/2]`` are exactly that kernel's layout: no copy.
- ``triton_default(..., config_dir)`` (the ``triton-tuned`` variant): the same call with SGLang's config lookup pointed (``SGLANG_MOE_CONFIG_DIR``)
  at a folder holding ``python -m moe_tuning tune``'s up and ``_down`` files, laid out the way
  SGLang looks them up (``configs/triton_<version>/``), so the files are read as a server reads them;
- ``marlin``: ``fused_marlin_moe``, what SGLang runs for Kimi by default on sm_90/sm_120, on weights
  repacked the way ``CompressedTensorsWNA16MoE.process_weights_after_loading`` does (from SGLang's
  loaded ``[E, K/8, N]`` layout, no act-order, symmetric).

Several of their kernels are JIT-built with nvcc on first use (minutes for Marlin's GEMM), so
``python -m fastpath_kernels.moe.sglang_baselines warm triton|marlin`` builds them in a child
process first; the benchmark only calls a baseline whose warm-up finished.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch

from fastpath_kernels.moe.layout import GROUP, W4Weights

Call = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def _server_exec_defaults() -> None:
    """The Triton path reads two ``exec`` flags from SGLang's runtime context, which only a running
    server publishes (``config namespace 'exec' not published`` otherwise). Give both modules a
    stand-in with the server's defaults: no deterministic inference, no fused sum+all-reduce."""
    from types import SimpleNamespace

    from sglang.srt.layers.moe.moe_runner.triton_utils import fused_moe, fused_moe_triton_config

    bag = SimpleNamespace(deterministic=SimpleNamespace(enable_deterministic_inference=False),
                          moe=SimpleNamespace(enable_fused_moe_sum_all_reduce=False))
    fused_moe.get_exec = fused_moe_triton_config.get_exec = lambda: bag


def _config_lookup(config_dir: str | None) -> None:
    """Point SGLang's MoE config lookup at ``config_dir`` (None: the package's own folder) and drop
    what it has cached, so the next call reads the files again."""
    import os

    from sglang.srt.layers.moe.moe_runner.triton_utils import fused_moe_triton_config

    if config_dir is None:
        os.environ.pop("SGLANG_MOE_CONFIG_DIR", None)
    else:
        os.environ["SGLANG_MOE_CONFIG_DIR"] = config_dir
    fused_moe_triton_config.get_moe_configs.cache_clear()


def tuned_config_dir(files: list[str], dest: str) -> str:
    """Lay the tuner's ``files`` out under ``dest/configs/triton_<installed version>/``; return ``dest``."""
    import shutil
    from pathlib import Path

    import triton

    folder = Path(dest) / "configs" / f"triton_{triton.__version__.replace('.', '_')}"
    folder.mkdir(parents=True, exist_ok=True)
    for name in files:
        shutil.copy(name, folder / Path(name).name)
    return dest


def triton_default(w13: W4Weights, w2: W4Weights, config_dir: str | None = None) -> Call:
    """SGLang's Triton INT4 path; ``config_dir``: read the tuned files there (``tuned_config_dir``)."""
    from sglang.srt.layers.moe.moe_runner.triton_utils.fused_moe import fused_experts_impl

    _server_exec_defaults()
    _config_lookup(config_dir)
    w1u8, w2u8 = w13.packed.view(torch.uint8), w2.packed.view(torch.uint8)

    def call(x: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor) -> torch.Tensor:
        # in place on a copy: the out-of-place branch allocates through the TP group's symmetric
        # memory, which needs torch.distributed set up (the copy costs one small kernel)
        return fused_experts_impl(x.clone(), w1u8, w2u8, topk_weights, topk_ids, inplace=True,
                                  use_int4_w4a16=True, w1_scale=w13.scale, w2_scale=w2.scale,
                                  block_shape=[0, GROUP], filter_expert=False)

    return call


def marlin(w13: W4Weights, w2: W4Weights) -> Call:
    import sglang.srt.layers.quantization  # noqa: F401 (the server's import order: gptq_kernels first is circular)
    from sglang.srt.hardware_backend.gpu.quantization.gptq_kernels import gptq_marlin_moe_repack
    from sglang.srt.layers.moe.fused_moe_triton.fused_marlin_moe import fused_marlin_moe
    from sglang.srt.layers.quantization.marlin_utils import marlin_make_workspace, marlin_moe_permute_scales

    experts, dev = w13.num_experts, w13.packed.device
    no_perm = torch.empty((experts, 0), dtype=torch.int32, device=dev)

    def repack(w: W4Weights) -> torch.Tensor:
        loaded = w.packed.transpose(1, 2).contiguous()  # SGLang's loaded layout [E, K/8, N]
        return gptq_marlin_moe_repack(loaded, no_perm, loaded.shape[1] * 8, loaded.shape[2], 4)

    q13, q2 = repack(w13), repack(w2)
    # size_k as SGLang passes it: the repacked w13's last dim, and the down K
    s13 = marlin_moe_permute_scales(w13.scale.transpose(1, 2).contiguous(), q13.shape[2], w13.n, GROUP)
    s2 = marlin_moe_permute_scales(w2.scale.transpose(1, 2).contiguous(), w2.k, w2.n, GROUP)
    workspace = marlin_make_workspace(dev, 4)

    def call(x: torch.Tensor, topk_weights: torch.Tensor, topk_ids: torch.Tensor) -> torch.Tensor:
        gating = torch.empty((x.shape[0], experts), dtype=x.dtype, device=dev)  # only its shape is read
        return fused_marlin_moe(x, q13, q2, s13, s2, gating, topk_weights, topk_ids, g_idx1=no_perm,
                                g_idx2=no_perm, sort_indices1=no_perm, sort_indices2=no_perm, num_bits=4,
                                is_k_full=True, workspace=workspace)

    return call


def warm(which: str) -> None:
    """Build the JIT kernels ``which`` baseline uses by running it once at small sizes."""
    from fastpath_kernels.moe.layout import pack_int4

    dev, experts, hidden, inter = "cuda", 16, 1024, 256
    g = torch.Generator(dev).manual_seed(0)

    def weights(n: int, k: int) -> W4Weights:
        q = torch.randint(0, 16, (experts, n, k), generator=g, device=dev)
        return W4Weights(pack_int4(q), (torch.rand(experts, n, k // GROUP, generator=g, device=dev) / 64).bfloat16())

    w13, w2 = weights(2 * inter, hidden), weights(hidden, inter)
    call = triton_default(w13, w2) if which == "triton" else marlin(w13, w2)
    for m in (1, 4):  # M=1 takes Marlin's single-token align kernel, M>1 moe_align
        x = torch.randn(m, hidden, generator=g, device=dev).bfloat16()
        ids = torch.stack([torch.randperm(experts, device=dev)[:8] for _ in range(m)]).to(torch.int32)
        call(x, torch.full((m, 8), 0.125, device=dev), ids)
    torch.cuda.synchronize()
    print(f"warm {which}: ok", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "warm" or sys.argv[2] not in ("triton", "marlin"):
        sys.exit("usage: python -m fastpath_kernels.moe.sglang_baselines warm triton|marlin")
    warm(sys.argv[2])
