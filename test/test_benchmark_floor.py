"""The bandwidth floor against hand-computed bytes for a dense, an MoE/MLA and an INT4 model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark.core.errors import BenchError
from benchmark.core.floor import ModelShape, floor_ms, gpu_bandwidth, step_bytes

LLAMA = {"hidden_size": 512, "num_hidden_layers": 4, "vocab_size": 32000, "num_attention_heads": 8,
         "num_key_value_heads": 4, "head_dim": 64, "intermediate_size": 1536, "torch_dtype": "bfloat16"}
# per layer: q 512*512 + k,v 2*512*256 + o 512*512 = 786432; mlp 3*512*1536 = 2359296
LAYER_PARAMS = 786432 + 2359296
LM_HEAD = 32000 * 512
KV_PER_TOKEN = 4 * 2 * 4 * 64 * 2  # layers * (k, v) * kv heads * head dim * bf16 = 4096 B


def test_dense_decode_bytes_and_floor_by_hand():
    shape = ModelShape.from_config(LLAMA)
    got = step_bytes(shape, mode="decode", bs=1, k=1, ctx=1024, tp=1)
    weights = (4 * LAYER_PARAMS + LM_HEAD + 1 * 512) * 2  # + one embedding row
    assert got.weights == weights == 57934848
    assert got.kv_read == 1 * (1024 + 1) * KV_PER_TOKEN
    assert got.kv_write == KV_PER_TOKEN
    assert got.total == 62137344
    assert floor_ms(shape, mode="decode", bs=1, k=1, ctx=1024, tp=1, bandwidth=4.8e12) == pytest.approx(
        62137344 / 4.8e12 * 1e3)


def test_dense_verify_reads_prefix_and_drafts_of_every_request():
    shape = ModelShape.from_config(LLAMA)
    got = step_bytes(shape, mode="verify", bs=2, k=4, ctx=1024, tp=1)
    assert got.weights == (4 * LAYER_PARAMS + LM_HEAD + 8 * 512) * 2
    assert got.kv_read == 2 * (1024 + 4) * KV_PER_TOKEN
    assert got.kv_write == 8 * KV_PER_TOKEN
    assert got.total == 66396160


def test_tp_splits_weights_and_kv_heads_but_replicates_too_few_heads():
    shape = ModelShape.from_config(LLAMA)
    tp2 = step_bytes(shape, mode="decode", bs=1, k=1, ctx=1024, tp=2)
    assert tp2.weights == 57934848 / 2
    assert tp2.kv_read == 1025 * KV_PER_TOKEN / 2
    tp8 = step_bytes(shape, mode="decode", bs=1, k=1, ctx=1024, tp=8)
    assert tp8.kv_read == 1025 * 4 * 2 * 1 * 64 * 2  # one KV head per rank, not half a head


def test_expected_distinct_experts():
    shape = ModelShape.from_config({**LLAMA, "num_local_experts": 8, "num_experts_per_tok": 2})
    assert shape.distinct_experts(1) == pytest.approx(2.0)
    assert shape.distinct_experts(4) == pytest.approx(8 * (1 - 0.75 ** 4)) == pytest.approx(5.46875)
    assert shape.distinct_experts(1000) == pytest.approx(8.0)


DEEPSEEK = {"hidden_size": 64, "num_hidden_layers": 3, "vocab_size": 100, "num_attention_heads": 4,
            "intermediate_size": 128, "moe_intermediate_size": 32, "n_routed_experts": 8, "num_experts_per_tok": 2,
            "n_shared_experts": 1, "first_k_dense_replace": 1, "q_lora_rank": None, "kv_lora_rank": 16,
            "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8, "torch_dtype": "bfloat16"}


def test_mla_moe_weights_by_hand():
    shape = ModelShape.from_config(DEEPSEEK)
    # attention: q 64*4*12 + kv_a 64*(16+4) + kv_b 16*4*(8+8) + o 4*8*64
    attn = 3072 + 1280 + 1024 + 2048
    assert shape.attention_params() == attn
    dense_mlp = 3 * 64 * 128
    router, shared, expert = 64 * 8, 3 * 64 * 32, 3 * 64 * 32
    t = 1  # one token touches exactly top_k = 2 experts
    expected = (100 * 64 + t * 64 + 3 * attn + 1 * dense_mlp + 2 * (router + shared + 2 * expert)) * 2
    assert shape.weight_bytes(t) == pytest.approx(expected)
    # MLA latent KV: (kv_lora + rope) per layer, the same on every TP rank
    assert shape.kv_bytes_per_token(tp=1) == shape.kv_bytes_per_token(tp=2) == 3 * (16 + 4) * 2


def test_int4_experts_and_nested_text_config(tmp_path: Path):
    quant = {"quant_method": "compressed-tensors",
             "config_groups": {"group_0": {"weights": {"num_bits": 4, "group_size": 32}}}}
    (tmp_path / "config.json").write_text(json.dumps({"text_config": DEEPSEEK, "quantization_config": quant}))
    shape = ModelShape.from_dir(tmp_path)
    assert shape.expert_bytes == pytest.approx(0.5 + 2 / 32)
    assert shape.dtype_bytes == 2.0  # attention and dense weights stay bf16
    assert shape.moe is not None and shape.moe.moe_layers == 2


def test_gpu_bandwidth_table():
    assert gpu_bandwidth("NVIDIA H200") == 4.8e12
    assert gpu_bandwidth("NVIDIA RTX PRO 6000 Blackwell Server Edition") == 1.792e12
    assert gpu_bandwidth("NVIDIA A10") is None


def test_bad_inputs_name_the_problem(tmp_path: Path):
    with pytest.raises(BenchError, match="hidden_size"):
        ModelShape.from_config({"num_hidden_layers": 2})
    with pytest.raises(BenchError, match="config.json"):
        ModelShape.from_dir(tmp_path)
    with pytest.raises(BenchError, match="k=0"):
        step_bytes(ModelShape.from_config(LLAMA), mode="verify", bs=1, k=0, ctx=8, tp=1)
