from __future__ import annotations

import argparse
import importlib
import shlex
from pathlib import Path

from sglang_fastpath.errors import FastpathError
from sglang_fastpath.models import KINDS

_GIB = 1 << 30


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "models",
        help="make a target + EAGLE-3 draft pair offline from a seed (tiny, oracle, dense, kimi)",
        description="Write DIR/target and DIR/draft (Hugging Face folders SGLang 0.5.17 serves with "
        "--speculative-algorithm EAGLE3) and DIR/models.json. Same kind, options and seed give the same bytes "
        "on the same device. Nothing is downloaded.",
    )
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    for kind in KINDS:
        module = importlib.import_module(f"sglang_fastpath.models.{kind}")
        k = kinds.add_parser(kind, help=module.HELP, description=(module.__doc__ or "").strip(),
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        k.add_argument("--out", type=Path, required=True, help="output folder DIR")
        k.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
        k.add_argument("--device", default="cpu", help="where weights are drawn: cpu, cuda or cuda:N (default cpu)")
        k.add_argument("--wiring", choices=["oracle", "random"], default="oracle",
                       help="oracle: the draft provably predicts the target; random: plain random weights")
        k.add_argument("--draft-accept-length", type=int, default=None, metavar="N",
                       help="oracle draft wrong on purpose: every verify accepts N-1 drafts + its bonus token "
                       "once generation has met the first miss (a real rejection, not SGLANG_SIMULATE_ACC_LEN)")
        k.add_argument("--draft-miss-rate", type=float, default=None, metavar="P",
                       help="oracle draft wrong on purpose at a seeded fraction P of the walk: accept lengths "
                       "vary per request and verify (models.json gives the mean)")
        k.add_argument("--shard-gb", type=float, default=4.0, help="safetensors shard size in GiB (default 4)")
        k.add_argument("--dry-run", action="store_true", help="print parameter and byte counts, write nothing")
        module.add_arguments(k)
        k.set_defaults(func=run, kind_module=module)


def _check_device(device: str) -> None:
    if not device.startswith("cuda"):
        return
    import torch

    if not torch.cuda.is_available():
        raise FastpathError(f"--device {device}: no CUDA device here; use --device cpu or run on the GPU host")


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from sglang_fastpath.models.pair import make_pair, measure_pair, server_args
    from sglang_fastpath.models.shapes import DraftMisses

    misses = DraftMisses(args.draft_accept_length, args.draft_miss_rate)
    try:
        plan = replace(args.kind_module.plan_from_args(args), misses=misses)
    except ValueError as exc:  # a shape the options cannot make (e.g. --layers too small for a draft)
        raise FastpathError(f"models {args.kind}: {exc}") from None
    if args.dry_run:
        sizes = measure_pair(plan)
        for side, info in sizes.items():
            print(f"{side}: {info['params'] / 1e9:.3f} B params, {info['total_bytes'] / _GIB:.2f} GiB "
                  f"in {info['tensors']} tensors")
        return 0
    _check_device(args.device)
    manifest = make_pair(args.out, plan, args.seed, args.device, int(args.shard_gb * _GIB))
    for side in ("target", "draft"):
        m = manifest[side]
        print(f"{args.out / m['folder']}: {m['architecture']}, {m['params'] / 1e9:.3f} B params, "
              f"{m['bytes'] / _GIB:.2f} GiB")
    if manifest["oracle"]:
        o = manifest["oracle"]
        missed = "" if misses.exact else f" (draft misses: {o['misses']['skip_positions']} skip positions)"
        print(f"oracle: {o['hot_tokens']} hot tokens in one cycle, logit margin {o['logit_margin']}, "
              f"expected accept length {o['expected_accept_length']:.2f}{missed}")
    flags = []
    for key, value in server_args(plan).items():
        if key in ("model_path", "speculative_draft_model_path"):
            value = args.out.resolve() / value
        flags += ["--" + key.replace("_", "-"), str(value)]
    print("serve: python -m sglang.launch_server " + shlex.join(flags))
    return 0
