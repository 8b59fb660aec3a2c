from __future__ import annotations

import argparse
from pathlib import Path

from sglang_fastpath.pins import FASTPATH_RELEASE, python_tags
from sglang_fastpath.wheel.archive import verify_record
from sglang_fastpath.wheel.build import build_wheels


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "wheel",
        help="build sglang-0.5.17+fastpath.N wheels (cp311, cp312) from pristine + series",
        description="Build the patched SGLang wheel for each pinned Python tag: the pristine wheel with the "
        "files the series changes replaced, a renamed dist-info, fastpath.json and a recomputed RECORD.",
    )
    p.add_argument("--out", type=Path, default=Path("dist"), help="output folder (default: dist)")
    p.add_argument("--tag", action="append", choices=python_tags(), help="only this Python tag (repeatable)")
    p.add_argument("--release", type=int, default=FASTPATH_RELEASE, help="the N of +fastpath.N")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    for built in build_wheels(args.out, args.tag, args.release):
        problems = verify_record(built.path)
        print(f"{built.path}  ({len(built.patched_files)} files patched, RECORD {'ok' if not problems else 'BAD'})")
        for problem in problems:
            print(f"  {problem}")
        if problems:
            return 1
    return 0
