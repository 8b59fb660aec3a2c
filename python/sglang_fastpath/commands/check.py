from __future__ import annotations

import argparse
from pathlib import Path

from sglang_fastpath.fetch import newest_release
from sglang_fastpath.series.check import (
    check_bases,
    check_pinned,
    default_base_versions,
    format_matrix,
    format_report,
    missing_upstream_counterparts,
)
from sglang_fastpath.series.sets import upstream_sets


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="verify every series applies to its own pinned pristine SGLang with no fuzz",
        description="Apply patches/series to a fresh pristine tree of the pinned wheel, and each "
        "patches/backport/vX/series and patches/upstream/vX/series to its own pinned release (an "
        "upstream series also needs its pull-request texts, NNNN.md). Exit 1 naming the patch, file "
        "and hunk on the first problem; a wheel whose version or sha256 differs from the pin is refused.",
    )
    p.add_argument("--wheel", type=Path, default=None, help="check the main series against this pristine "
                   "wheel file (it must match the pin)")
    p.add_argument("--base", metavar="VERSION", nargs="*", default=None,
                   help="also report, without failing, which patch of each series (backports aside) applies "
                   "to which SGLang release: a markdown table, one column per release. Without VERSIONs: every "
                   "release on the package index from the main series' base on; 'latest': the newest only. "
                   "Patches are tried in series order; one that fails is skipped")
    p.add_argument("--strict-upstream", action="store_true",
                   help="also fail when a patch of the main series has neither a port in each upstream series "
                   "(same name after the number) nor a line in its not-ported file saying why none is needed")
    p.set_defaults(func=run)


def _base_versions(requested: list[str]) -> list[str]:
    if not requested:
        return default_base_versions()
    return [newest_release() if v == "latest" else v for v in requested]


def run(args: argparse.Namespace) -> int:
    reports = check_pinned(args.wheel)
    for report in reports:
        print(format_report(report))
    ok = all(r.ok for r in reports)
    for upstream in upstream_sets():
        missing = missing_upstream_counterparts(upstream)
        if missing:
            state = "FAILS" if args.strict_upstream else "[not failing]"
            print(f"{state} {upstream.label} has no port of, and no written reason (not-ported) for: "
                  f"{', '.join(n[:4] for n in missing)} (see docs/upstream.md)")
            ok = ok and not args.strict_upstream
    if args.base is not None:
        matrix = check_bases(_base_versions(args.base))
        print("\n[report only] ok: applies with no fuzz; offset: applies at an offset; FAILS: does not apply\n")
        print(format_matrix(matrix))
    print("check: ok" if ok else "check: FAILED")
    return 0 if ok else 1
