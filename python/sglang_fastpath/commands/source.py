from __future__ import annotations

import argparse
from pathlib import Path

from sglang_fastpath.series.source import make_source


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "source",
        help="unpack the pinned SGLang wheel into build/sglang as git: pristine commit + one commit per patch",
        description="Download and verify the pinned SGLang wheel, unpack it into a git repository laid out "
        "like upstream (python/sglang/...), tag the pristine commit 'pristine' and apply patches/series "
        "with git am, one commit per patch. Edit there, commit, then run 'export'.",
    )
    p.add_argument("--dest", type=Path, default=None, help="where to create the tree (default: build/sglang)")
    p.add_argument("--force", action="store_true", help="discard uncommitted edits in an existing tree")
    p.add_argument("--series", default="series", help="which series and release: 'series' (the main one, "
                   "default), 'backport/v0.5.9', 'upstream/v0.5.23'")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    dest = make_source(args.dest, args.force, args.series)
    print(f"{dest}: pristine + series applied; edit, commit, then 'sglang-fastpath export'")
    return 0
