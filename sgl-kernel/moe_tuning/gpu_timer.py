"""Time one config of SGLang's INT4 MoE GEMM on this GPU, replayed from a CUDA graph (GPU host only).

``GraphTimer(shapes)(gemm, m, cfg)`` runs SGLang 0.5.17's ``invoke_fused_moe_kernel`` (the
``fused_moe_kernel_gptq_awq`` path ``--moe-runner-backend triton`` takes for Kimi-K2.5's INT4
experts) on random weights of the rank's shapes:

* routing like an EAGLE verify batch: ``m`` tokens (batch size x draft tokens), each sent to
  ``top_k`` distinct experts drawn uniformly (seeded per M and launch: each launch of a graph has
  its own routing, so a launch seldom finds its experts in L2, as in a model's successive
  layers), aligned with SGLang's own ``moe_align_block_size`` at the config's BLOCK_SIZE_M,
  outside the timed region;
* gate/up: A ``[m, hidden]`` times ``w13`` ``[E, 2I/TP, hidden/2]`` into ``[m·top_k, 2I/TP]``;
  down: A ``[m·top_k, I/TP]`` times ``w2`` ``[E, hidden, I/TP/2]``, weighted by the router and
  written ``[m, top_k, hidden]``, as SGLang calls them;
* the first call compiles the config (Triton JIT) and is not timed; then ``launches`` calls are
  captured into one CUDA graph, replayed ``replays`` times between CUDA events: the figure is the
  median replay divided by ``launches``, in µs, i.e. the kernel with launch overhead amortised, as
  it runs inside SGLang's decode and verify graphs.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from moe_tuning.search_space import KernelConfig
from moe_tuning.shapes import Gemm, RankShapes

SEED = 1234


class GraphTimer:
    def __init__(self, shapes: RankShapes, launches: int = 10, replays: int = 20, device: str = "cuda",
                 random_weights: bool = True, cutoff: float = 3.0) -> None:
        """``random_weights=False``: zero weights, for ``compile`` only (``precompile``). ``cutoff``: a
        config whose first replay is slower than ``cutoff`` times the fastest so far at this
        (GEMM, M) is not replayed again; that first replay is its time (the H200 run spent most of
        its timing on configs 10-80x slower than the best)."""
        import torch

        self.torch = torch
        self.shapes, self.launches, self.replays, self.device = shapes, launches, replays, device
        gen = torch.Generator(device="cpu").manual_seed(SEED)
        self.weights: dict[str, tuple[Any, Any]] = {}
        for gemm in (shapes.gate_up, shapes.down):
            size = (shapes.experts, gemm.n, gemm.packed_k)
            if random_weights:
                packed = torch.randint(0, 256, size, generator=gen, dtype=torch.uint8).to(device)
                scale = (torch.rand(shapes.experts, gemm.n, gemm.scale_groups, generator=gen) * 0.02).to(device)
            else:
                packed = torch.zeros(size, dtype=torch.uint8, device=device)
                scale = torch.zeros(shapes.experts, gemm.n, gemm.scale_groups, device=device)
            self.weights[gemm.name] = (packed, scale.to(torch.bfloat16))
        self.routing: dict[tuple[int, int], tuple[Any, Any]] = {}
        self.cutoff = cutoff
        self.best: dict[tuple[str, int], float] = {}

    def _routing(self, m: int, draw: int) -> tuple[Any, Any]:
        """(topk_weights, topk_ids) of ``m`` tokens, draw ``draw``: the same for every config at this M."""
        torch = self.torch
        if (m, draw) not in self.routing:
            gen = torch.Generator(device="cpu").manual_seed(SEED + 1000 * draw + m)
            top_k, experts = self.shapes.model.top_k, self.shapes.experts
            ids = torch.stack([torch.randperm(experts, generator=gen)[:top_k] for _ in range(m)]).to(torch.int32)
            weights = torch.softmax(torch.rand(m, top_k, generator=gen), dim=-1)
            self.routing[m, draw] = (weights.to(self.device), ids.to(self.device))
        return self.routing[m, draw]

    def _launcher(self, gemm: Gemm, m: int, cfg: KernelConfig, draw: int = 0) -> Callable[[], None]:
        """One call of SGLang's kernel for ``gemm`` at ``m`` tokens with ``cfg`` on routing ``draw``,
        inputs bound."""
        import triton.language as tl
        from sglang.kernels.ops.moe.fused_moe_triton_kernels import invoke_fused_moe_kernel
        from sglang.srt.layers.moe.moe_runner.triton_utils.moe_align_block_size import moe_align_block_size

        torch = self.torch
        topk_weights, topk_ids = self._routing(m, draw)
        top_k = topk_ids.shape[1]
        packed, scale = self.weights[gemm.name]
        down = gemm.name == "down"
        a = torch.randn(m * top_k if down else m, gemm.k, device=self.device, dtype=torch.bfloat16) * 0.1
        c = torch.empty((m, top_k, gemm.n) if down else (m * top_k, gemm.n), device=self.device,
                        dtype=torch.bfloat16)
        sorted_ids, expert_ids, padded = moe_align_block_size(topk_ids, cfg.block_m, self.shapes.experts)

        def launch() -> None:
            invoke_fused_moe_kernel(a, packed, None, c, None, scale, None, topk_weights, topk_ids, sorted_ids,
                                    expert_ids, padded, down, 1 if down else top_k, cfg.kwargs(),
                                    compute_type=tl.bfloat16, use_fp8_w8a8=False, use_int8_w8a8=False,
                                    use_int8_w8a16=False, use_int4_w4a16=True, per_channel_quant=False,
                                    block_shape=[0, gemm.group_size], filter_expert=False)

        return launch

    def compile(self, gemm: Gemm, m: int, cfg: KernelConfig) -> None:
        """Launch once: builds (or loads) the binary this (config, specialization) needs."""
        self._launcher(gemm, m, cfg)()
        self.torch.cuda.synchronize()

    def __call__(self, gemm: Gemm, m: int, cfg: KernelConfig) -> float:
        torch = self.torch
        launches = [self._launcher(gemm, m, cfg, draw) for draw in range(self.launches)]
        launches[0]()  # compiles this config (or loads it from the cache); not timed
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream):
            with torch.cuda.graph(graph, stream=stream):
                for launch in launches:
                    launch()
        torch.cuda.synchronize()
        graph.replay()  # warm
        times = []
        for _ in range(self.replays):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3 / self.launches)
            best = self.best.get((gemm.name, m))
            if len(times) == 1 and best is not None and times[0] > self.cutoff * best:
                break  # far off the best: one replay says enough
        us = statistics.median(times)
        self.best[gemm.name, m] = min(us, self.best.get((gemm.name, m), us))
        del graph
        return us


def xcompile_screen(arch: int, dev: Any) -> Any:
    """A ``tune.Screen`` that refuses configs SGLang's kernel cannot run well on ``arch`` (e.g. 120):
    over the shared memory, spilling registers, or on wgmma (``xcompile.compiled_rejections``)."""
    from sglang.kernels.ops.moe.fused_moe_triton_kernels import fused_moe_kernel_gptq_awq

    from moe_tuning.xcompile import compile_stats, compiled_rejections

    def screen(gemm: Gemm, cfg: KernelConfig) -> list[str]:
        try:
            return compiled_rejections(compile_stats(fused_moe_kernel_gptq_awq, gemm, cfg, arch), dev)
        except Exception as exc:  # noqa: BLE001 - a config that does not compile is refused, with the reason
            return [f"does not compile for sm_{arch}: {type(exc).__name__}: {exc}"[:300]]

    return screen
