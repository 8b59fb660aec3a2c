"""How one GPU's memory divides between a target, its EAGLE-3 draft and their KV pools.

An estimate from the checkpoints on disk and their ``config.json``, for ``sglang-fastpath
doctor``. Per GPU, at TP = ``tp``:

* weights: the checkpoint's safetensors bytes divided by ``tp`` (target and draft);
* KV bytes per token: MLA caches ``kv_lora_rank + qk_rope_head_dim`` values per layer, the
  same on every rank; MHA/GQA caches K and V for ``max(1, kv_heads // tp)`` heads per layer;
  the draft's pool holds as many tokens as the target's, so a token costs both (the fork's
  patch 0009 budgets an MHA draft on an MLA target this way; stock 0.5.17 scales the target's
  bytes by the layer ratio instead and can run out of memory at start-up);
* SGLang keeps ``mem_fraction_static`` of the GPU's memory for weights and KV pools and
  leaves the rest for activations, CUDA graphs and communication buffers.

SGLang sizes the real pool from the free memory it measures after loading, and resizes it
after capturing graphs, so the token count here is an upper bound, not a prediction to the
token.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglang_fastpath.errors import FastpathError
from sglang_fastpath.models.folder import ModelsFolder, language_config, read_config

GIB = 1 << 30
KV_DTYPE_BYTES = {"auto": 2, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1}


def checkpoint_bytes(folder: Path) -> int:
    """Bytes of the weights in ``folder``: the index's ``total_size``, else the safetensors files' sizes."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        total = json.loads(index.read_text()).get("metadata", {}).get("total_size")
        if total:
            return int(total)
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FastpathError(f"no safetensors weights in {folder}")
    return sum(f.stat().st_size for f in files)


def kv_bytes_per_token(config: dict[str, Any], tp: int, kv_dtype_bytes: int = 2) -> int:
    """KV cache bytes one token costs on one rank, over all the model's attention layers."""
    config = language_config(config)  # multimodal checkpoints (Kimi-K2.5) nest the language model
    layers = int(config["num_hidden_layers"])
    if config.get("kv_lora_rank"):  # MLA: the compressed latent and the rope key, not split by TP
        return layers * (int(config["kv_lora_rank"]) + int(config.get("qk_rope_head_dim", 0))) * kv_dtype_bytes
    heads = int(config.get("num_key_value_heads") or config["num_attention_heads"])
    head_dim = int(config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"])
    return layers * max(1, heads // tp) * head_dim * 2 * kv_dtype_bytes


@dataclass(frozen=True)
class Side:
    """One model of the pair on one rank."""

    name: str
    weights: int  # bytes on this rank
    kv_per_token: int  # bytes on this rank

    @classmethod
    def read(cls, name: str, folder: Path, tp: int, kv_dtype_bytes: int) -> Side:
        config = read_config(folder)
        return cls(name, checkpoint_bytes(folder) // tp, kv_bytes_per_token(config, tp, kv_dtype_bytes))


@dataclass(frozen=True)
class MemorySplit:
    """One GPU at one ``mem_fraction_static``."""

    gpu_bytes: int
    fraction: float
    sides: tuple[Side, ...]

    @property
    def static_bytes(self) -> int:
        return int(self.gpu_bytes * self.fraction)

    @property
    def weights(self) -> int:
        return sum(s.weights for s in self.sides)

    @property
    def kv_per_token(self) -> int:
        return sum(s.kv_per_token for s in self.sides)

    @property
    def kv_bytes(self) -> int:
        return max(0, self.static_bytes - self.weights)

    @property
    def kv_tokens(self) -> int:
        return self.kv_bytes // self.kv_per_token if self.kv_per_token else 0

    def fraction_for_tokens(self, tokens: int) -> float:
        """The ``mem_fraction_static`` whose pool would hold ``tokens``."""
        return (self.weights + tokens * self.kv_per_token) / self.gpu_bytes

    def line(self) -> str:
        outside = self.gpu_bytes - self.static_bytes
        return (f"mem_fraction_static {self.fraction:.2f}: weights {self.weights / GIB:.1f} GiB, KV pools "
                f"{self.kv_bytes / GIB:.1f} GiB = {self.kv_tokens:,} tokens, left for activations and CUDA "
                f"graphs {outside / GIB:.1f} GiB")


def sides(target: Path, draft: Path | None, tp: int, kv_dtype: str = "auto") -> tuple[Side, ...]:
    if tp < 1:
        raise FastpathError(f"--tp must be >= 1, got {tp}")
    if kv_dtype not in KV_DTYPE_BYTES:
        raise FastpathError(f"unknown KV cache dtype {kv_dtype!r}; one of {', '.join(KV_DTYPE_BYTES)}")
    size = KV_DTYPE_BYTES[kv_dtype]
    found = [Side.read("target", target, tp, size)]
    if draft is not None:
        found.append(Side.read("draft", draft, tp, size))
    return tuple(found)


def pair_folders(model: Path, draft: Path | None) -> tuple[Path, Path | None]:
    """(target, draft): a pair folder made by ``sglang-fastpath models`` has both inside."""
    if draft is None and ModelsFolder.is_pair(model):
        pair = ModelsFolder(model)
        return pair.target, pair.draft if pair.has_draft else None
    return model, draft


MAX_FRACTION = 0.95  # above this nothing is left for activations and CUDA graphs


def report_lines(split_sides: tuple[Side, ...], gpu_bytes: int, fractions: list[float], tp: int,
                 requests: int | None = None, context_length: int | None = None) -> tuple[list[str], list[str]]:
    """(facts, warnings) for doctor; with ``requests`` and ``context_length``, whether they all fit."""
    tokens_needed = requests * context_length if requests and context_length else None
    facts = [f"memory per GPU at TP={tp} on {gpu_bytes / GIB:.0f} GiB (an estimate; SGLang measures free "
             "memory after loading and resizes the KV pool after capturing graphs):"]
    facts += [f"  {s.name}: weights {s.weights / GIB:.2f} GiB, KV {s.kv_per_token:,} B per token"
              for s in split_sides]
    warnings: list[str] = []
    for fraction in fractions:
        split = MemorySplit(gpu_bytes, fraction, split_sides)
        facts.append("  " + split.line())
        if split.weights >= split.static_bytes:
            warnings.append(
                f"at mem_fraction_static {fraction:.2f} the weights ({split.weights / GIB:.1f} GiB) do not fit in "
                f"{split.static_bytes / GIB:.1f} GiB: raise --mem-fraction-static above "
                f"{split.weights / gpu_bytes:.2f} or use more GPUs")
        elif tokens_needed and context_length and split.kv_tokens < tokens_needed:
            wanted = split.fraction_for_tokens(tokens_needed)
            fix = (f"--mem-fraction-static {wanted:.2f} would hold them if the rest still fits activations and "
                   "graphs" if wanted <= MAX_FRACTION else
                   f"no --mem-fraction-static can on this GPU: {split.kv_tokens // context_length} requests of "
                   f"{context_length:,} tokens fit; lower --max-running-requests or --context-length, or use "
                   "more GPUs")
            warnings.append(
                f"at mem_fraction_static {fraction:.2f} the KV pools hold {split.kv_tokens:,} tokens, fewer than "
                f"the {tokens_needed:,} that --max-running-requests x --context-length need (requests will "
                f"queue or retract): {fix}")
    return facts, warnings
