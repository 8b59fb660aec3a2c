from __future__ import annotations

import argparse
from pathlib import Path

from sglang_fastpath.check import check_other_base, check_pinned, format_report


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="verify the series applies to the pinned pristine SGLang with no fuzz",
        description="Apply patches/series to a fresh pristine tree of the pinned wheel (and each "
        "patches/backport/vX/series to its own pinned base). Exit 1 naming the patch, file and hunk "
        "on the first problem; a wheel whose version or sha256 differs from the pin is refused.",
    )
    p.add_argument("--wheel", type=Path, default=None, help="check against this pristine wheel file "
                   "(it must match the pin)")
    p.add_argument("--base", metavar="VERSION", nargs="?", const="latest", default=None,
                   help="also report, without failing, how the series applies to another SGLang release "
                   "(default: the newest on the package index)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    reports = check_pinned(args.wheel)
    for report in reports:
        print(format_report(report))
    ok = all(r.ok for r in reports)
    if args.base:
        other = check_other_base(None if args.base == "latest" else args.base)
        print(f"\n[report only] {format_report(other)}")
    print("check: ok" if ok else "check: FAILED")
    return 0 if ok else 1
