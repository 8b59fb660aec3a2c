"""The packed INT4 expert layout the small-M kernel reads, and the torch conversions into it.

Layout (per GEMM ``y = x @ W.T`` with ``W`` of shape [N, K]; ``W4Weights``):

- ``packed``: int32 ``[E, N, K/8]``, row-major. Word ``j`` of row ``n`` holds the 8 INT4 values
  of ``W[n, 8j : 8j+8]``; value ``8j+i`` sits in bits ``4i .. 4i+3`` (low nibble first), stored
  unsigned with offset 8: ``W[n, k] = (nibble - 8) * scale``.
- ``scale``: activation dtype ``[E, N, K/32]``: one scale per 32 consecutive K values (group 32),
  symmetric (no zero point).
- Gate/up stack gate rows ``[0, I)`` above up rows ``[I, 2I)`` (``N = 2I``), as SGLang's
  ``w13`` does; down has ``N = hidden``, ``K = I``.

This is the compressed-tensors ``pack-quantized`` checkpoint layout itself (``weight_packed``
``[N, K/8]`` int32, ``weight_scale`` ``[N, K/32]``), stacked over experts. The kernel streams each
row's words in order and needs no reordering, so the conversion at load time is a stack (from
the checkpoint) or a transpose (from SGLang's loaded ``[E, K/8, N]`` parameters), a dtype cast of
the scales and ``contiguous()``. Viewed as uint8 ``[E, N, K/2]`` the same bytes are SGLang's own
Triton INT4 layout (even K in the low nibble), so both kernels can share one copy.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

GROUP = 32
PACK = 8  # INT4 values per int32 word
OFFSET = 8  # symmetric INT4 stored unsigned


@dataclass(frozen=True)
class W4Weights:
    """One expert-stacked INT4 GEMM operand in the small-M kernel's layout (module docstring)."""

    packed: torch.Tensor  # int32 [E, N, K/8]
    scale: torch.Tensor  # [E, N, K/32]

    def __post_init__(self) -> None:
        e, n, kw = self.packed.shape
        if self.packed.dtype != torch.int32 or not self.packed.is_contiguous():
            raise ValueError(f"packed must be contiguous int32 [E, N, K/8], got {self.packed.dtype} {tuple(self.packed.shape)}")
        if tuple(self.scale.shape) != (e, n, kw * PACK // GROUP) or not self.scale.is_contiguous():
            raise ValueError(f"scale must be contiguous [E, N, K/{GROUP}] = {(e, n, kw * PACK // GROUP)}, got {tuple(self.scale.shape)}")

    @property
    def num_experts(self) -> int:
        return self.packed.shape[0]

    @property
    def n(self) -> int:
        return self.packed.shape[1]

    @property
    def k(self) -> int:
        return self.packed.shape[2] * PACK

    def nbytes_per_expert(self) -> int:
        """Bytes one expert's weights and scales occupy: what the kernel streams for it."""
        return (self.packed[0].numel() * self.packed.element_size()
                + self.scale[0].numel() * self.scale.element_size())


def from_compressed_tensors(weight_packed: torch.Tensor, weight_scale: torch.Tensor,
                            dtype: torch.dtype) -> W4Weights:
    """Checkpoint layout (``[E, N, K/8]`` int32 or a list of ``[N, K/8]``, scales ``[.., N, K/32]``)
    to ``W4Weights``: stack, cast the scales to the activation dtype, make contiguous."""
    if isinstance(weight_packed, (list, tuple)):
        weight_packed = torch.stack(list(weight_packed))
    if isinstance(weight_scale, (list, tuple)):
        weight_scale = torch.stack(list(weight_scale))
    return W4Weights(weight_packed.to(torch.int32).contiguous(), weight_scale.to(dtype).contiguous())


def from_sglang_loaded(weight_packed: torch.Tensor, weight_scale: torch.Tensor, dtype: torch.dtype) -> W4Weights:
    """SGLang 0.5.17's loaded ``CompressedTensorsWNA16MoE`` parameters (``w13_weight_packed``
    ``[E, K/8, N]`` int32, ``w13_weight_scale`` ``[E, K/32, N]``; likewise ``w2``) to ``W4Weights``."""
    return from_compressed_tensors(weight_packed.transpose(1, 2), weight_scale.transpose(1, 2), dtype)


def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """Unsigned nibbles ``q`` (0..15, ``[..., K]``) to int32 words ``[..., K/8]``, value ``8j+i`` in
    bits ``4i``: the compressed-tensors packing (used by tests and benchmarks to make weights)."""
    if q.shape[-1] % PACK:
        raise ValueError(f"K={q.shape[-1]} is not a multiple of {PACK}")
    words = q.to(torch.int64).reshape(*q.shape[:-1], q.shape[-1] // PACK, PACK)
    packed = (words << (4 * torch.arange(PACK, device=q.device))).sum(-1)
    return torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of ``pack_int4``: int32 ``[..., K/8]`` to nibbles 0..15 ``[..., K]`` (uint8)."""
    shifts = 4 * torch.arange(PACK, device=packed.device)
    nibbles = (packed.to(torch.int64).unsqueeze(-1) >> shifts) & 0xF
    return nibbles.reshape(*packed.shape[:-1], packed.shape[-1] * PACK).to(torch.uint8)


def dequantize(w: W4Weights, expert: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Expert ``expert``'s ``[N, K]`` weights in ``dtype``: ``(nibble - 8) * scale``."""
    q = unpack_int4(w.packed[expert]).to(dtype) - OFFSET
    return q * w.scale[expert].to(dtype).repeat_interleave(GROUP, dim=-1)
