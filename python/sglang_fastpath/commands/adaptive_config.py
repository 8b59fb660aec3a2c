from __future__ import annotations

import argparse

from sglang_fastpath.adaptive_configs import CONFIGS, config_env, config_path
from sglang_fastpath.errors import FastpathError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "adaptive-config",
        help="print the path of a shipped --speculative-adaptive-config (no NAME: list them)",
        description="The fork ships the adaptive speculation configs its benchmarks measure. With NAME, print "
        "that config's path, for: python -m sglang.launch_server ... --speculative-adaptive "
        '--speculative-adaptive-config "$(sglang-fastpath adaptive-config ks)". Start the server at a K the '
        "config lists (e.g. --speculative-num-steps 3 --speculative-num-draft-tokens 4, topk 1). With --env, print "
        "the fork's switches the config was measured with, to put before that command. Without NAME, list the "
        "shipped configs.",
    )
    p.add_argument("name", nargs="?", metavar="NAME", help=f"one of: {', '.join(CONFIGS)}")
    p.add_argument(
        "--env",
        action="store_true",
        help="print instead the fork's environment switches NAME was measured with, one NAME=VALUE a "
        "line (off by default: none has run at TP > 1), for: env $(sglang-fastpath adaptive-config "
        "ks-off --env) python -m sglang.launch_server ...",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.env and args.name is None:
        raise FastpathError("adaptive-config --env needs a NAME: " + ", ".join(CONFIGS))
    if args.env:
        print("\n".join(config_env(args.name)))
        return 0
    if args.name is not None:
        print(config_path(args.name))
        return 0
    for name, what in CONFIGS.items():
        print(f"{name}: {config_path(name)}\n  {what}")
    return 0
