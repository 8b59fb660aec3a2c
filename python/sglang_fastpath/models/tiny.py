"""``models tiny``: the embedded default pair, a small Llama (4 layers, hidden 512, vocab 8192, bf16)
with an oracle-wired EAGLE-3 draft over ~4k hot tokens: about 40 MB, made in seconds on a CPU,
and served with an accept length of ``num_steps + 1`` (see ``walk.py``).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from sglang_fastpath.models.llama_pair import plan
from sglang_fastpath.models.shapes import LlamaPairOptions, LlamaShape, Wiring

if TYPE_CHECKING:
    from sglang_fastpath.models.pair import PairPlan

HELP = "small Llama + oracle EAGLE-3 draft (4 layers, hidden 512, vocab 8192): the README's demo pair"
DEFAULTS = LlamaPairOptions(
    shape=LlamaShape(layers=4, hidden=512, intermediate=1536, heads=8, kv_heads=4, vocab=8192),
    draft_vocab=4096, tokenizer_vocab=8192)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The tiny pair has no shape options: it is the fixed demo pair."""


def plan_from_args(args: argparse.Namespace) -> PairPlan:
    return plan("tiny", replace(DEFAULTS, wiring=Wiring(args.wiring)))


def make(out: Path, seed: int = 0, device: str = "cpu", wiring: Wiring = Wiring.ORACLE) -> dict:
    from sglang_fastpath.models.pair import make_pair

    return make_pair(out, plan("tiny", replace(DEFAULTS, wiring=wiring)), seed, device)
