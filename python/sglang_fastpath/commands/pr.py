from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sglang_fastpath.series import pull_request
from sglang_fastpath.series.patches import read_series
from sglang_fastpath.series.sets import find_set


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "pr",
        help="print the upstream pull request of one patch (title, body) and write its branch",
        description="Print the title (the patch's Subject) and body (NNNN.md, SGLang's pull-request "
        "template) of patch NNNN of an upstream series on stdout, and write branch fastpath/NNNN-<slug> "
        "with the patch (after the patches it depends on) applied to a pristine tree of that release: "
        "build/sglang-pr-v<release> unpacked from the pinned wheel, or, with --upstream-repo, a clone "
        "of SGLang's repository from its tag v<release> (ready to push). Without NNNN: list the PRs.",
    )
    p.add_argument("number", nargs="?", help="the patch number, e.g. 0001")
    p.add_argument("--series", default=None, help="the upstream series, e.g. upstream/v0.5.23 (default: newest)")
    p.add_argument("--dest", type=Path, default=None, help="the wheel tree to branch in "
                   "(default: build/sglang-pr-v<release>)")
    p.add_argument("--upstream-repo", type=Path, default=None, help="a clone of SGLang's repository "
                   "with its release tags: branch from tag v<release> there instead")
    p.add_argument("--no-branch", action="store_true", help="only print the title and body")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    series_set = find_set(args.series)
    if args.number is None:
        for patch in read_series(series_set.directory).patches:
            pr = pull_request.load(series_set, patch.name.split("-", 1)[0])
            print(f"{pr.number}  {pr.title}")
        return 0
    pr = pull_request.load(series_set, args.number)
    sys.stdout.write(pr.render())
    if args.no_branch:
        return 0
    branch = pull_request.write_branch(pr, series_set, args.dest, args.upstream_repo)
    where = "ready to push" if branch.pushable else "files as released; not upstream's history: "
    where += "" if branch.pushable else "use --upstream-repo for a pushable branch"
    print(f"\nbranch {branch.name} in {branch.repo}: {branch.base} + {', '.join(branch.patches)} ({where})",
          file=sys.stderr)
    return 0
