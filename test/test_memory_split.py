"""doctor's memory split: weights and KV per GPU for a target and its EAGLE-3 draft (CPU, no SGLang)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fastpath_fixtures import REPO

from sglang_fastpath.host import memory_split
from sglang_fastpath.host.doctor import MemoryQuestion, diagnose
from sglang_fastpath.errors import FastpathError

GIB = memory_split.GIB
# Kimi-K2.5's language model (MLA) as its multimodal config nests it, and its Llama-style EAGLE-3 draft
KIMI = {"text_config": {"num_hidden_layers": 61, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                        "num_attention_heads": 64, "hidden_size": 7168, "n_routed_experts": 384,
                        "moe_intermediate_size": 2048}}
KIMI_DRAFT = {"num_hidden_layers": 1, "num_attention_heads": 64, "num_key_value_heads": 64, "head_dim": 128,
              "hidden_size": 7168}
LLAMA3_8B = {"num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096}


def _model(folder: Path, config: dict, weight_bytes: int, indexed: bool = False) -> Path:
    """A checkpoint folder whose weights take ``weight_bytes`` (a sparse file, or an index's total_size)."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    if indexed:
        (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": weight_bytes}}))
    else:
        with open(folder / "model.safetensors", "wb") as f:
            f.truncate(weight_bytes)
    return folder


def test_kv_bytes_per_token() -> None:
    # MLA: (512 + 64) values x 61 layers x 2 bytes, the same on every rank
    assert memory_split.kv_bytes_per_token(KIMI, tp=1) == memory_split.kv_bytes_per_token(KIMI, tp=8) == 70272
    assert memory_split.kv_bytes_per_token(KIMI, tp=8, kv_dtype_bytes=1) == 35136
    # GQA: K and V of 8 heads x 128 x 32 layers x 2 bytes, split by TP down to one head per rank
    assert memory_split.kv_bytes_per_token(LLAMA3_8B, tp=1) == 131072
    assert memory_split.kv_bytes_per_token(LLAMA3_8B, tp=2) == 65536
    assert memory_split.kv_bytes_per_token(LLAMA3_8B, tp=16) == 16384
    assert memory_split.kv_bytes_per_token(KIMI_DRAFT, tp=8) == 1 * 8 * 128 * 2 * 2


def test_checkpoint_bytes_from_files_or_index(tmp_path: Path) -> None:
    assert memory_split.checkpoint_bytes(_model(tmp_path / "a", LLAMA3_8B, 3 * GIB)) == 3 * GIB
    assert memory_split.checkpoint_bytes(_model(tmp_path / "b", LLAMA3_8B, 600 * GIB, indexed=True)) == 600 * GIB
    (tmp_path / "empty").mkdir()
    with pytest.raises(FastpathError, match="no safetensors"):
        memory_split.checkpoint_bytes(tmp_path / "empty")


def test_split_of_kimi_on_eight_rtx_pro_6000(tmp_path: Path) -> None:
    target = _model(tmp_path / "kimi", KIMI, 595 * GIB, indexed=True)
    draft = _model(tmp_path / "draft", KIMI_DRAFT, 3 * GIB)
    sides = memory_split.sides(target, draft, tp=8)
    assert [s.weights for s in sides] == [595 * GIB // 8, 3 * GIB // 8]
    split = memory_split.MemorySplit(96 * GIB, 0.9, sides)
    kv_bytes = int(96 * GIB * 0.9) - (595 * GIB // 8 + 3 * GIB // 8)
    assert split.kv_bytes == kv_bytes and split.kv_tokens == kv_bytes // (70272 + 4096)
    assert split.fraction_for_tokens(split.kv_tokens) == pytest.approx(0.9, abs=1e-4)
    assert memory_split.MemorySplit(96 * GIB, 0.7, sides).kv_tokens == 0  # the weights alone need 0.78


def test_doctor_reports_the_split_and_warns(tmp_path: Path) -> None:
    pair = tmp_path / "pair"
    _model(pair / "target", KIMI, 595 * GIB, indexed=True)
    _model(pair / "draft", KIMI_DRAFT, 3 * GIB)
    question = MemoryQuestion(gpu_memory_gib=96, fractions=(0.7, 0.9), context_length=32768)
    report = diagnose(pair, tp=8, device_name="NVIDIA RTX PRO 6000 Blackwell Server Edition",
                      max_running_requests=48, memory=question)
    text = report.render()
    assert "target: weights 74.38 GiB, KV 70,272 B per token" in text
    assert "draft: weights 0.38 GiB, KV 4,096 B per token" in text
    assert "mem_fraction_static 0.90: weights 74.8 GiB, KV pools 11.6 GiB = 168,205 tokens" in text
    assert any("at mem_fraction_static 0.70 the weights (74.8 GiB) do not fit" in w for w in report.warnings)
    # 48 requests x 32k tokens need 1.57M tokens; 0.90 holds 168k: no fraction can, 5 requests fit
    assert any(w.startswith("at mem_fraction_static 0.90 the KV pools hold 168,205 tokens, fewer than the 1,572,864")
               and "no --mem-fraction-static can on this GPU: 5 requests of 32,768 tokens fit" in w
               for w in report.warnings), report.warnings
    assert "MoE config: E=384" in text  # the target's experts still resolve


def test_doctor_cli_on_a_dense_pair(tmp_path: Path) -> None:
    pair = tmp_path / "pair"
    _model(pair / "target", LLAMA3_8B, 16 * GIB)
    _model(pair / "draft", {**LLAMA3_8B, "num_hidden_layers": 1}, GIB)
    done = subprocess.run([sys.executable, "-m", "sglang_fastpath", "doctor", "--model", str(pair), "--tp", "2",
                           "--gpu-memory-gib", "80", "--mem-fraction-static", "0.8"],
                          capture_output=True, text=True, cwd=REPO / "python")
    # (80 x 0.8 - 8 - 0.5) GiB / (65536 + 2048) B: GQA K+V of 4 heads x 128 x 32 layers, and of the draft's 1 layer
    assert "mem_fraction_static 0.80: weights 8.5 GiB, KV pools 55.5 GiB = 881,757 tokens" in done.stdout, done
    assert "MoE config: none needed (no routed experts)" in done.stdout
