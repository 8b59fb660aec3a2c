"""The memory-bandwidth floor of one decode or verify step, from the model's config.json.

A step of T tokens (decode: T = bs; verify: T = bs * k) must at least read, per GPU:
  * every non-expert weight once (attention, dense MLPs, shared experts, routers,
    the whole lm_head) and the T embedding rows it looks up;
  * for MoE layers the routed experts the T tokens touch: with uniform routing of
    top_k of E experts, E * (1 - (1 - top_k / E) ** T) distinct experts per layer;
  * the KV cache of every request (bs * (ctx + tokens per request) positions) and
    the KV of the T new tokens it writes.
Divided by the GPU's memory bandwidth that is the time no kernel can beat. With TP
the weights and MHA KV heads are split across ranks (a KV head count below the TP
size is replicated); MLA's latent KV is replicated on every rank. Not counted:
norms, biases, activations, quantisation scales other than INT4 group scales, the
draft model and all-reduce traffic.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.core.errors import BenchError
from sglang_fastpath.errors import FastpathError
from sglang_fastpath.models.folder import read_config, routed_experts

# Peak memory bandwidth, bytes/s, matched by substring of the CUDA device name.
GPU_BANDWIDTH: tuple[tuple[str, float], ...] = (
    ("H200", 4.8e12),
    ("H100", 3.35e12),
    ("RTX PRO 6000", 1.792e12),
)

_DTYPE_BYTES = {"bfloat16": 2.0, "float16": 2.0, "half": 2.0, "float32": 4.0, "float": 4.0,
                "float8_e4m3fn": 1.0, "float8_e5m2": 1.0}


def gpu_bandwidth(gpu_name: str) -> float | None:
    """Bytes/s of the named GPU, or None when it is not in GPU_BANDWIDTH."""
    upper = gpu_name.upper()
    for needle, bandwidth in GPU_BANDWIDTH:
        if needle in upper:
            return bandwidth
    return None


@dataclass(frozen=True)
class Mla:
    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int


@dataclass(frozen=True)
class Moe:
    experts: int
    top_k: int
    expert_intermediate: int
    shared_intermediate: int
    moe_layers: int


@dataclass(frozen=True)
class ModelShape:
    hidden: int
    layers: int
    vocab: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    dtype_bytes: float = 2.0
    expert_bytes: float = 2.0  # bytes per routed-expert parameter (INT4 = 0.5 + scales)
    mla: Mla | None = None
    moe: Moe | None = None

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> ModelShape:
        cfg = config.get("text_config") or config.get("language_config") or config
        try:
            hidden = int(cfg["hidden_size"])
            heads = int(cfg["num_attention_heads"])
            shape = dict(
                hidden=hidden,
                layers=int(cfg["num_hidden_layers"]),
                vocab=int(cfg["vocab_size"]),
                heads=heads,
                kv_heads=int(cfg.get("num_key_value_heads") or heads),
                head_dim=int(cfg.get("head_dim") or hidden // heads),
                intermediate=int(cfg.get("intermediate_size") or 0),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise BenchError(f"model config lacks {exc}; the floor needs a Hugging Face config.json") from None
        dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or config.get("torch_dtype") or "bfloat16")
        dtype_bytes = _DTYPE_BYTES.get(dtype.replace("torch.", ""), 2.0)
        linear_bytes, expert_bytes = _quantized_bytes(config.get("quantization_config") or
                                                      cfg.get("quantization_config"), dtype_bytes)
        mla = None
        if cfg.get("kv_lora_rank"):
            mla = Mla(
                q_lora_rank=int(cfg["q_lora_rank"]) if cfg.get("q_lora_rank") else None,
                kv_lora_rank=int(cfg["kv_lora_rank"]),
                qk_nope_head_dim=int(cfg["qk_nope_head_dim"]),
                qk_rope_head_dim=int(cfg["qk_rope_head_dim"]),
                v_head_dim=int(cfg["v_head_dim"]),
            )
        return cls(**shape, dtype_bytes=linear_bytes, expert_bytes=expert_bytes, mla=mla,
                   moe=_moe(cfg, shape["layers"], shape["intermediate"]))

    @classmethod
    def from_dir(cls, model_dir: Path) -> ModelShape:
        try:
            return cls.from_config(read_config(model_dir))
        except FastpathError as exc:
            raise BenchError(f"{exc}; --models must hold target/config.json") from None

    # --- parameter counts ---------------------------------------------------
    def attention_params(self) -> int:
        """Projection weights of one attention layer."""
        h = self.hidden
        if self.mla is None:
            q = self.heads * self.head_dim
            return h * q + 2 * h * self.kv_heads * self.head_dim + q * h
        m = self.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        q = h * m.q_lora_rank + m.q_lora_rank * self.heads * qk if m.q_lora_rank else h * self.heads * qk
        kv_a = h * (m.kv_lora_rank + m.qk_rope_head_dim)
        kv_b = m.kv_lora_rank * self.heads * (m.qk_nope_head_dim + m.v_head_dim)
        return q + kv_a + kv_b + self.heads * m.v_head_dim * h

    def distinct_experts(self, tokens: float) -> float:
        """Expected routed experts one MoE layer touches for ``tokens`` tokens."""
        if self.moe is None or tokens <= 0:
            return 0.0
        e, k = self.moe.experts, self.moe.top_k
        return e * (1.0 - (1.0 - k / e) ** tokens)

    def weight_bytes(self, tokens: float) -> float:
        """Weights read by a step of ``tokens`` tokens, all GPUs together."""
        h, b = self.hidden, self.dtype_bytes
        total = (self.vocab * h + tokens * h) * b  # lm_head + embedding rows
        total += self.layers * self.attention_params() * b
        moe_layers = self.moe.moe_layers if self.moe else 0
        total += (self.layers - moe_layers) * 3 * h * self.intermediate * b
        if self.moe:
            m = self.moe
            per_layer = h * m.experts * b + 3 * h * m.shared_intermediate * b
            per_layer += self.distinct_experts(tokens) * 3 * h * m.expert_intermediate * self.expert_bytes
            total += moe_layers * per_layer
        return total

    def kv_bytes_per_token(self, tp: int) -> float:
        """KV cache bytes of one token position, all layers, on one GPU."""
        if self.mla is not None:
            return self.layers * (self.mla.kv_lora_rank + self.mla.qk_rope_head_dim) * self.dtype_bytes
        heads_per_rank = max(1, self.kv_heads // tp)
        return self.layers * 2 * heads_per_rank * self.head_dim * self.dtype_bytes


def _quantized_bytes(quant: dict[str, Any] | None, dtype_bytes: float) -> tuple[float, float]:
    """(bytes per linear weight, bytes per routed-expert weight) under the checkpoint's quantisation."""
    if not quant:
        return dtype_bytes, dtype_bytes
    method = str(quant.get("quant_method", "")).lower()
    if method == "fp8":
        return 1.0, 1.0
    if method == "compressed-tensors":
        for group in (quant.get("config_groups") or {}).values():
            weights = group.get("weights") or {}
            bits = weights.get("num_bits")
            if bits:
                group_size = weights.get("group_size") or 0
                scales = 2.0 / group_size if group_size else 0.0
                return dtype_bytes, bits / 8 + scales  # Kimi-style: routed experts only
    return dtype_bytes, dtype_bytes


def _moe(cfg: dict[str, Any], layers: int, intermediate: int) -> Moe | None:
    experts = routed_experts(cfg)
    if not experts:
        return None
    expert_intermediate = int(cfg.get("moe_intermediate_size") or intermediate)
    if cfg.get("n_shared_experts"):
        shared = int(cfg["n_shared_experts"]) * expert_intermediate
    else:
        shared = int(cfg.get("shared_expert_intermediate_size") or 0)
    dense = int(cfg.get("first_k_dense_replace") or 0)
    return Moe(int(experts), int(cfg.get("num_experts_per_tok") or 1), expert_intermediate, shared, layers - dense)


@dataclass(frozen=True)
class StepBytes:
    weights: float
    kv_read: float
    kv_write: float

    @property
    def total(self) -> float:
        return self.weights + self.kv_read + self.kv_write


def step_bytes(shape: ModelShape, *, mode: str, bs: int, k: int, ctx: int, tp: int) -> StepBytes:
    """Bytes one GPU must move for a decode (k ignored) or verify step of ``bs`` requests."""
    per_req = 1 if mode.startswith("decode") else k
    if per_req < 1 or bs < 1 or tp < 1:
        raise BenchError(f"step of bs={bs} k={k} tp={tp}: all must be >= 1")
    tokens = bs * per_req
    kv = shape.kv_bytes_per_token(tp)
    return StepBytes(weights=shape.weight_bytes(tokens) / tp, kv_read=bs * (ctx + per_req) * kv,
                     kv_write=tokens * kv)


def floor_ms(shape: ModelShape, *, mode: str, bs: int, k: int, ctx: int, tp: int, bandwidth: float) -> float:
    return step_bytes(shape, mode=mode, bs=bs, k=k, ctx=ctx, tp=tp).total / bandwidth * 1e3
