"""``sglang-fastpath models kimi --scale-down``: a DeepSeek-V3-shaped target (MLA, MoE, INT4 or bf16
routed experts) + EAGLE-3 draft, checked on CPU against what SGLang 0.5.17 loads.

Name lists below are derived from reading SGLang: models/deepseek_v2.py (modules and
parameters), models/deepseek_common/deepseek_weight_loader.py (checkpoint name ->
parameter), layers/moe/fused_moe_triton/layer.py (make_expert_params_mapping) and
layers/quantization/compressed_tensors/ (pack-quantized WNA16 MoE parameters, ignore
matching, scheme predicates).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from eagle3_reference import Eagle3Draft
from sglang_fastpath.models import int4, kimi
from sglang_fastpath.models.pair import measure_pair
from sglang_fastpath.models.shapes import DeepseekShape, ExpertDtype
from sglang_fastpath.models.tensors import TensorFactory

transformers = pytest.importorskip("transformers")

SHAPE = DeepseekShape.scaled_down()
# Read by deepseek_v2.py / deepseek_weight_loader.py / configs/model_config.py without a default,
# plus transformers' DeepseekV3Config identity (model_type, num_key_value_heads) and dtype/ids.
CONFIG_KEYS = {
    "architectures", "model_type", "vocab_size", "hidden_size", "intermediate_size", "moe_intermediate_size",
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "n_routed_experts", "n_shared_experts",
    "num_experts_per_tok", "routed_scaling_factor", "n_group", "topk_group", "topk_method", "scoring_func",
    "norm_topk_prob", "first_k_dense_replace", "moe_layer_freq", "q_lora_rank", "kv_lora_rank",
    "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "hidden_act", "rms_norm_eps",
    "max_position_embeddings", "rope_theta", "rope_scaling", "num_nextn_predict_layers", "tie_word_embeddings",
    "attention_bias", "bos_token_id", "eos_token_id", "torch_dtype",
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("kimi")
    for experts in ExpertDtype:
        kimi.make(root / experts.value, layers=SHAPE.layers, experts=experts, device="cpu", scaled_down=True)
    return {e.value: root / e.value for e in ExpertDtype}


def _config(folder: Path) -> dict:
    return json.loads((folder / "target" / "config.json").read_text())


def _tensors(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(folder / "target" / "model.safetensors")


def test_config_keys_and_quantization_config(built: dict[str, Path]) -> None:
    bf16, q4 = _config(built["bf16"]), _config(built["int4"])
    assert set(bf16) == CONFIG_KEYS and set(q4) == CONFIG_KEYS | {"quantization_config"}
    assert bf16["architectures"] == ["DeepseekV3ForCausalLM"] and bf16["model_type"] == "deepseek_v3"
    cfg = transformers.AutoConfig.from_pretrained(built["int4"] / "target")
    assert type(cfg).__name__ == "DeepseekV3Config" and cfg.dtype == torch.bfloat16
    assert cfg.rope_parameters["rope_type"] == "yarn"
    draft = json.loads((built["int4"] / "draft" / "config.json").read_text())
    # configs/model_config.py _derive_context_length: a draft shorter than the target's context is refused.
    assert draft["max_position_embeddings"] >= q4["max_position_embeddings"]
    assert kimi.plan(DeepseekShape()).draft.max_position >= DeepseekShape().max_position
    qc = q4["quantization_config"]
    w = qc["config_groups"]["group_0"]["weights"]
    # compressed_tensors.py: _is_wNa16_group_channel / _is_wint4abf16 -> CompressedTensorsWNA16MoE (Marlin) or
    # its Triton variant; arg_groups/overrides.py's Kimi K2/K2.5 int4 predicate (num_bits 4, group 32, group, int).
    assert (qc["quant_method"], qc["format"]) == ("compressed-tensors", "pack-quantized")
    assert qc["config_groups"]["group_0"]["targets"] == ["Linear"]
    assert qc["config_groups"]["group_0"]["input_activations"] is None
    assert (w["num_bits"], w["group_size"], w["strategy"], w["type"], w["symmetric"], w["dynamic"]) == \
        (4, 32, "group", "int", True, False)


def _ignored(layer: str, ignore: list[str]) -> bool:
    """compressed_tensors/utils.py check_equal_or_regex_match: 're:' = re.match, else equal or dotted suffix."""
    return any(re.match(t[3:], layer) if t.startswith("re:") else (layer == t or layer.endswith("." + t))
               for t in ignore)


def test_only_routed_experts_are_quantized() -> None:
    ignore = int4.QUANTIZATION_CONFIG["ignore"]
    fused = {"fused_qkv_a_proj_with_mqa": ["q_a_proj", "kv_a_proj_with_mqa"]}  # DeepseekV2ForCausalLM mapping
    bf16_linears = [f"model.layers.{i}.self_attn.{p}" for i in (0, 1)
                    for p in ("q_b_proj", "kv_b_proj", "o_proj")]
    bf16_linears += [f"{p}.{m}" for p in ("model.layers.0.mlp", "model.layers.1.mlp.shared_experts")
                     for m in ("gate_up_proj", "down_proj", "gate_proj", "up_proj")]  # fused name or its shards
    for name in bf16_linears:
        assert _ignored(name, ignore), name
    for shard in fused["fused_qkv_a_proj_with_mqa"]:
        assert _ignored(f"model.layers.1.self_attn.{shard}", ignore)
    # get_moe_scheme probes "<FusedMoE prefix>.0.{gate,up,down}_proj": these must stay quantized.
    for proj in ("gate_proj", "up_proj", "down_proj"):
        assert not _ignored(f"model.layers.1.mlp.experts.0.{proj}", ignore)


def _sglang_param(name: str) -> str:
    """deepseek_weight_loader.do_load_weights (no shared-expert fusion: n_routed 384 without quark)."""
    expert = re.search(r"experts\.\d+\.(gate_proj|up_proj|down_proj)\.", name)
    if expert:  # FusedMoE.make_expert_params_mapping
        return name.replace(expert.group(0), "experts.w2_" if expert.group(1) == "down_proj" else "experts.w13_")
    for shard in ("gate_proj", "up_proj"):
        if shard in name:
            return name.replace(shard, "gate_up_proj")
    for shard in ("q_a_proj", "kv_a_proj_with_mqa"):
        if shard in name:
            return name.replace(shard, "fused_qkv_a_proj_with_mqa")
    return name


def _expected_params(experts: ExpertDtype) -> set[str]:
    out = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}
    expert_params = (["w13_weight", "w2_weight"] if experts is ExpertDtype.BF16 else
                     [f"{w}_{s}" for w in ("w13", "w2") for s in int4.SUFFIXES])
    for i in range(SHAPE.layers):
        p = f"model.layers.{i}"
        out |= {f"{p}.input_layernorm.weight", f"{p}.post_attention_layernorm.weight"}
        out |= {f"{p}.self_attn.{m}.weight" for m in ("fused_qkv_a_proj_with_mqa", "q_a_layernorm", "q_b_proj",
                                                       "kv_a_layernorm", "kv_b_proj", "o_proj")}
        if i < SHAPE.first_dense:
            out |= {f"{p}.mlp.gate_up_proj.weight", f"{p}.mlp.down_proj.weight"}
        else:
            out |= {f"{p}.mlp.gate.weight", f"{p}.mlp.gate.e_score_correction_bias",
                    f"{p}.mlp.shared_experts.gate_up_proj.weight", f"{p}.mlp.shared_experts.down_proj.weight"}
            out |= {f"{p}.mlp.experts.{w}" for w in expert_params}
    return out


@pytest.mark.parametrize("experts", list(ExpertDtype))
def test_weight_names_map_onto_sglang_parameters(built: dict[str, Path], experts: ExpertDtype) -> None:
    tensors = _tensors(built[experts.value])
    assert {_sglang_param(n) for n in tensors} == _expected_params(experts)
    per_layer = 3 * (1 if experts is ExpertDtype.BF16 else len(int4.SUFFIXES))
    for i in range(SHAPE.first_dense, SHAPE.layers):
        names = [n for n in tensors if n.startswith(f"model.layers.{i}.mlp.experts.")]
        assert len(names) == SHAPE.routed_experts * per_layer
    h, e = SHAPE.hidden, SHAPE.routed_experts
    assert tensors["model.layers.1.mlp.gate.weight"].shape == (e, h)
    assert tensors["model.layers.1.mlp.gate.e_score_correction_bias"].dtype == torch.float32
    assert tensors["model.layers.0.self_attn.kv_a_proj_with_mqa.weight"].shape == \
        (SHAPE.kv_lora_rank + SHAPE.qk_rope_dim, h)
    assert tensors["model.layers.0.self_attn.kv_b_proj.weight"].shape == \
        (SHAPE.heads * (SHAPE.qk_nope_dim + SHAPE.v_head_dim), SHAPE.kv_lora_rank)


def test_int4_experts_have_the_shapes_the_wna16_moe_scheme_allocates(built: dict[str, Path]) -> None:
    """CompressedTensorsWNA16MoE.create_weights: w13_weight_packed [E, H/8, 2*I], w13_weight_scale [E, H/32, 2*I],
    w2_weight_packed [E, I/8, H], w2_weight_scale [E, I/32, H], *_weight_shape [E, 2]; the loader transposes each
    checkpoint tensor ([out, in/8], [out, in/32]) into its expert slot."""
    tensors = _tensors(built["int4"])
    h, mi = SHAPE.hidden, SHAPE.moe_intermediate
    for e in (0, SHAPE.routed_experts - 1):
        p = f"model.layers.2.mlp.experts.{e}"
        for proj, (out, inp) in (("gate_proj", (mi, h)), ("up_proj", (mi, h)), ("down_proj", (h, mi))):
            packed, scale, shape = (tensors[f"{p}.{proj}.{s}"] for s in int4.SUFFIXES)
            assert packed.dtype == torch.int32 and packed.T.shape == (inp // 8, out)
            assert scale.dtype == torch.bfloat16 and scale.T.shape == (inp // 32, out)
            assert shape.dtype == torch.int64 and shape.tolist() == [out, inp]
    for proj in ("gate_proj", "up_proj", "down_proj"):  # oracle: every routed expert is exact zeros
        p = f"model.layers.1.mlp.experts.3.{proj}"
        w = int4.dequantize(int4.unpack(tensors[f"{p}.weight_packed"]), tensors[f"{p}.weight_scale"])
        assert not w.any(), proj
    packed, scale, _ = int4.int4_linear(TensorFactory(0), "x.gate_proj", mi, h)  # what a random wiring draws
    w = int4.dequantize(int4.unpack(packed.make()), scale.make())
    assert 0.7 < float(w.std() * h ** 0.5) < 1.3  # random INT4 codes scaled to std ~ 1/sqrt(fan_in)


def test_int4_and_bf16_differ_only_in_routed_experts(built: dict[str, Path]) -> None:
    a, b = _tensors(built["bf16"]), _tensors(built["int4"])
    shared = {n for n in a if ".experts." not in n}
    assert shared == {n for n in b if ".experts." not in n}
    assert all(torch.equal(a[n], b[n]) for n in shared)


def test_target_follows_the_walk_and_the_draft_predicts_it(built: dict[str, Path]) -> None:
    folder = built["bf16"]
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        folder / "target", dtype=torch.bfloat16, output_loading_info=True)
    assert not any(info.values()), info
    next_token = load_file(folder / "oracle.safetensors")["next_token"]
    seq = [7]
    for _ in range(19):
        seq.append(int(next_token[seq[-1]]))
    tokens = torch.tensor(seq)
    with torch.no_grad():
        out = model.eval()(tokens[None], output_hidden_states=True)
    top = out.logits[0].float().topk(2, dim=-1)
    assert torch.equal(top.indices[:, 0], next_token[tokens])
    assert (top.values[:, 0] - top.values[:, 1]).min() >= 31.0
    draft = Eagle3Draft(folder / "draft")
    ids = draft.cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    # DeepseekV2ForCausalLM.set_eagle3_layers_to_capture adds 1 only when the first id is 1;
    # it captures the input of each listed layer (hidden_states[k] in HF), each layer once.
    captured = [i + 1 for i in ids] if ids[0] == 1 else list(ids)
    assert len(set(captured)) == 3 and max(captured) < SHAPE.layers
    features = torch.cat([out.hidden_states[i][0] for i in captured], dim=-1)
    embed = model.get_input_embeddings().weight
    t = len(seq) - 1
    inputs = expected = tokens[1:]
    for _ in range(3):
        step = draft.step(embed[inputs], features[:t], torch.arange(t))
        expected = next_token[expected]
        assert torch.equal(step.tokens, expected)
        features, inputs = step.state, step.tokens


def test_full_size_dry_run_sizes() -> None:
    """Kimi dims, 4 layers: byte counts from the formula of each tensor, without drawing anything."""
    s = DeepseekShape()
    h, v, mi, e = s.hidden, s.vocab, s.moe_intermediate, s.routed_experts
    attn = (s.q_lora_rank * h + s.q_lora_rank + s.heads * (s.qk_nope_dim + s.qk_rope_dim) * s.q_lora_rank
            + (s.kv_lora_rank + s.qk_rope_dim) * h + s.kv_lora_rank
            + s.heads * (s.qk_nope_dim + s.v_head_dim) * s.kv_lora_rank + h * s.heads * s.v_head_dim + 2 * h) * 2
    moe_common = e * h * 2 + e * 4 + 3 * h * mi * 2
    int4_expert = 3 * (mi * h // 2 + mi * h // 32 * 2 + 16)
    bf16_expert = 3 * mi * h * 2
    base = 2 * v * h * 2 + h * 2 + s.layers * attn + 3 * h * s.intermediate * 2 + (s.layers - 1) * moe_common
    sizes_int4 = measure_pair(kimi.plan(s, ExpertDtype.INT4))
    sizes_bf16 = measure_pair(kimi.plan(s, ExpertDtype.BF16))
    assert sizes_int4["target"]["total_bytes"] == base + (s.layers - 1) * e * int4_expert
    assert sizes_bf16["target"]["total_bytes"] == base + (s.layers - 1) * e * bf16_expert
    assert sizes_int4["target"]["params"] == sizes_bf16["target"]["params"]  # INT4 counts 8 params per word
    assert sizes_int4["draft"]["params"] > 0.9e9  # hidden 7168, intermediate 18432, 32000-token head
