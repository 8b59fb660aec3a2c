"""INT4 weights in compressed-tensors ``pack-quantized`` form (symmetric, group 32), as in Kimi-K2.5.

A linear weight ``W [out, in]`` is stored as three tensors, the names SGLang's
compressed-tensors MoE loader reads for each expert projection:
``weight_packed`` int32 ``[out, in/8]`` (value ``q`` in [-8, 7] stored as ``q + 8``,
element ``k`` of a word in bits ``4k..4k+3``), ``weight_scale`` bf16
``[out, in/32]`` (one scale per group of 32 inputs) and ``weight_shape`` int64
``[2]`` = ``[out, in]``. Dequantized ``W[o, i] = q[o, i] * scale[o, i // 32]``.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from sglang_fastpath.models.shapes import INT4_GROUP_SIZE
from sglang_fastpath.models.tensors import DTYPE, TensorFactory, TensorSpec

GROUP_SIZE = INT4_GROUP_SIZE
NUM_BITS = 4
PACK_FACTOR = 32 // NUM_BITS
OFFSET = 1 << (NUM_BITS - 1)
ZERO_WORD = 0x88888888 - (1 << 32)  # eight nibbles of 8, i.e. eight zeros, as a signed int32
_UNIFORM_STD = ((16 ** 2 - 1) / 12) ** 0.5  # std of a uniform integer on [-8, 7]

QUANTIZATION_CONFIG = {
    "config_groups": {
        "group_0": {
            "input_activations": None,
            "output_activations": None,
            "targets": ["Linear"],
            "weights": {
                "actorder": None, "block_structure": None, "dynamic": False, "group_size": GROUP_SIZE,
                "num_bits": NUM_BITS, "observer": "minmax", "observer_kwargs": {}, "strategy": "group",
                "symmetric": True, "type": "int",
            },
        }
    },
    "format": "pack-quantized",
    # Only the routed experts are INT4: attention, dense MLPs, shared experts and lm_head stay bf16.
    "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", r"re:.*mlp\.(gate|up|gate_up|down)_proj.*"],
    "kv_cache_scheme": None,
    "quant_method": "compressed-tensors",
    "quantization_status": "compressed",
}
SUFFIXES = ("weight_packed", "weight_scale", "weight_shape")


def check_shape(out_features: int, in_features: int) -> None:
    if in_features % GROUP_SIZE:
        raise ValueError(f"in_features {in_features} is not a multiple of the INT4 group size {GROUP_SIZE}")


def pack(q: torch.Tensor) -> torch.Tensor:
    """int8 values in [-8, 7], shape [out, in] -> int32 words [out, in/8]."""
    if q.dtype != torch.int8 or q.shape[-1] % PACK_FACTOR:
        raise ValueError(f"pack wants int8 [out, in] with in a multiple of 8, got {q.dtype} {tuple(q.shape)}")
    u = (q.to(torch.int32) + OFFSET).view(*q.shape[:-1], -1, PACK_FACTOR)
    shifts = torch.arange(PACK_FACTOR, device=q.device, dtype=torch.int32) * NUM_BITS
    words = (u << shifts).sum(dim=-1, dtype=torch.int64)  # up to 2**32 - 1 before the wrap below
    return torch.where(words >= 1 << 31, words - (1 << 32), words).to(torch.int32)


def unpack(words: torch.Tensor) -> torch.Tensor:
    """int32 words [out, in/8] -> int8 values [out, in] in [-8, 7]."""
    shifts = torch.arange(PACK_FACTOR, device=words.device, dtype=torch.int32) * NUM_BITS
    nibbles = (words.unsqueeze(-1) >> shifts) & 0xF
    return (nibbles - OFFSET).to(torch.int8).reshape(*words.shape[:-1], -1)


def quantize(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric min-max quantization per group of 32 inputs: (q int8 [out, in], scale bf16 [out, in/32])."""
    out_features, in_features = w.shape
    check_shape(out_features, in_features)
    groups = w.float().view(out_features, in_features // GROUP_SIZE, GROUP_SIZE)
    half_range = (2 * OFFSET - 1) / 2  # 7.5: compressed-tensors' symmetric min-max scale
    scale = (groups.abs().amax(dim=-1) / half_range).clamp(min=1e-12)
    scale = scale.to(DTYPE)
    q = torch.round(groups / scale.float().unsqueeze(-1)).clamp(-OFFSET, OFFSET - 1).to(torch.int8)
    return q.view(out_features, in_features), scale


def dequantize(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    out_features, in_features = q.shape
    groups = q.float().view(out_features, in_features // GROUP_SIZE, GROUP_SIZE) * scale.float().unsqueeze(-1)
    return groups.view(out_features, in_features)


def int4_linear(factory: TensorFactory, prefix: str, out_features: int, in_features: int,
                zero: bool = False) -> list[TensorSpec]:
    """The three tensors of one INT4 projection named ``prefix``: random values, or exact zeros.

    Random values are uniform over all 16 codes with per-group scales chosen so the
    dequantized weight has a standard deviation near ``1/sqrt(in_features)``. Exact
    zeros are zero bytes throughout (code -8 times a zero scale), which a checkpoint
    stores as a hole: nothing drawn, nothing written.
    """
    check_shape(out_features, in_features)
    words = (out_features, in_features // PACK_FACTOR)
    groups = (out_features, in_features // GROUP_SIZE)
    if zero:
        packed = factory.zeros(f"{prefix}.weight_packed", words, torch.int32)
        scale = factory.zeros(f"{prefix}.weight_scale", groups)
    else:
        packed = factory.random_bytes(f"{prefix}.weight_packed", words, torch.int32)
        base = 1.0 / (in_features ** 0.5) / _UNIFORM_STD
        scale = factory.uniform(f"{prefix}.weight_scale", groups, 0.75 * base, 1.25 * base)
    packed = replace(packed, params=out_features * in_features)
    shape = TensorSpec(f"{prefix}.weight_shape", (2,), torch.int64,
                       lambda: torch.tensor([out_features, in_features], dtype=torch.int64), params=0)
    scale = replace(scale, params=0)
    return [packed, scale, shape]
