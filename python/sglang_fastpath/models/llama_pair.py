"""A Llama target with its EAGLE-3 draft: the plan and options shared by ``tiny``, ``oracle`` and ``dense``.

The kinds differ only in their default shapes. The draft has the target's width,
heads and (by default) intermediate size, one layer, and reads three target layers.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import TYPE_CHECKING

from sglang_fastpath.models.shapes import DraftShape, LlamaPairOptions, Wiring, aux_layer_ids

if TYPE_CHECKING:
    from sglang_fastpath.models.pair import PairPlan


def plan(kind: str, options: LlamaPairOptions) -> PairPlan:
    from sglang_fastpath.models import llama  # torch: only when a model is made
    from sglang_fastpath.models.pair import PairPlan

    shape = options.shape
    draft = DraftShape(
        hidden=shape.hidden, intermediate=options.draft_intermediate or shape.intermediate, heads=shape.heads,
        kv_heads=shape.kv_heads, head_dim=shape.head_dim, vocab=shape.vocab, target_hidden=shape.hidden,
        aux_layer_ids=aux_layer_ids(shape.layers), max_position=shape.max_position,
        rope_theta=shape.rope_theta, rms_eps=shape.rms_eps)
    return PairPlan(kind=kind, wiring=options.wiring, target_config=llama.config(shape),
                    target_summary=shape.summary(),
                    target_weights=lambda factory, walk: llama.weights(shape, factory, walk), draft=draft,
                    draft_vocab=options.draft_vocab, tokenizer_vocab=min(options.tokenizer_vocab, shape.vocab))


def add_shape_arguments(p: argparse.ArgumentParser, defaults: LlamaPairOptions, only_layers: bool = False) -> None:
    """``--layers`` (and, unless ``only_layers``, every other width) with ``defaults`` shown in --help."""
    s = defaults.shape
    p.add_argument("--layers", type=int, default=s.layers, help=f"decoder layers (default {s.layers})")
    if only_layers:
        return
    for flag, value, what in (("--hidden", s.hidden, "hidden size"), ("--intermediate", s.intermediate,
                              "MLP intermediate size"), ("--heads", s.heads, "attention heads"),
                              ("--kv-heads", s.kv_heads, "key/value heads"), ("--vocab", s.vocab, "vocabulary"),
                              ("--draft-vocab", defaults.draft_vocab, "draft vocabulary (hot tokens) wanted"),
                              ("--tokenizer-vocab", defaults.tokenizer_vocab, "BPE tokenizer size")):
        p.add_argument(flag, type=int, default=value, help=f"{what} (default {value})")


def options_from_args(args: argparse.Namespace, defaults: LlamaPairOptions) -> LlamaPairOptions:
    """``defaults`` with whatever ``add_shape_arguments`` options the command line set."""
    s = defaults.shape
    shape = replace(s, layers=args.layers, hidden=getattr(args, "hidden", s.hidden),
                    intermediate=getattr(args, "intermediate", s.intermediate),
                    heads=getattr(args, "heads", s.heads), kv_heads=getattr(args, "kv_heads", s.kv_heads),
                    vocab=getattr(args, "vocab", s.vocab))
    return replace(defaults, shape=shape, draft_vocab=getattr(args, "draft_vocab", defaults.draft_vocab),
                   tokenizer_vocab=getattr(args, "tokenizer_vocab", defaults.tokenizer_vocab),
                   wiring=Wiring(args.wiring))
