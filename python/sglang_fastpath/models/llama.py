"""The Llama target (``LlamaForCausalLM``): its config.json and its weights, oracle-wired or random.

Weight names are Hugging Face's (``model.layers.N.self_attn.q_proj.weight`` ...), which
SGLang's ``llama.py`` loader stacks into ``qkv_proj`` / ``gate_up_proj``. Oracle wiring
keeps every projection random except ``o_proj`` and ``down_proj`` (exact zeros) and
the embedding / lm_head (the walk's codes); see ``walk.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

from sglang_fastpath.models.shapes import LlamaShape
from sglang_fastpath.models.tensors import DTYPE_NAME, TensorFactory, TensorSpec
from sglang_fastpath.models.tokenizer import BOS_ID, EOS_ID
from sglang_fastpath.models.walk import Walk


def config(shape: LlamaShape) -> dict:
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": shape.hidden, "intermediate_size": shape.intermediate,
        "num_hidden_layers": shape.layers, "num_attention_heads": shape.heads,
        "num_key_value_heads": shape.kv_heads, "head_dim": shape.head_dim,
        "hidden_act": "silu", "rms_norm_eps": shape.rms_eps, "rope_theta": shape.rope_theta,
        "max_position_embeddings": shape.max_position, "vocab_size": shape.vocab,
        "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
        "bos_token_id": BOS_ID, "eos_token_id": EOS_ID, "torch_dtype": DTYPE_NAME,
    }


def weights(shape: LlamaShape, factory: TensorFactory, walk: Walk | None) -> Iterator[TensorSpec]:
    """Every tensor of the target, in file order; ``walk`` given = oracle wiring."""
    d, v = shape.hidden, shape.vocab
    q_dim, kv_dim = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    if walk is None:
        yield factory.normal("model.embed_tokens.weight", (v, d), 1.0)
    else:
        yield factory.build("model.embed_tokens.weight", (v, d), walk.embedding)

    def linear(name: str, out: int, inp: int, zero: bool = False) -> TensorSpec:
        return factory.zeros(name, (out, inp)) if zero else factory.normal(name, (out, inp), inp ** -0.5)

    oracle = walk is not None
    for i in range(shape.layers):
        p = f"model.layers.{i}"
        yield factory.fill(f"{p}.input_layernorm.weight", (d,), 1.0)
        yield linear(f"{p}.self_attn.q_proj.weight", q_dim, d)
        yield linear(f"{p}.self_attn.k_proj.weight", kv_dim, d)
        yield linear(f"{p}.self_attn.v_proj.weight", kv_dim, d)
        yield linear(f"{p}.self_attn.o_proj.weight", d, q_dim, zero=oracle)
        yield factory.fill(f"{p}.post_attention_layernorm.weight", (d,), 1.0)
        yield linear(f"{p}.mlp.gate_proj.weight", shape.intermediate, d)
        yield linear(f"{p}.mlp.up_proj.weight", shape.intermediate, d)
        yield linear(f"{p}.mlp.down_proj.weight", d, shape.intermediate, zero=oracle)
    yield factory.fill("model.norm.weight", (d,), 1.0)
    if walk is None:
        yield factory.normal("lm_head.weight", (v, d), d ** -0.5)
    else:
        yield factory.build("lm_head.weight", (v, d), walk.target_head)
