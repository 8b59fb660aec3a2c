"""``sglang-fastpath install``: the fork into a Python environment, or an offline bundle into a site.

The one installer: ``docker/install.sh`` (the Dockerfile, ``demo.sh``, CI), the bundle's
``install.sh`` and ``demo.sh --bundle`` all end here. This module imports only the standard
library and the ``install`` package, so ``python -m sglang_fastpath.install`` runs it in a
bare environment (no ``packaging`` yet) with the same arguments.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sglang_fastpath.errors import FastpathError
from sglang_fastpath.install.bundle import BundleSpec, install_bundle
from sglang_fastpath.install.lock import DEFAULT_LOCK_DIR
from sglang_fastpath.install.target import VerifyError
from sglang_fastpath.install.wheelhouse import Mode, install

BUNDLE = "bundle"
DESCRIPTION = ("Install the fork and verify it. full: a wheelhouse (docker/build-wheels.sh) and the locked "
               "dependencies (docker/lock/<tag>.txt) into an environment without sglang; overlay: replace only "
               "sglang where sglang 0.5.17 and its dependencies are (lmsysorg/sglang); bundle: an offline bundle "
               "('sglang-fastpath bundle') into a site folder (--site) or the environment (--env), no network. "
               "Exit status: 0 installed and verified, 1 verification failed, 2 a user error.")


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", type=Path, help="the wheelhouse folder or one fork wheel; with --mode bundle, the bundle")
    p.add_argument("--mode", required=True, choices=[*(m.value for m in Mode), BUNDLE],
                   help="full: no sglang yet, install the locked dependencies too; overlay: sglang 0.5.17 present, "
                   "replace only sglang; bundle: the offline bundle SOURCE")
    p.add_argument("--python", default=sys.executable, help="the environment's interpreter (default: this one)")
    p.add_argument("--lock-dir", type=Path, default=DEFAULT_LOCK_DIR, help="full: folder of <tag>.txt locks")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--site", type=Path, help="bundle: install into this folder (pip --target; then PYTHONPATH=SITE)")
    where.add_argument("--env", action="store_true", help="bundle: install into --python's environment")
    p.add_argument("--stock", action="store_true", help="bundle: afterwards turn the patched sglang into pristine "
                   "0.5.17 through the bundle's stock overlay")
    p.add_argument("--cross", action="store_true", help="bundle, --site: allow a Python other than the bundle's; "
                   "pip installs by the bundle's tags and nothing is imported")
    p.add_argument("--no-jit-cache", dest="jit_cache", action="store_false",
                   help="bundle: do not copy the bundle's prebuilt JIT kernels (jit-cache/) into this host's JIT cache "
                   "(TVM_FFI_CACHE_DIR, default ~/.cache/tvm-ffi; files already there are never overwritten)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("install", help="install the fork (wheelhouse + lock, overlay, or offline bundle) and verify it",
                       description=DESCRIPTION)
    configure(p)
    p.set_defaults(func=run)


def _run_bundle(args: argparse.Namespace) -> None:
    if args.site is None and not args.env:
        raise FastpathError("--mode bundle needs --site SITE or --env")
    report = install_bundle(BundleSpec(args.source, args.site, args.stock, args.cross, args.jit_cache), args.python)
    for warning in report.warnings:
        print(f"install: WARNING: {warning}", file=sys.stderr)
    kind = f"stock {report.version}" if args.stock else report.version
    print(f"install: {report.wheels} wheels installed into {report.dest} ({kind}); verified: SHA256SUMS "
          f"({report.files_checked} files), every wheel's version in the site, "
          + ("the stock marker" if args.stock else "the fork's fastpath.json"))
    if report.jit is not None:
        print(f"install: {report.jit.line}")


def _run_wheelhouse(args: argparse.Namespace) -> None:
    if args.site or args.env or args.stock or args.cross or not args.jit_cache:
        raise FastpathError("--site, --env, --stock, --cross and --no-jit-cache are for --mode bundle")
    report = install(args.source, Mode(args.mode), args.python, args.lock_dir)
    for warning in report.warnings:
        print(f"install: warning (not the fork's): {warning}", file=sys.stderr)
    extras = ", ".join(w.name for w in report.wheelhouse.extras) or "none"
    print(f"install: sglang {report.installed_version} ({report.mode.value} mode, {report.target.tag}) "
          f"into {report.target.python}; extras: {extras}; pip check ok")


def run(args: argparse.Namespace) -> int:
    try:
        _run_bundle(args) if args.mode == BUNDLE else _run_wheelhouse(args)
    except VerifyError as exc:
        print(f"install: verification failed: {exc}", file=sys.stderr)
        return 1
    return 0
