from __future__ import annotations

import argparse

from sglang_fastpath.adaptive_configs import CONFIGS, config_path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "adaptive-config",
        help="print the path of a shipped --speculative-adaptive-config (no NAME: list them)",
        description="The fork ships the adaptive speculation configs its benchmarks measure. With NAME, print "
        "that config's path, for: python -m sglang.launch_server ... --speculative-adaptive "
        "--speculative-adaptive-config \"$(sglang-fastpath adaptive-config ks)\". Start the server at a K the "
        "config lists (e.g. --speculative-num-steps 3 --speculative-num-draft-tokens 4, topk 1). Without NAME, "
        "list the shipped configs.",
    )
    p.add_argument("name", nargs="?", metavar="NAME", help=f"one of: {', '.join(CONFIGS)}")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.name is not None:
        print(config_path(args.name))
        return 0
    for name, what in CONFIGS.items():
        print(f"{name}: {config_path(name)}\n  {what}")
    return 0
