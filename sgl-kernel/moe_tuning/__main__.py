"""Command line: ``PYTHONPATH=sgl-kernel python -m moe_tuning {names,candidates,check} ...``.

* ``names --tp 8``: the config file names SGLang 0.5.17 looks up, per device;
* ``candidates --tp 8 --gemm down --device rtx-pro-6000-server --m 4``: the filtered search space;
* ``check DIR``: the CI gate, every INT4 config file under DIR against the filters (exit 1 on a problem).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from moe_tuning.config_file import check_folder
from moe_tuning.search_space import candidates, smem_estimate
from moe_tuning.shapes import DEVICES, device, rank_shapes
from sglang_fastpath.errors import FastpathError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m moe_tuning", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    names = sub.add_parser("names", help="config file names per device at a TP size")
    names.add_argument("--tp", type=int, default=8)
    cands = sub.add_parser("candidates", help="the filtered search space for one GEMM, device and M")
    cands.add_argument("--tp", type=int, default=8)
    cands.add_argument("--gemm", choices=("up", "down"), default="up")
    cands.add_argument("--device", choices=sorted(DEVICES), default="rtx-pro-6000-server")
    cands.add_argument("--m", type=int, required=True)
    check = sub.add_parser("check", help="validate every INT4 config file under a folder")
    check.add_argument("folder", type=Path)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.verb == "names":
            shapes = rank_shapes(args.tp)
            for dev in DEVICES.values():
                print(shapes.file_name(dev))
                print(shapes.file_name(dev, down=True))
        elif args.verb == "candidates":
            gemm = rank_shapes(args.tp).gemm(args.gemm == "down")
            for cfg in candidates(gemm, device(args.device), args.m):
                print(f"{cfg.label()}  smem~{smem_estimate(cfg)}")
        else:
            if not args.folder.is_dir():
                raise FastpathError(f"{args.folder} is not a folder: pass the configs/ folder to check")
            problems = check_folder(args.folder)
            for problem in problems:
                print(problem)
            print(f"{len(problems)} problem(s) under {args.folder}")
            return 1 if problems else 0
    except FastpathError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
