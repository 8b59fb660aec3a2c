"""One module per CLI verb, each with ``register(subparsers)``."""

from __future__ import annotations

import argparse
import sys
from types import ModuleType

from sglang_fastpath.errors import FastpathError


def run_alone(verb: ModuleType, prog: str, label: str, argv: list[str] | None) -> int:
    """Run a verb that has ``DESCRIPTION``, ``configure`` and ``run`` as its own program (``python -m ...``),
    without importing the other verbs: ``install`` and ``lock`` run so in an environment with nothing yet."""
    parser = argparse.ArgumentParser(prog=prog, description=verb.DESCRIPTION)
    verb.configure(parser)
    args = parser.parse_args(argv)
    try:
        return verb.run(args)
    except FastpathError as exc:
        print(f"{label}: error: {exc}", file=sys.stderr)
        return 2
