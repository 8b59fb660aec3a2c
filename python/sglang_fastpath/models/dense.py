"""``models dense``: Llama-3-8B's shape (32 layers, hidden 4096, intermediate 14336, GQA 32/8,
vocab 128256) with an oracle EAGLE-3 draft (draft vocabulary 32000); ``--layers`` to shrink it.

About 16 GB of bf16 at 32 layers: draw it on the GPU host (``--device cuda``); it is
written shard by shard, never held whole in host memory.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from sglang_fastpath.models.llama_pair import add_shape_arguments, options_from_args, plan
from sglang_fastpath.models.shapes import LlamaPairOptions, LlamaShape, Wiring

if TYPE_CHECKING:
    from sglang_fastpath.models.pair import PairPlan

HELP = "Llama-3-8B shape (32 layers, hidden 4096, vocab 128256) + oracle EAGLE-3 draft; --layers N"
DEFAULTS = LlamaPairOptions(
    shape=LlamaShape(layers=32, hidden=4096, intermediate=14336, heads=32, kv_heads=8, vocab=128256,
                     max_position=8192, rope_theta=500000.0),
    draft_vocab=32000, tokenizer_vocab=32768)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_shape_arguments(p, DEFAULTS, only_layers=True)


def plan_from_args(args: argparse.Namespace) -> PairPlan:
    return plan("dense", options_from_args(args, DEFAULTS))


def make(out: Path, layers: int = 32, seed: int = 0, device: str = "cuda", wiring: Wiring = Wiring.ORACLE) -> dict:
    from sglang_fastpath.models.pair import make_pair

    options = replace(DEFAULTS, shape=replace(DEFAULTS.shape, layers=layers), wiring=wiring)
    return make_pair(out, plan("dense", options), seed, device)
