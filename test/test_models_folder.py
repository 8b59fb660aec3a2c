"""The one reader of a models folder and of a model's config.json (sglang_fastpath.models.folder)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmark.core.errors import BenchError
from benchmark.core.floor import ModelShape
from benchmark.driver.run import manifest
from sglang_fastpath.errors import FastpathError
from sglang_fastpath.models.folder import MANIFEST, ModelsFolder, language_config, read_config

LLAMA = {"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
         "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
         "torch_dtype": "bfloat16"}


def _pair(root: Path, with_manifest: bool = True) -> ModelsFolder:
    for side in ("target", "draft"):
        (root / side).mkdir(parents=True)
        (root / side / "config.json").write_text(json.dumps(LLAMA))
    if with_manifest:
        (root / MANIFEST).write_text(json.dumps({
            "server_args": {"model_path": "target", "speculative_algorithm": "EAGLE3", "dtype": "bfloat16"},
            "speculative": {"speculative_num_steps": 3, "speculative_num_draft_tokens": 4}}))
    return ModelsFolder(root)


def test_a_pair_folder_and_its_manifest(tmp_path: Path) -> None:
    pair = _pair(tmp_path / "m")
    assert ModelsFolder.is_pair(tmp_path / "m") and not ModelsFolder.is_pair(tmp_path)
    assert pair.target == tmp_path / "m" / "target" and pair.has_draft
    assert pair.extra_server_args() == {"dtype": "bfloat16"}  # model paths and speculative_* are the caller's
    assert pair.speculative() == {"speculative_num_steps": 3, "speculative_num_draft_tokens": 4}
    assert pair.target_config()["hidden_size"] == 64
    # the benchmark driver and the model shape read it through the same reader
    assert manifest(tmp_path / "m") == ({"dtype": "bfloat16"}, pair.speculative())
    assert ModelShape.from_dir(pair.target).vocab == 512


def test_a_pair_without_manifest_or_draft(tmp_path: Path) -> None:
    pair = _pair(tmp_path / "m", with_manifest=False)
    assert pair.manifest() == {} and pair.extra_server_args() == {} and pair.speculative() == {}
    (pair.draft / "config.json").unlink()
    assert not pair.has_draft


def test_config_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(FastpathError, match="no config.json at"):
        read_config(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(FastpathError, match="is not valid JSON"):
        read_config(tmp_path / "config.json")
    with pytest.raises(BenchError, match="--models must hold target/config.json"):
        ModelShape.from_dir(tmp_path / "missing")
    (tmp_path / MANIFEST).write_text("[")
    with pytest.raises(FastpathError, match="models.json is not valid JSON"):
        ModelsFolder(tmp_path).manifest()


def test_language_config_unnests_multimodal_checkpoints() -> None:
    assert language_config({"text_config": {"num_hidden_layers": 61}, "vision_config": {}}) == {"num_hidden_layers": 61}
    assert language_config(LLAMA) is LLAMA


def test_weights_gb_counts_both_checkpoints_and_nothing_else(tmp_path: Path) -> None:
    assert ModelsFolder(tmp_path).weights_gb() == 0.0  # nothing drawn yet (a dry run on CPU)
    for part, size in (("target", 3_000_000), ("draft", 1_000_000)):
        (tmp_path / part).mkdir()
        (tmp_path / part / "model-00001.safetensors").write_bytes(b"\0" * size)
        (tmp_path / part / "config.json").write_text("{}")
    assert ModelsFolder(tmp_path).weights_gb() == pytest.approx(0.004)
