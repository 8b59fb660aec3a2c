"""``sglang-fastpath models tiny|oracle``: Llama target + EAGLE-3 draft, checked on CPU.

The target is loaded with transformers (SGLang's pinned 5.12.1) and must follow the
oracle map with a clear logit margin; the draft is run by a plain-torch
re-implementation of SGLang's EAGLE-3 forward (eagle3_reference.py) on the target's
captured hidden states and must predict the same map for several steps.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from eagle3_reference import Eagle3Draft
from sglang_fastpath.cli import main
from sglang_fastpath.models import oracle, tiny
from sglang_fastpath.models.shapes import LlamaPairOptions, LlamaShape

transformers = pytest.importorskip("transformers")

# What SGLang 0.5.17 reads: models/llama.py (sizes, rope_theta, rms_norm_eps, head_dim, attention_bias,
# mlp_bias, tie_word_embeddings, max_position_embeddings), configs/model_config.py (architectures,
# dtype/torch_dtype, vocab_size), the tokenizer manager (bos/eos ids) and transformers' LlamaConfig
# (model_type, hidden_act).
TARGET_KEYS = {
    "architectures", "model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_act", "rms_norm_eps", "rope_theta",
    "max_position_embeddings", "vocab_size", "tie_word_embeddings", "attention_bias", "mlp_bias",
    "bos_token_id", "eos_token_id", "torch_dtype",
}
# llama_eagle3.py adds draft_vocab_size (lm_head rows), target_hidden_size (fc input) and
# eagle_config.eagle_aux_hidden_state_layer_ids (how many target states, and which: read by
# model_runner_components/spec_aux_hidden_state.py); the draft has no attention_bias/mlp_bias.
DRAFT_KEYS = (TARGET_KEYS - {"attention_bias", "mlp_bias"}) | {"draft_vocab_size", "target_hidden_size",
                                                                "eagle_config"}
SMALL = LlamaPairOptions(shape=LlamaShape(layers=4, hidden=128, intermediate=384, heads=4, kv_heads=2, vocab=3000),
                         draft_vocab=1000, tokenizer_vocab=3000)
STEPS = 4


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("llama_pairs")
    assert main(["models", "tiny", "--out", str(root / "tiny")]) == 0
    oracle.make(root / "oracle", SMALL, seed=7)
    return {"tiny": root / "tiny", "oracle": root / "oracle"}


def _manifest(folder: Path) -> dict:
    return json.loads((folder / "models.json").read_text())


def _walk(folder: Path) -> tuple[torch.Tensor, torch.Tensor]:
    m = load_file(folder / "oracle.safetensors")
    return m["next_token"], m["walk"]


@pytest.mark.parametrize("kind", ["tiny", "oracle"])
def test_configs_have_exactly_the_keys_sglang_reads(pairs: dict[str, Path], kind: str) -> None:
    target = json.loads((pairs[kind] / "target" / "config.json").read_text())
    draft = json.loads((pairs[kind] / "draft" / "config.json").read_text())
    assert set(target) == TARGET_KEYS
    assert set(draft) == DRAFT_KEYS
    assert target["architectures"] == ["LlamaForCausalLM"] and draft["architectures"] == ["LlamaForCausalLMEagle3"]
    cfg = transformers.AutoConfig.from_pretrained(pairs[kind] / "target")
    assert type(cfg).__name__ == "LlamaConfig" and cfg.dtype == torch.bfloat16
    dcfg = transformers.AutoConfig.from_pretrained(pairs[kind] / "draft")
    assert dcfg.draft_vocab_size == _manifest(pairs[kind])["draft"]["shape"]["draft_vocab"]
    assert dcfg.target_hidden_size == target["hidden_size"] and dcfg.num_hidden_layers == 1
    # SGLang runs the draft at the target's context length and refuses a shorter draft (_derive_context_length).
    assert draft["max_position_embeddings"] >= target["max_position_embeddings"]
    ids = dcfg.eagle_config["eagle_aux_hidden_state_layer_ids"]
    assert len(ids) == 3 and all(0 <= i < target["num_hidden_layers"] - 1 for i in ids)


def test_tokenizer_round_trips_text(pairs: dict[str, Path]) -> None:
    folder = pairs["tiny"]
    assert (folder / "target" / "tokenizer.json").read_bytes() == (folder / "draft" / "tokenizer.json").read_bytes()
    tok = transformers.AutoTokenizer.from_pretrained(folder / "target")
    assert (tok.bos_token_id, tok.eos_token_id, len(tok)) == (1, 2, 8192)
    for text in ["Hello world, the draft model runs fast!", "def f(x):\n    return x * 2  # ok", "Ünïcödé 🚀 42"]:
        ids = tok(text)["input_ids"]
        assert ids[0] == tok.bos_token_id and len(ids) < len(text.encode()) + 2
        assert tok.decode(ids, skip_special_tokens=True) == text
    prompt = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|assistant|>\n")


def test_walk_is_one_cycle_over_the_draft_vocabulary(pairs: dict[str, Path]) -> None:
    next_token, walk = _walk(pairs["tiny"])
    hot = load_file(pairs["tiny"] / "draft" / "model.safetensors")["d2t"] + torch.arange(len(walk))
    assert torch.equal(hot, walk.sort().values)
    seen, token = set(), int(walk[0])
    for _ in range(len(walk)):
        seen.add(token)
        token = int(next_token[token])
    assert token == int(walk[0]) and len(seen) == len(walk)
    assert set(next_token.tolist()) == set(walk.tolist())  # every token leads into the cycle
    assert not {0, 1, 2} & seen  # no special token, so greedy output never stops early


def _target(folder: Path):  # noqa: ANN202 - a transformers model
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        folder / "target", dtype=torch.bfloat16, output_loading_info=True)
    assert not any(info.values()), info  # every tensor used, none missing
    return model.eval()


def _greedy_sequence(next_token: torch.Tensor, start: int, length: int) -> torch.Tensor:
    out = [start]
    for _ in range(length - 1):
        out.append(int(next_token[out[-1]]))
    return torch.tensor(out)


@pytest.mark.parametrize("kind", ["tiny", "oracle"])
def test_target_greedy_token_is_the_walk_with_a_margin(pairs: dict[str, Path], kind: str) -> None:
    next_token, _ = _walk(pairs[kind])
    vocab = len(next_token)
    tokens = torch.randint(0, vocab, (2, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = _target(pairs[kind])(tokens).logits.float()
    top = logits.topk(2, dim=-1)
    assert torch.equal(top.indices[..., 0], next_token[tokens])
    assert (top.values[..., 0] - top.values[..., 1]).min() >= 31.0  # LOGIT_MARGIN 32, bf16 rounding


@pytest.mark.parametrize("kind", ["tiny", "oracle"])
def test_draft_predicts_the_walk_from_target_hidden_states(pairs: dict[str, Path], kind: str) -> None:
    """Decode as SGLang does after a verify: features of x_t and the embedding of x_{t+1} give x_{t+2}."""
    folder = pairs[kind]
    next_token, _ = _walk(folder)
    target, draft = _target(folder), Eagle3Draft(folder / "draft")
    ids = draft.cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    seq = _greedy_sequence(next_token, start=5, length=24)  # token 5 is outside the walk, like a prompt
    with torch.no_grad():
        states = target(seq[None], output_hidden_states=True).hidden_states
    embed = target.get_input_embeddings().weight
    features = torch.cat([states[i + 1][0] for i in ids], dim=-1)  # SGLang captures layer id + 1's input
    t = len(seq) - 1
    positions, inputs, expected = torch.arange(t), seq[1:], seq[1:]
    for step in range(STEPS):
        out = draft.step(embed[inputs], features[:t], positions)
        expected = next_token[expected]
        assert torch.equal(out.tokens, expected), f"step {step}"
        top = out.logits.topk(2, dim=-1).values
        assert (top[:, 0] - top[:, 1]).min() >= 30.0
        features, inputs = out.state, out.tokens


def _sglang_draft_param(name: str) -> str:
    """Where LlamaForCausalLMEagle3.load_weights puts a checkpoint tensor (None: consumed elsewhere)."""
    name = name.replace("midlayer", "layers.0")
    for old, new in ((".q_proj", ".qkv_proj"), (".k_proj", ".qkv_proj"), (".v_proj", ".qkv_proj"),
                     (".gate_proj", ".gate_up_proj"), (".up_proj", ".gate_up_proj")):
        name = name.replace(old, new)
    return name if name.startswith("lm_head") or name in ("d2t", "t2d") else f"model.{name}"


def test_draft_tensors_are_those_sglang_loads(pairs: dict[str, Path]) -> None:
    tensors = load_file(pairs["oracle"] / "draft" / "model.safetensors")
    d, dv, v = 128, len(tensors["d2t"]), 3000
    expected = {  # LlamaForCausalLMEagle3's parameters (embed_tokens comes from the target)
        "model.fc.weight": (d, 3 * d), "model.layers.0.hidden_norm.weight": (d,),
        "model.layers.0.input_layernorm.weight": (d,), "model.layers.0.post_attention_layernorm.weight": (d,),
        "model.layers.0.self_attn.qkv_proj.weight": None, "model.layers.0.self_attn.o_proj.weight": (d, d),
        "model.layers.0.mlp.gate_up_proj.weight": None, "model.layers.0.mlp.down_proj.weight": (d, 384),
        "model.norm.weight": (d,), "lm_head.weight": (dv, d), "d2t": (dv,), "t2d": (v,),
    }
    assert {_sglang_draft_param(n) for n in tensors} == set(expected)
    for name, tensor in tensors.items():
        want = expected[_sglang_draft_param(name)]
        assert want is None or tuple(tensor.shape) == want, name
    assert tensors["midlayer.self_attn.q_proj.weight"].shape == (128, 2 * d)  # reads [embeds, hidden]
    assert tensors["d2t"].dtype == torch.int64 and tensors["t2d"].dtype == torch.bool
    assert int(tensors["t2d"].sum()) == dv


def test_same_seed_same_bytes_other_seed_other_weights(pairs: dict[str, Path], tmp_path: Path) -> None:
    again = tiny.make(tmp_path / "again")
    first = _manifest(pairs["tiny"])
    assert again["target"]["sha256"] == first["target"]["sha256"]
    assert again["draft"]["sha256"] == first["draft"]["sha256"]
    assert (tmp_path / "again" / "models.json").read_bytes() == (pairs["tiny"] / "models.json").read_bytes()
    other = tiny.make(tmp_path / "other", seed=1)
    assert other["target"]["sha256"]["model.safetensors"] != first["target"]["sha256"]["model.safetensors"]


def test_random_wiring_loads_and_has_a_sorted_hot_set(tmp_path: Path) -> None:
    assert main(["models", "oracle", "--out", str(tmp_path), "--wiring", "random", "--layers", "4",
                 "--hidden", "64", "--intermediate", "128", "--heads", "2", "--kv-heads", "1",
                 "--vocab", "2000", "--tokenizer-vocab", "2000", "--draft-vocab", "500"]) == 0
    manifest = _manifest(tmp_path)
    assert manifest["oracle"] is None and not (tmp_path / "oracle.safetensors").exists()
    _target(tmp_path)
    hot = load_file(tmp_path / "draft" / "model.safetensors")["d2t"] + torch.arange(500)
    assert torch.equal(hot, hot.sort().values) and len(set(hot.tolist())) == 500 and int(hot.min()) >= 3


def test_user_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "oracle", "--out", str(tmp_path), "--layers", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--layers 1" in err
    if not torch.cuda.is_available():
        assert main(["models", "tiny", "--out", str(tmp_path), "--device", "cuda"]) == 2
        assert "--device cuda" in capsys.readouterr().err
    assert not (tmp_path / "target").exists()
