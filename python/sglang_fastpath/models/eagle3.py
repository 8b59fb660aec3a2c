"""The EAGLE-3 draft (``LlamaForCausalLMEagle3``): config.json and weights, oracle or random.

The layout is SpecForge's, which SGLang 0.5.17's ``llama_eagle3.py`` loads: ``fc``
(``[D, n_aux * D_target]``), one decoder layer named ``midlayer.*`` whose q/k/v read
``[embeds, hidden]`` (``2D`` inputs) and which has an extra ``hidden_norm``, a final
``norm``, an ``lm_head`` over the draft vocabulary, ``d2t`` (int64, target id minus
draft id) and ``t2d`` (bool over the target vocabulary). ``embed_tokens`` is not
stored: SGLang gives the draft the target's embedding.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from sglang_fastpath.models.shapes import DraftShape
from sglang_fastpath.models.tensors import DTYPE_NAME, TensorFactory, TensorSpec
from sglang_fastpath.models.tokenizer import BOS_ID, EOS_ID
from sglang_fastpath.models.walk import Walk


def config(shape: DraftShape, draft_vocab: int) -> dict:
    return {
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
        "hidden_size": shape.hidden, "intermediate_size": shape.intermediate, "num_hidden_layers": 1,
        "num_attention_heads": shape.heads, "num_key_value_heads": shape.kv_heads, "head_dim": shape.head_dim,
        "hidden_act": "silu", "rms_norm_eps": shape.rms_eps, "rope_theta": shape.rope_theta,
        "max_position_embeddings": shape.max_position, "vocab_size": shape.vocab,
        "draft_vocab_size": draft_vocab, "target_hidden_size": shape.target_hidden,
        "tie_word_embeddings": False, "bos_token_id": BOS_ID, "eos_token_id": EOS_ID, "torch_dtype": DTYPE_NAME,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(shape.aux_layer_ids),
                         "use_aux_hidden_state": True},
    }


def weights(shape: DraftShape, factory: TensorFactory, walk: Walk | None, hot: torch.Tensor) -> Iterator[TensorSpec]:
    """Every tensor of the draft; ``walk`` given = oracle wiring, else random with hot set ``hot`` (sorted)."""
    d, n_aux = shape.hidden, len(shape.aux_layer_ids)
    q_dim, kv_dim = shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    draft_vocab = len(hot)
    mlp = walk.draft_mlp(shape.intermediate, torch.device("cpu")) if walk is not None else None

    def linear(name: str, out: int, inp: int) -> TensorSpec:
        return factory.normal(name, (out, inp), inp ** -0.5)

    if walk is None:
        yield linear("fc.weight", d, n_aux * shape.target_hidden)
    else:
        yield factory.build("fc.weight", (d, n_aux * shape.target_hidden), lambda dev: walk.draft_fc(n_aux, dev))
    yield factory.fill("midlayer.hidden_norm.weight", (d,), 1.0)
    yield factory.fill("midlayer.input_layernorm.weight", (d,), 1.0)
    yield linear("midlayer.self_attn.q_proj.weight", q_dim, 2 * d)
    yield linear("midlayer.self_attn.k_proj.weight", kv_dim, 2 * d)
    yield linear("midlayer.self_attn.v_proj.weight", kv_dim, 2 * d)
    if walk is None:
        yield linear("midlayer.self_attn.o_proj.weight", d, q_dim)
    else:
        yield factory.fill("midlayer.self_attn.o_proj.weight", (d, q_dim), 0.0)
    yield factory.fill("midlayer.post_attention_layernorm.weight", (d,), 1.0)
    for part, (out, inp) in (("gate", (shape.intermediate, d)), ("up", (shape.intermediate, d)),
                             ("down", (d, shape.intermediate))):
        name = f"midlayer.mlp.{part}_proj.weight"
        if mlp is None:
            yield linear(name, out, inp)
        else:
            yield factory.build(name, (out, inp), lambda dev, t=mlp[part]: t.to(dev))
    yield factory.fill("norm.weight", (d,), 1.0)
    if walk is None:
        yield linear("lm_head.weight", draft_vocab, d)
    else:
        yield factory.build("lm_head.weight", (draft_vocab, d), walk.draft_head)
    yield TensorSpec("d2t", (draft_vocab,), torch.int64, lambda: hot - torch.arange(draft_vocab))
    t2d = torch.zeros(shape.vocab, dtype=torch.bool)
    t2d[hot] = True
    yield TensorSpec("t2d", (shape.vocab,), torch.bool, lambda: t2d)
