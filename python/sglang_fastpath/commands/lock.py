"""``sglang-fastpath lock``: write the hash-pinned dependency lock of a fork wheel (``install/lock.py``).

Standard-library imports only, like ``install``: ``python -m sglang_fastpath.lock`` runs it too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sglang_fastpath.install.lock import DEFAULT_LOCK_DIR, read_lock, write_lock

DESCRIPTION = ("Write docker/lock/<tag>.txt: every dependency of the fork wheel for Linux x86_64, one version "
               "and one sha256 each, resolved by pip on an interpreter of the wheel's Python version.")


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("wheel", type=Path, help="the fork wheel (sglang-BASE+fastpath.N-cpXY-...whl)")
    p.add_argument("--python", default=sys.executable, help="an interpreter of the target Python version")
    p.add_argument("--lock-dir", type=Path, default=DEFAULT_LOCK_DIR,
                   help="where <tag>.txt goes (default: docker/lock of this checkout)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lock", help="write the dependency lock (docker/lock/<tag>.txt) of a fork wheel",
                       description=DESCRIPTION)
    configure(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out = write_lock(args.wheel, args.python, args.lock_dir)
    print(f"{out}: {len(read_lock(out).pins)} packages")
    return 0
