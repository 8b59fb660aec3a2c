from __future__ import annotations

import argparse
from pathlib import Path

from sglang_fastpath.series.export import export_series
from sglang_fastpath.series.sets import find_set


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="write the commits of build/sglang after 'pristine' into patches/ (deterministic)",
        description="Write every commit after the 'pristine' tag of the source tree into patches/ as "
        "git format-patch files and rewrite patches/series in commit order. An export of an unchanged "
        "tree is byte-identical.",
    )
    p.add_argument("--tree", type=Path, default=None, help="the source tree (default: build/sglang)")
    p.add_argument("--series", default="series", help="the series folder to write: 'series' (patches/, "
                   "default) or e.g. 'upstream/v0.5.23' (use the tree made by 'source --series' of the same name)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    result = export_series(args.tree, find_set(args.series).directory)
    print(f"{len(result.written)} patches in series; changed: {len(result.changed)}; removed: {len(result.removed)}")
    for name in result.changed:
        print(f"  wrote   {name}")
    for name in result.removed:
        print(f"  removed {name}")
    return 0
