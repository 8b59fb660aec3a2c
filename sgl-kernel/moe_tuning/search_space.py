"""Candidate configs for ``fused_moe_kernel_gptq_awq`` (INT4, SGLang 0.5.17) and the filters they pass.

Each filter returns the reason a config is refused, or ``None``. The filters, and why:

* ``tile``: BLOCK_SIZE_M/N/K are powers of two >= 16 (``tl.arange`` needs powers of two,
  ``tl.dot`` needs every dimension >= 16), and BLOCK_SIZE_M is in the space's set,
  by default {16, 32}: at BLOCK_SIZE_M >= 64 Triton emits wgmma on sm_90 and the
  H200's timings and shared-memory use no longer hold for sm_120 (mma.sync only).
* ``k``: K % BLOCK_SIZE_K == 0. The kernel loads the packed B tile with no mask
  (``b = tl.load(b_ptrs)``), so a K tail would read past the row; and it advances B by
  BLOCK_SIZE_K // 2 bytes per step, so BLOCK_SIZE_K must be even (implied by the tile rule).
  There is *no* rule between BLOCK_SIZE_K and the quant group size: the kernel gathers
  one scale per element, ``(offs_k + BLOCK_SIZE_K * k) // group_size``, so a K tile may
  span several groups (BK=128 with group 32) or part of one (BK=16). The upstream
  tuner's ``group_size % BLOCK_SIZE_K == 0`` (moe-triton.md §3, bug 2) is the FP8
  block-quant kernel's rule; applied here it empties the space for group 32.
* ``m``: a BLOCK_SIZE_M is skipped when a smaller one in the space already holds M rows:
  a token picks distinct experts, so no expert gets more than M rows, and the bigger
  block only multiplies padding.
* ``smem``: the shared-memory estimate fits the device's per-block opt-in limit
  (sm_120: 101376 B, sm_90: 232448 B). See ``smem_estimate``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, fields

from moe_tuning.shapes import Device, Gemm
from sglang_fastpath.errors import FastpathError

A_BYTES = 2  # fp16/bf16 activations
B_BYTES = 2  # the dequantized B operand, in the compute dtype
MIN_DOT = 16
WGMMA_FREE_BLOCK_M = (16, 32)


@dataclass(frozen=True, order=True)
class KernelConfig:
    """The kernel kwargs one config-file entry carries (SGLang's key names in ``KEYS``)."""

    block_m: int
    block_n: int
    block_k: int
    group_m: int
    num_warps: int
    num_stages: int

    KEYS = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M", "num_warps", "num_stages")

    def kwargs(self) -> dict[str, int]:
        return dict(zip(self.KEYS, (getattr(self, f.name) for f in fields(self))))

    @classmethod
    def from_kwargs(cls, kwargs: dict[str, int]) -> "KernelConfig":
        return cls(*(kwargs[key] for key in cls.KEYS))

    def label(self) -> str:
        return (f"BM{self.block_m} BN{self.block_n} BK{self.block_k} GM{self.group_m} "
                f"w{self.num_warps} s{self.num_stages}")


@dataclass(frozen=True)
class SearchSpace:
    """The axes to enumerate; the defaults are moe-triton.md §5's H200-for-sm_120 space."""

    block_m: tuple[int, ...] = WGMMA_FREE_BLOCK_M
    block_n: tuple[int, ...] = (16, 32, 64, 128)
    block_k: tuple[int, ...] = (16, 32, 64, 128, 256)
    group_m: tuple[int, ...] = (1,)
    num_warps: tuple[int, ...] = (2, 4, 8)
    num_stages: tuple[int, ...] = (2, 3, 4, 5)

    def all_configs(self) -> list[KernelConfig]:
        axes = (self.block_m, self.block_n, self.block_k, self.group_m, self.num_warps, self.num_stages)
        return [KernelConfig(*values) for values in itertools.product(*axes)]


def smem_estimate(cfg: KernelConfig) -> int:
    """Shared memory, in bytes, of one program: ``max(stages-1, 1)·BM·BK·2 + BK·BN·2``.

    Triton's pipeliner keeps ``num_stages - 1`` buffers of the A tile (a contiguous
    load); the packed B bytes and the scales are gathers (``offs_k // 2``,
    ``// group_size``) that stay in registers; the dequantized B operand goes
    through shared memory once for the dot. Measured by cross-compiling the
    0.5.17 kernel for sm_90 and sm_120 with Triton 3.6.0 and 3.9.0 (and checked
    against the installed Triton by test_sgl_kernel_xcompile.py): exact when the
    K loop runs at least ``num_stages - 1`` times, an upper bound otherwise
    (down at TP=8 with BK=256 has one iteration and gets one A buffer).
    moe-triton.md §3's ``stages·BM·BK·2 + BK·BN·2`` overstates it by one A tile.
    """
    a_buffers = max(cfg.num_stages - 1, 1)
    return a_buffers * cfg.block_m * cfg.block_k * A_BYTES + cfg.block_k * cfg.block_n * B_BYTES


def _pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


def tile_rule(cfg: KernelConfig, space: SearchSpace) -> str | None:
    for name, value in (("BLOCK_SIZE_M", cfg.block_m), ("BLOCK_SIZE_N", cfg.block_n), ("BLOCK_SIZE_K", cfg.block_k)):
        if not _pow2(value) or value < MIN_DOT:
            return f"{name}={value} is not a power of two >= {MIN_DOT} (tl.arange / tl.dot)"
    if cfg.block_m not in space.block_m:
        return f"BLOCK_SIZE_M={cfg.block_m} is outside {space.block_m} (>= 64 uses wgmma on sm_90, not sm_120)"
    if cfg.group_m < 1 or cfg.num_warps < 1 or cfg.num_stages < 1:
        return "GROUP_SIZE_M, num_warps and num_stages must be >= 1"
    return None


def k_rule(cfg: KernelConfig, gemm: Gemm) -> str | None:
    if gemm.k % cfg.block_k:
        return (f"BLOCK_SIZE_K={cfg.block_k} does not divide K={gemm.k} of {gemm.name} "
                "(the packed B tile is loaded unmasked)")
    return None


def m_rule(cfg: KernelConfig, m: int, space: SearchSpace) -> str | None:
    smaller = [bm for bm in space.block_m if bm < cfg.block_m and bm >= m]
    if smaller:
        return f"BLOCK_SIZE_M={cfg.block_m} at M={m}: BLOCK_SIZE_M={min(smaller)} already holds every expert's rows"
    return None


def smem_rule(cfg: KernelConfig, dev: Device) -> str | None:
    need = smem_estimate(cfg)
    if need > dev.smem_bytes:
        return f"needs ~{need} B of shared memory, over {dev.arch}'s {dev.smem_bytes} B ({dev.key})"
    return None


def rejections(cfg: KernelConfig, gemm: Gemm, dev: Device, space: SearchSpace = SearchSpace(),
               m: int | None = None) -> list[str]:
    """Every filter's reason to refuse ``cfg`` (empty: it passes). ``m=None`` skips the M rule."""
    reasons = [tile_rule(cfg, space), k_rule(cfg, gemm), smem_rule(cfg, dev)]
    if m is not None:
        reasons.append(m_rule(cfg, m, space))
    return [reason for reason in reasons if reason]


def candidates(gemm: Gemm, dev: Device, m: int, space: SearchSpace = SearchSpace()) -> list[KernelConfig]:
    """The configs of ``space`` worth timing for ``gemm`` at M tokens on ``dev``, sorted."""
    if m < 1:
        raise FastpathError(f"M={m}: the number of tokens must be >= 1")
    found = sorted(cfg for cfg in space.all_configs() if not rejections(cfg, gemm, dev, space, m))
    if not found:
        raise FastpathError(f"no config of the search space passes the filters for {gemm.name} at M={m} on {dev.key}")
    return found
