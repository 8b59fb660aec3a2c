"""``sglang-fastpath``: the command line of the fork.

Each verb lives in its own module under ``sglang_fastpath.commands`` exposing
``register(subparsers)``; ``main`` only parses and dispatches. A user mistake is
one line on stderr and exit status 2; a failed check exits 1.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from sglang_fastpath import __version__
from sglang_fastpath.errors import FastpathError

# Order = order in --help.
VERBS = ("source", "export", "check", "pr", "wheel", "lock", "bundle", "install", "doctor", "demo", "models", "warm-jit",
         "adaptive-config")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sglang-fastpath",
        description="Build, check and diagnose the sglang-fastpath patch series on its pinned SGLang release.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    for verb in VERBS:
        importlib.import_module(f"sglang_fastpath.commands.{verb.replace('-', '_')}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except FastpathError as exc:
        print(f"sglang-fastpath {args.verb}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
