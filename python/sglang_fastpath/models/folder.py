"""The one reader of a models folder and of a model's ``config.json`` (standard library only).

A models folder is what ``sglang-fastpath models KIND --out DIR`` writes: ``DIR/target/`` and
``DIR/draft/`` (Hugging Face checkpoints) and ``DIR/models.json`` (the manifest: the server
arguments the pair wants, its speculative settings). The benchmark (driver and worker), ``demo``,
``doctor`` and the GPU tests read them through this module; the benchmark's worker, which runs
with only the variant's site and the repository on its path, imports it as
``sglang_fastpath.models.folder`` from ``python/``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sglang_fastpath.errors import FastpathError
from sglang_fastpath.models.shapes import DraftMisses

MANIFEST = "models.json"
CONFIG = "config.json"


def read_config(model: Path | str) -> dict[str, Any]:
    """A model's ``config.json`` (``model`` is its folder or the file); one-line errors."""
    model = Path(model)
    path = model / CONFIG if model.is_dir() else model
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise FastpathError(f"no {CONFIG} at {path}") from None
    except json.JSONDecodeError as exc:
        raise FastpathError(f"{path} is not valid JSON: {exc}") from None


def language_config(config: dict[str, Any]) -> dict[str, Any]:
    """The language model's part of a config (multimodal checkpoints such as Kimi-K2.5 nest it)."""
    return config.get("text_config", config)


def routed_experts(config: dict[str, Any]) -> int | None:
    """The number of routed experts a config declares, or None for a dense model."""
    text = language_config(config)
    return text.get("n_routed_experts") or text.get("num_local_experts") or text.get("num_experts")


@dataclass(frozen=True)
class ModelsFolder:
    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def target(self) -> Path:
        return self.root / "target"

    @property
    def draft(self) -> Path:
        return self.root / "draft"

    @property
    def has_draft(self) -> bool:
        return (self.draft / CONFIG).is_file()

    @staticmethod
    def is_pair(path: Path | str) -> bool:
        """Whether ``path`` is a models folder (it has ``target/config.json``)."""
        return (Path(path) / "target" / CONFIG).is_file()

    def weights_gb(self) -> float:
        """The target's and draft's checkpoint files in GB (1e9 bytes): what each engine start reads."""
        files = [f for model in (self.target, self.draft) if model.is_dir()
                 for f in model.iterdir() if f.suffix in (".safetensors", ".bin")]
        return sum(f.stat().st_size for f in files) / 1e9

    def target_config(self) -> dict[str, Any]:
        return read_config(self.target)

    def manifest(self) -> dict[str, Any]:
        """``models.json``, or ``{}`` where the folder has none (a pair put together by hand)."""
        path = self.root / MANIFEST
        if not path.is_file():
            return {}
        try:
            return json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise FastpathError(f"{path} is not valid JSON: {exc}") from None

    def extra_server_args(self) -> dict[str, Any]:
        """The manifest's server arguments other than the model paths and the speculative ones."""
        args = self.manifest().get("server_args") or {}
        return {k: v for k, v in args.items()
                if k not in ("model_path", "tokenizer_path") and not k.startswith("speculative_")}

    def speculative(self) -> dict[str, Any]:
        """The manifest's speculative settings (steps, topk, draft tokens), or ``{}``."""
        return dict(self.manifest().get("speculative") or {})

    def draft_misses(self) -> bool:
        """Whether the pair's oracle draft is wrong on purpose (``models --draft-accept-length`` or
        ``--draft-miss-rate``), i.e. its own acceptance is the one to measure."""
        misses = (self.manifest().get("oracle") or {}).get("misses") or {}
        return not DraftMisses(misses.get("accept_length"), misses.get("miss_rate")).exact
