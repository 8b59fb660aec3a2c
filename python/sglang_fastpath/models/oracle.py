"""``models oracle``: a Llama target and an EAGLE-3 draft that provably predicts its greedy token,
at any shape (``--layers --hidden --intermediate --heads --kv-heads --vocab``).

The target's attention and MLP outputs are exact zeros, so its greedy next token is
a fixed map of the current token (``oracle.safetensors``: ``next_token``), with a
logit margin of 32 at every width; the draft computes that map exactly (``walk.py``).
Expected accept length: ``speculative_num_steps + 1`` with top-k 1.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from sglang_fastpath.models.llama_pair import add_shape_arguments, options_from_args, plan
from sglang_fastpath.models.shapes import LlamaPairOptions, LlamaShape

if TYPE_CHECKING:
    from sglang_fastpath.models.pair import PairPlan

HELP = "Llama target + EAGLE-3 draft that provably predicts it (shape options), accept length = steps + 1"
DEFAULTS = LlamaPairOptions(
    shape=LlamaShape(layers=4, hidden=1024, intermediate=2816, heads=16, kv_heads=8, vocab=16384),
    draft_vocab=8192, tokenizer_vocab=16384)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_shape_arguments(p, DEFAULTS)


def plan_from_args(args: argparse.Namespace) -> PairPlan:
    return plan("oracle", options_from_args(args, DEFAULTS))


def make(out: Path, options: LlamaPairOptions = DEFAULTS, seed: int = 0, device: str = "cpu") -> dict:
    from sglang_fastpath.models.pair import make_pair

    return make_pair(out, plan("oracle", options), seed, device)
