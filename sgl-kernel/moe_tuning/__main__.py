"""Command line: ``PYTHONPATH=sgl-kernel python -m moe_tuning {names,candidates,check} ...``.

* ``names --tp 8``: the config file names SGLang 0.5.17 looks up, per device;
* ``candidates --tp 8 --gemm down --device rtx-pro-6000-server --m 4``: the filtered search space;
* ``check DIR``: the CI gate, every INT4 config file under DIR against the filters (exit 1 on a problem);
* ``tune --tp 2 --device h200 --out DIR`` (GPU host, SGLang installed): time every candidate per M with
  SGLang's own kernel under CUDA graphs, resumable from its log, and write the fastest per M as the
  up and ``_down`` files SGLang reads (``tune.py``, ``gpu_timer.py``); ``--compile-workers N`` first
  builds the untimed candidates' binaries in N processes (``precompile.py``);
* ``compile-shard``: one of those processes (started by ``tune``, not by hand).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from moe_tuning.config_file import check_folder
from moe_tuning.search_space import candidates, smem_estimate
from moe_tuning.shapes import DEVICES, device, rank_shapes
from moe_tuning.tune import VERIFY_MS, Progress, TrialLog, tune_pair, write_pair
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
    tune = sub.add_parser("tune", help="time the candidates on this GPU and write the fastest per M (GPU host)")
    tune.add_argument("--tp", type=int, default=2)
    tune.add_argument("--device", choices=sorted(DEVICES), default="h200",
                      help="whose shared-memory limit filters the space and whose file names are written "
                           "(tuning for an RTX PRO 6000 on an H200: pass its key and --xcompile-arch 120)")
    tune.add_argument("--ms", default=",".join(map(str, VERIFY_MS)), help="token counts M to tune, comma-separated")
    tune.add_argument("--out", type=Path, required=True, help="folder for the two config files")
    tune.add_argument("--log", type=Path, help="the timing log to resume from (default OUT/tune-log.jsonl)")
    tune.add_argument("--budget-s", type=float, help="stop timing after this many seconds (resume later)")
    tune.add_argument("--xcompile-arch", type=int, help="refuse configs that spill, overflow shared memory or "
                      "use wgmma when compiled for this arch (e.g. 120), before timing them")
    tune.add_argument("--launches", type=int, default=10, help="kernel launches per captured graph")
    tune.add_argument("--replays", type=int, default=20, help="timed graph replays per config")
    tune.add_argument("--compile-workers", type=int, default=0,
                      help="build the untimed candidates' Triton binaries in this many processes first "
                           "(0: compile each while timing, one by one)")
    shard = sub.add_parser("compile-shard", help="(started by tune --compile-workers) build one share of the jobs")
    shard.add_argument("--tp", type=int, required=True)
    shard.add_argument("--jobs", type=Path, required=True)
    shard.add_argument("--shard", type=int, required=True)
    shard.add_argument("--of", type=int, required=True)
    return parser


def _tune(args: argparse.Namespace) -> int:
    from moe_tuning.gpu_timer import GraphTimer, xcompile_screen

    shapes, dev = rank_shapes(args.tp), device(args.device)
    ms = [int(m) for m in args.ms.split(",") if m]
    log = TrialLog(args.log or args.out / "tune-log.jsonl")
    screen = xcompile_screen(args.xcompile_arch, dev) if args.xcompile_arch else None
    deadline = time.monotonic() + args.budget_s if args.budget_s else None
    if args.compile_workers > 0:
        from moe_tuning.precompile import run_workers, untimed_jobs

        jobs = untimed_jobs(shapes, dev, ms, log)
        budget = None if deadline is None else max(0.0, deadline - time.monotonic()) / 2
        print(run_workers(args.tp, jobs, args.compile_workers, log.path.parent / "precompile", budget).line(),
              flush=True)
    timer = GraphTimer(shapes, launches=args.launches, replays=args.replays)
    up, down = tune_pair(shapes, dev, ms, timer, log, screen=screen, progress=Progress(), deadline=deadline)
    done = sorted(set(up) & set(down))
    print(f"tuned M {done} of {ms} ({len(log.trials)} trials in {log.path})")
    if not done:
        print("nothing complete yet: run again with the same --log to go on")
        return 1
    up_path, down_path, problems = write_pair(args.out, shapes, dev, up, down)
    for m in done:
        print(f"M={m}: up {up[m].label()}  down {down[m].label()}")
    for problem in problems:
        print(problem)
    print(f"wrote {up_path} and {down_path}" + ("" if done == ms else "; run again with the same --log for the rest"))
    return 1 if problems else 0


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
        elif args.verb == "tune":
            return _tune(args)
        elif args.verb == "compile-shard":
            from moe_tuning.precompile import compile_shard

            return compile_shard(args.tp, args.jobs, args.shard, args.of)
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
