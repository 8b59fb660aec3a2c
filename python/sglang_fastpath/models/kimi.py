"""``models kimi``: DeepSeek-V3 architecture with Kimi-K2.5's text dimensions, plus a Llama-style
EAGLE-3 draft of width 7168.

MLA (q_lora 1536, kv_lora 512, nope 128, rope 64, v 128, 64 heads), hidden 7168,
384 routed experts (top-8) + 1 shared, MoE intermediate 2048, dense intermediate
18432 for the first layer, vocab 163840; ``--layers N`` (default 4) and routed
experts ``--experts int4`` (compressed-tensors pack-quantized, group 32, symmetric,
as in the real checkpoint) or ``bf16``. One MoE layer is ~9.5 GB in INT4 and ~34 GB
in bf16: draw it on the GPU host (``--device cuda``). ``--scale-down`` shrinks every
width to a DeepSeek-V3-shaped model that CPU tests build and run in seconds.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from sglang_fastpath.models.shapes import DeepseekShape, DraftShape, ExpertDtype, Wiring, aux_layer_ids

if TYPE_CHECKING:
    from sglang_fastpath.models.pair import PairPlan

HELP = "DeepSeek-V3 arch at Kimi-K2.5 text dims (MLA, 384 experts, INT4 or bf16) + EAGLE-3 draft; --layers N"
DRAFT_VOCAB, TOKENIZER_VOCAB = 32000, 32768
SCALED_DRAFT_VOCAB, SCALED_TOKENIZER_VOCAB = 2048, 4096


def plan(shape: DeepseekShape, experts: ExpertDtype = ExpertDtype.INT4, wiring: Wiring = Wiring.ORACLE,
         scaled_down: bool = False) -> PairPlan:
    from sglang_fastpath.models import deepseek  # torch: only when a model is made
    from sglang_fastpath.models.pair import PairPlan

    if scaled_down:
        draft = DraftShape(hidden=shape.hidden, intermediate=2 * shape.hidden, heads=4, kv_heads=2, head_dim=64,
                           vocab=shape.vocab, target_hidden=shape.hidden,
                           aux_layer_ids=aux_layer_ids(shape.layers), max_position=shape.max_position,
                           rms_eps=shape.rms_eps)
        draft_vocab, tokenizer_vocab = SCALED_DRAFT_VOCAB, SCALED_TOKENIZER_VOCAB
    else:
        draft = DraftShape(hidden=shape.hidden, intermediate=shape.intermediate, heads=64, kv_heads=8, head_dim=128,
                           vocab=shape.vocab, target_hidden=shape.hidden,
                           aux_layer_ids=aux_layer_ids(shape.layers), max_position=shape.max_position,
                           rope_theta=shape.rope_theta, rms_eps=shape.rms_eps)
        draft_vocab, tokenizer_vocab = DRAFT_VOCAB, TOKENIZER_VOCAB

    summary = {**shape.summary(), "experts_dtype": experts.value}
    return PairPlan(kind="kimi", wiring=wiring, target_config=deepseek.config(shape, experts),
                    target_summary=summary, draft=draft,
                    target_weights=lambda factory, walk: deepseek.weights(shape, factory, walk, experts),
                    draft_vocab=draft_vocab, tokenizer_vocab=min(tokenizer_vocab, shape.vocab))


def add_arguments(p: argparse.ArgumentParser) -> None:
    full = DeepseekShape()
    p.add_argument("--layers", type=int, default=None, help=f"decoder layers (default {full.layers}; "
                   "layer 0 is dense, the rest MoE)")
    p.add_argument("--experts", choices=[e.value for e in ExpertDtype], default=ExpertDtype.INT4.value,
                   help="routed expert weights: int4 (compressed-tensors pack-quantized, as Kimi-K2.5) or bf16")
    p.add_argument("--routed-experts", type=int, default=None,
                   help=f"number of routed experts (default {full.routed_experts}; fewer only for tests)")
    p.add_argument("--scale-down", action="store_true",
                   help="tests only: every width shrunk (hidden 256, 8 experts, vocab 4096) to build on a CPU")


def plan_from_args(args: argparse.Namespace) -> PairPlan:
    base = DeepseekShape.scaled_down() if args.scale_down else DeepseekShape()
    shape = base.with_overrides(layers=args.layers, routed_experts=args.routed_experts)
    return plan(shape, ExpertDtype(args.experts), Wiring(args.wiring), args.scale_down)


def make(out: Path, layers: int = 4, experts: ExpertDtype = ExpertDtype.INT4, seed: int = 0, device: str = "cuda",
         wiring: Wiring = Wiring.ORACLE, scaled_down: bool = False) -> dict:
    from sglang_fastpath.models.pair import make_pair

    base = DeepseekShape.scaled_down() if scaled_down else DeepseekShape()
    return make_pair(out, plan(base.with_overrides(layers=layers), experts, wiring, scaled_down), seed, device)
