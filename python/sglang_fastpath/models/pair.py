"""Making a target/draft pair on disk: tokenizer, both checkpoints, the oracle map and models.json.

Layout of ``DIR``: ``target/`` and ``draft/`` (each a Hugging Face folder with
config.json, safetensors and the tokenizer files), ``oracle.safetensors`` (oracle
wiring only: ``next_token[V]``, the target's greedy successor of every token, and
``walk[Vd]``, the hot tokens in walk order) and ``models.json``, which records
what was made and the SGLang flags to serve it, paths relative to ``DIR``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Iterable

import torch

from sglang_fastpath.digest import sha256_of
from sglang_fastpath.models import eagle3
from sglang_fastpath.models.checkpoint import GIB, CheckpointInfo, measure, save_tensors, write_checkpoint, write_json
from sglang_fastpath.models.folder import MANIFEST
from sglang_fastpath.errors import FastpathError
from sglang_fastpath.models.shapes import DraftMisses, DraftShape, Wiring
from sglang_fastpath.models.tensors import DTYPE_NAME, StableRng, TensorFactory, TensorSpec, derive_seed
from sglang_fastpath.models.tokenizer import FILES as TOKENIZER_FILES
from sglang_fastpath.models.tokenizer import make_tokenizer
from sglang_fastpath.models.walk import LOGIT_MARGIN, Walk, code_sizes, make_walk

ORACLE_MAP = "oracle.safetensors"
SPECULATIVE = {"speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}


TargetWeights = Callable[[TensorFactory, "Walk | None"], Iterable[TensorSpec]]


@dataclass(frozen=True)
class PairPlan:
    """Everything about a pair except the seed and the device it is drawn on."""
    kind: str
    wiring: Wiring
    target_config: dict
    target_summary: dict
    target_weights: TargetWeights
    draft: DraftShape
    draft_vocab: int  # wanted; the oracle walk may use slightly fewer tokens
    tokenizer_vocab: int
    server_args: dict = field(default_factory=dict)  # extra SGLang flags this model wants
    misses: DraftMisses = DraftMisses()  # oracle wiring: where the draft is wrong on purpose

    def __post_init__(self) -> None:
        if not self.misses.exact and self.wiring is not Wiring.ORACLE:
            raise FastpathError("--draft-accept-length / --draft-miss-rate need --wiring oracle")

    @property
    def hidden(self) -> int:
        return self.draft.hidden


def _hot_tokens(plan: PairPlan, seed: int, eligible: list[int]) -> tuple[Walk | None, torch.Tensor]:
    if plan.wiring is Wiring.ORACLE:
        walk = make_walk(seed, plan.hidden, plan.draft.vocab, eligible, plan.draft_vocab, plan.draft.intermediate,
                         plan.misses)
        return walk, walk.hot
    chosen = StableRng(seed, "draft/hot").sample(eligible, min(plan.draft_vocab, len(eligible)))
    return None, torch.tensor(sorted(chosen), dtype=torch.int64)


def _side(folder: Path, info: CheckpointInfo, config: dict, summary: dict) -> dict:
    files = sorted(p.name for p in folder.iterdir() if p.is_file())
    # One thread per file: hashlib and file reads release the GIL, and a Kimi-sized target is ~12 shards of 4 GiB.
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(files)))) as pool:
        digests = dict(zip(files, pool.map(lambda f: sha256_of(folder / f), files), strict=True))
    return {
        "folder": folder.name, "architecture": config["architectures"][0], "shape": summary,
        "params": info.params, "tensor_bytes": info.total_bytes,
        "bytes": sum((folder / f).stat().st_size for f in files),
        "sha256": digests,
    }


def server_args(plan: PairPlan) -> dict:
    return {"model_path": "target", "speculative_algorithm": "EAGLE3", "speculative_draft_model_path": "draft",
            "dtype": DTYPE_NAME, **SPECULATIVE, **plan.server_args}


def make_pair(out: Path, plan: PairPlan, seed: int, device: str = "cpu", shard_bytes: int = 4 * GIB) -> dict:
    """Write the pair into ``out`` and return the manifest (also written as ``out/models.json``)."""
    target_dir, draft_dir = out / "target", out / "draft"
    max_length = plan.target_config["max_position_embeddings"]
    tok = make_tokenizer(plan.tokenizer_vocab, [target_dir, draft_dir], max_length)
    walk, hot = _hot_tokens(plan, seed, tok.text_ids)
    target_factory = TensorFactory(derive_seed(seed, "target"), device)
    target_info = write_checkpoint(target_dir, plan.target_weights(target_factory, walk), shard_bytes)
    write_json(target_dir / "config.json", plan.target_config)
    draft_factory = TensorFactory(derive_seed(seed, "draft"), device)
    draft_info = write_checkpoint(draft_dir, eagle3.weights(plan.draft, draft_factory, walk, hot), shard_bytes)
    draft_config = eagle3.config(plan.draft, len(hot))
    write_json(draft_dir / "config.json", draft_config)
    oracle = None
    if walk is not None:
        save_tensors({"next_token": walk.next_token, "walk": torch.tensor(walk.order, dtype=torch.int64),
                      "skips": torch.tensor(walk.skips, dtype=torch.int64)}, out / ORACLE_MAP)
        oracle = {"map": ORACLE_MAP, "hot_tokens": len(walk.order),
                  "cycle": [len(walk.coords_a), len(walk.coords_b)], "logit_margin": LOGIT_MARGIN,
                  "misses": {**plan.misses.summary(), "skip_positions": len(walk.skips)},
                  # topk 1, the draft tokens per verify above: the long-run mean of accepted drafts + bonus
                  "expected_accept_length": round(
                      walk.expected_accept_length(SPECULATIVE["speculative_num_draft_tokens"]), 4)}
    manifest = {
        "kind": plan.kind, "seed": seed, "wiring": plan.wiring.value, "device": device, "dtype": DTYPE_NAME,
        "target": _side(target_dir, target_info, plan.target_config, plan.target_summary),
        "draft": _side(draft_dir, draft_info, draft_config, plan.draft.summary(len(hot))),
        "tokenizer": {"vocab": tok.size, "files": list(TOKENIZER_FILES)},
        "speculative": dict(SPECULATIVE), "server_args": server_args(plan), "oracle": oracle,
    }
    write_json(out / MANIFEST, manifest)
    return manifest


def measure_pair(plan: PairPlan) -> dict:
    """Parameter and byte counts of both checkpoints, without training or drawing anything."""
    wanted = min(plan.draft_vocab, plan.tokenizer_vocab)
    if plan.wiring is Wiring.ORACLE:
        a, b = code_sizes(wanted, plan.hidden - 1, plan.draft.intermediate)
        wanted = a * b
    factory = TensorFactory(0, "meta")
    target = measure(plan.target_weights(factory, None))
    draft = measure(eagle3.weights(plan.draft, factory, None, torch.arange(wanted)))
    return {"target": vars(target), "draft": vars(draft)}
