"""The DeepSeek-V3 target (``DeepseekV3ForCausalLM``) with Kimi-K2.5's text dimensions.

MLA attention (``q_a_proj``/``q_a_layernorm``/``q_b_proj``, ``kv_a_proj_with_mqa``/
``kv_a_layernorm``/``kv_b_proj``, ``o_proj``), ``first_k_dense_replace`` dense MLP
layers, then MoE layers with a sigmoid ``noaux_tc`` router (``mlp.gate.weight`` and
a float32 ``e_score_correction_bias``), one shared expert and routed experts stored
per expert (``mlp.experts.E.{gate,up,down}_proj``), the names SGLang's
``deepseek_weight_loader`` maps onto its fused MoE. Routed experts are bf16
``.weight`` or INT4 (``int4.py``), declared by a compressed-tensors
``quantization_config`` that leaves everything else bf16, as in Kimi-K2.5.

Random matrices have standard deviation ``1/sqrt(fan_in)`` so activations stay of
order one; oracle wiring zeroes ``o_proj`` and every MLP ``down_proj``, and every routed
expert whole (its output would be discarded by the zero ``down_proj`` anyway): exact zeros,
which the checkpoint stores as holes, so a Kimi-sized oracle pair writes its experts in no
time and the Marlin MoE kernels still do the full work (their speed does not depend on the
values; the router, which picks the experts, stays random).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from sglang_fastpath.models import int4
from sglang_fastpath.models.shapes import DeepseekShape, ExpertDtype
from sglang_fastpath.models.tensors import DTYPE_NAME, TensorFactory, TensorSpec
from sglang_fastpath.models.tokenizer import BOS_ID, EOS_ID
from sglang_fastpath.models.walk import Walk


def config(shape: DeepseekShape, experts: ExpertDtype) -> dict:
    out = {
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
        "vocab_size": shape.vocab, "hidden_size": shape.hidden, "intermediate_size": shape.intermediate,
        "moe_intermediate_size": shape.moe_intermediate, "num_hidden_layers": shape.layers,
        "num_attention_heads": shape.heads, "num_key_value_heads": shape.heads,
        "n_routed_experts": shape.routed_experts, "n_shared_experts": shape.shared_experts,
        "num_experts_per_tok": shape.experts_per_token, "routed_scaling_factor": shape.routed_scaling_factor,
        "n_group": 1, "topk_group": 1, "topk_method": "noaux_tc", "scoring_func": "sigmoid",
        "norm_topk_prob": True, "first_k_dense_replace": shape.first_dense, "moe_layer_freq": 1,
        "q_lora_rank": shape.q_lora_rank, "kv_lora_rank": shape.kv_lora_rank,
        "qk_nope_head_dim": shape.qk_nope_dim, "qk_rope_head_dim": shape.qk_rope_dim,
        "v_head_dim": shape.v_head_dim, "hidden_act": "silu", "rms_norm_eps": shape.rms_eps,
        "max_position_embeddings": shape.max_position, "rope_theta": shape.rope_theta,
        "rope_scaling": {"type": "yarn", "factor": 64.0, "original_max_position_embeddings": 4096,
                         "beta_fast": 1.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0},
        "num_nextn_predict_layers": 0, "tie_word_embeddings": False, "attention_bias": False,
        "bos_token_id": BOS_ID, "eos_token_id": EOS_ID, "torch_dtype": DTYPE_NAME,
    }
    if experts is ExpertDtype.INT4:
        out["quantization_config"] = int4.QUANTIZATION_CONFIG
    return out


def _linear(factory: TensorFactory, name: str, out: int, inp: int, zero: bool = False) -> TensorSpec:
    return factory.zeros(name, (out, inp)) if zero else factory.normal(name, (out, inp), inp ** -0.5)


def _attention(shape: DeepseekShape, factory: TensorFactory, p: str, oracle: bool) -> Iterator[TensorSpec]:
    d, h = shape.hidden, shape.heads
    yield _linear(factory, f"{p}.q_a_proj.weight", shape.q_lora_rank, d)
    yield factory.fill(f"{p}.q_a_layernorm.weight", (shape.q_lora_rank,), 1.0)
    yield _linear(factory, f"{p}.q_b_proj.weight", h * (shape.qk_nope_dim + shape.qk_rope_dim), shape.q_lora_rank)
    yield _linear(factory, f"{p}.kv_a_proj_with_mqa.weight", shape.kv_lora_rank + shape.qk_rope_dim, d)
    yield factory.fill(f"{p}.kv_a_layernorm.weight", (shape.kv_lora_rank,), 1.0)
    yield _linear(factory, f"{p}.kv_b_proj.weight", h * (shape.qk_nope_dim + shape.v_head_dim), shape.kv_lora_rank)
    yield _linear(factory, f"{p}.o_proj.weight", d, h * shape.v_head_dim, zero=oracle)


def _mlp(factory: TensorFactory, p: str, hidden: int, inter: int, oracle: bool) -> Iterator[TensorSpec]:
    yield _linear(factory, f"{p}.gate_proj.weight", inter, hidden)
    yield _linear(factory, f"{p}.up_proj.weight", inter, hidden)
    yield _linear(factory, f"{p}.down_proj.weight", hidden, inter, zero=oracle)


def _moe(shape: DeepseekShape, factory: TensorFactory, p: str, experts: ExpertDtype,
         oracle: bool) -> Iterator[TensorSpec]:
    d, mi = shape.hidden, shape.moe_intermediate
    yield _linear(factory, f"{p}.gate.weight", shape.routed_experts, d)
    yield factory.normal(f"{p}.gate.e_score_correction_bias", (shape.routed_experts,), 0.01, torch.float32)
    yield from _mlp(factory, f"{p}.shared_experts", d, mi * shape.shared_experts, oracle)
    for e in range(shape.routed_experts):
        q = f"{p}.experts.{e}"
        if experts is ExpertDtype.BF16:
            yield _linear(factory, f"{q}.gate_proj.weight", mi, d, zero=oracle)
            yield _linear(factory, f"{q}.up_proj.weight", mi, d, zero=oracle)
            yield _linear(factory, f"{q}.down_proj.weight", d, mi, zero=oracle)
            continue
        yield from int4.int4_linear(factory, f"{q}.gate_proj", mi, d, zero=oracle)
        yield from int4.int4_linear(factory, f"{q}.up_proj", mi, d, zero=oracle)
        yield from int4.int4_linear(factory, f"{q}.down_proj", d, mi, zero=oracle)


def weights(shape: DeepseekShape, factory: TensorFactory, walk: Walk | None,
            experts: ExpertDtype) -> Iterator[TensorSpec]:
    """Every tensor of the target, in file order; ``walk`` given = oracle wiring."""
    d, v = shape.hidden, shape.vocab
    oracle = walk is not None
    if walk is None:
        yield factory.normal("model.embed_tokens.weight", (v, d), 1.0)
    else:
        yield factory.build("model.embed_tokens.weight", (v, d), walk.embedding)
    for i in range(shape.layers):
        p = f"model.layers.{i}"
        yield factory.fill(f"{p}.input_layernorm.weight", (d,), 1.0)
        yield from _attention(shape, factory, f"{p}.self_attn", oracle)
        yield factory.fill(f"{p}.post_attention_layernorm.weight", (d,), 1.0)
        if shape.is_moe(i):
            yield from _moe(shape, factory, f"{p}.mlp", experts, oracle)
        else:
            yield from _mlp(factory, f"{p}.mlp", d, shape.intermediate, oracle)
    yield factory.fill("model.norm.weight", (d,), 1.0)
    if walk is None:
        yield factory.normal("lm_head.weight", (v, d), d ** -0.5)
    else:
        yield factory.build("lm_head.weight", (v, d), walk.target_head)
