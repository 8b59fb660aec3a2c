"""The benchmark entry point: stock and fork side by side, per-step and end to end.

  python benchmark/run.py --models DIR --variant stock=/tmp/site-stock --variant fork=/tmp/site-fork
  python benchmark/run.py --quick ...        a small subset for iteration
  python benchmark/run.py --selftest ...     one tiny point per path, PASS/FAIL per path
  python benchmark/run.py --dry-run ...      print the processes, points and estimated time
  python benchmark/run.py ... --compare BASELINE.json   exit 1 on a regression beyond --threshold
                                                        and beyond the spread of the rounds

Every variant runs the same measurements in its own processes with PYTHONPATH set
to its site; micro jobs run --repeats rounds, the variants alternating (A B A B ...),
each round a fresh process. Results go to OUT/<date>-<gpu>-<name>/ (results.json, command.txt,
env.json, raw/, logs/, *.png). Exit status: 0 done, 1 a regression (--compare) or a
failed selftest, 2 usage error, 3 some process or point failed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from benchmark.core.argtypes import int_list
from benchmark.core.errors import BenchError
from benchmark.core.floor import ModelShape, gpu_bandwidth
from benchmark.driver import artifacts, compare, selftest, summary
from benchmark.driver.collect import build_results
from benchmark.driver.envinfo import gpu_inventory
from benchmark.driver.orchestrate import JobOutcome, Orchestrator
from benchmark.driver.plan import (
    PROFILE_POINTS, PROFILES, Plan, Variant, build_plan, first_compile_for, parse_variant_env, with_points)
from benchmark.driver.portable import here, portable
from benchmark.driver.schema import ResultSet
from sglang_fastpath.models.folder import ModelsFolder

REPO = Path(__file__).resolve().parents[2]
BUDGET_S = 560.0  # one 10-minute device call, less start-up and the plots


def _names(text: str) -> list[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="benchmark/run.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--profile", choices=list(PROFILES), default="sweep",
                       help="sweep (default: fits one 10-minute call), all (every combination), quick, selftest")
    which.add_argument("--quick", dest="profile", action="store_const", const="quick", help="= --profile quick")
    which.add_argument("--selftest", dest="profile", action="store_const", const="selftest",
                       help="= --profile selftest")
    p.add_argument("--models", type=Path, help="folder with target/, draft/ (sglang-fastpath models ... --out)")
    p.add_argument("--variant", action="append", default=[], metavar="NAME=SITE", help="repeatable; first = base")
    p.add_argument("--variant-env", action="append", default=[], metavar="NAME:KEY=VALUE",
                   help="repeatable; a variable for every process of variant NAME (e.g. a test switch)")
    p.add_argument("--out", type=Path, default=REPO / "benchmark" / "results")
    p.add_argument("--name", help="results folder suffix (default: the profile)")
    p.add_argument("--dry-run", action="store_true", help="print the plan and its estimated time, run nothing")
    p.add_argument("--compare", type=Path, metavar="BASELINE", help="results.json to guard against")
    p.add_argument("--threshold", type=float, default=compare.THRESHOLD, help="relative move that counts (0.05)")
    p.add_argument("--budget-s", type=float, default=BUDGET_S, help="skip jobs that would end later than this")
    p.add_argument("--gpus", type=int, help="GPUs to plan for (default: nvidia-smi; 2 for a dry run without GPUs)")
    p.add_argument("--configs", type=_names, help="only these parallel configs: tp1,tp2,tp2-pcie")
    p.add_argument("--backends", type=_names, help="only these attention backends: default,triton,flashinfer")
    p.add_argument("--kinds", type=_names, help="only these kinds: micro,e2e")
    p.add_argument("--bs", type=int_list, help="batch sizes, e.g. 1,2,4,8,16,32,64")
    p.add_argument("--ks", type=int_list, help="micro: draft tokens per request, e.g. 2,3,4,6,8 (e2e: --e2e-k)")
    p.add_argument("--topks", type=int_list, help="EAGLE topk values, e.g. 1,4")
    p.add_argument("--ctx", type=int, help="context tokens per request before a step (1024)")
    p.add_argument("--iters", type=int, help="timed runs per point and round (median reported)")
    p.add_argument("--repeats", type=int, metavar="N",
                   help="rounds per variant of each micro job, alternating A B A B (sweep 3, quick 2, selftest 1)")
    p.add_argument("--e2e-repeats", type=int, metavar="N", help="rounds per variant of each e2e job (1)")
    p.add_argument("--e2e-k", type=int, metavar="K",
                   help="e2e: draft tokens per request the spec-on engine starts with, a chain (topk 1, K - 1 draft "
                        "steps); default: the model pair's models.json")
    p.add_argument("--e2e-runs", type=int, metavar="N",
                   help="e2e: timed generate calls per batch size in each engine, median reported (1)")
    p.add_argument("--prompt-len", type=int, help="e2e: prompt tokens per request (128)")
    p.add_argument("--output-len", type=int, help="e2e: generated tokens per request (256)")
    p.add_argument("--e2e-warmup-len", type=int, metavar="N",
                   help="e2e: new tokens of the untimed call at each batch size before its timed runs (default: "
                        "--output-len, the timed call once untimed, so a spec engine's shrinking batch compiles "
                        "its kernels before the timing; lower it only where prefill dominates)")
    p.add_argument("--acc-len", type=float,
                   help="e2e: SGLANG_SIMULATE_ACC_LEN for the spec-on engine (3; 0 when the pair's draft misses "
                        "on purpose, models --draft-accept-length/--draft-miss-rate); 0 = the draft's real acceptance")
    p.add_argument("--profile-steps", type=int,
                   help="e2e: after the timed runs, record a torch-profiler trace of N steps per batch size "
                        "and summarize where GPU time went (benchmark/trace_summary.py)")
    p.add_argument("--pysample-runs", type=int, metavar="N",
                   help="e2e: after the timed runs, N more generate calls per batch size with a sampling "
                        "profiler of the scheduler loop (benchmark/pysample.py reads it)")
    p.add_argument("--eager", action="store_true", default=None, help="also time each point without graphs")
    p.add_argument("--cuda-graph-max-bs", type=int, help="capture graphs only up to this batch size")
    p.add_argument("--server-args", type=json.loads, default={}, metavar="JSON",
                   help='extra ServerArgs for every process, e.g. \'{"disable_prefill_cuda_graph": false}\'')
    p.add_argument("--calibrate", type=Path, metavar="RESULTS", help="scale estimates by a previous run's timings")
    p.add_argument("--bandwidth", type=float, help="GPU bytes/s for the floor when the GPU is not in floor.py")
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--worker", help=argparse.SUPPRESS)  # tests: a command standing in for benchmark.worker
    return p.parse_args(argv)


def calibration_from(path: Path | None) -> float:
    if path is None:
        return 1.0
    done = [p for p in ResultSet.load(path).processes if p.get("status") == "ok" and p.get("estimate_s")]
    if not done:
        raise BenchError(f"{path}: no finished process to calibrate from")
    return sum(p["seconds"] for p in done) / sum(p["estimate_s"] for p in done)


def manifest(models: Path | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(extra ServerArgs the models want, their speculative settings) from models/models.json."""
    if models is None:
        return {}, {}
    folder = ModelsFolder(models)
    return folder.extra_server_args(), folder.speculative()


def default_acc_len(models: Path | None) -> float | None:
    """``--acc-len`` left out: the draft's real acceptance (0) for a pair whose draft misses on purpose,
    else None (the points' default, SGLANG_SIMULATE_ACC_LEN=3)."""
    return 0.0 if models is not None and ModelsFolder(models).draft_misses() else None


def parse_variants(args: argparse.Namespace) -> list[Variant]:
    """``--variant`` options with their ``--variant-env`` variables applied."""
    return parse_variant_env(args.variant_env, [Variant.parse(v) for v in args.variant])


def make_plan(args: argparse.Namespace, gpus: int, variants: list[Variant]) -> Plan:
    micro, e2e = PROFILE_POINTS[args.profile]
    micro = with_points(micro, bs=args.bs, ks=args.ks, topks=args.topks, ctx=args.ctx, iters=args.iters,
                        eager=args.eager, graph_max_bs=args.cuda_graph_max_bs)
    model_args, speculative = manifest(args.models)
    if args.e2e_k is not None:
        if args.e2e_k < 2:
            raise BenchError(f"--e2e-k {args.e2e_k}: a spec-on engine starts with at least 2 draft tokens")
        speculative = {**speculative, "speculative_num_steps": args.e2e_k - 1, "speculative_eagle_topk": 1,
                       "speculative_num_draft_tokens": args.e2e_k}
    e2e = with_points(e2e, bs=args.bs, prompt_len=args.prompt_len, output_len=args.output_len,
                      acc_len=args.acc_len if args.acc_len is not None else default_acc_len(args.models),
                      profile_steps=args.profile_steps, runs=args.e2e_runs,
                      pysample_runs=args.pysample_runs, warmup_len=args.e2e_warmup_len,
                      steps=speculative.get("speculative_num_steps"),
                      topk=speculative.get("speculative_eagle_topk"),
                      draft_tokens=speculative.get("speculative_num_draft_tokens"))
    models = str(args.models.resolve()) if args.models else "<models>"
    return build_plan(args.profile, variants, models, gpus=gpus, configs=args.configs, backends=args.backends,
                      kinds=args.kinds, micro=micro, e2e=e2e, server_args={**model_args, **args.server_args},
                      calibration=calibration_from(args.calibrate), repeats=args.repeats,
                      e2e_repeats=args.e2e_repeats,
                      weights_gb=ModelsFolder(args.models).weights_gb() if args.models else 0.0,
                      first_compile_s=first_compile_for(target_shape(args.models)))


def target_shape(models: Path | None) -> ModelShape | None:
    """The target's shape where ``models`` holds a readable config (a dry run may plan before the draw; a config the
    floor cannot read fails later, where the floor is needed)."""
    if models is None or not (models / "target" / "config.json").is_file():
        return None
    try:
        return ModelShape.from_dir(models / "target")
    except BenchError:
        return None


def check_inputs(args: argparse.Namespace, plan: Plan) -> None:
    if args.models is None:
        raise BenchError("--models is required to run; make one with: python -m sglang_fastpath models tiny --out DIR")
    for part in ("target/config.json", "draft"):
        if not (args.models / part).exists():
            raise BenchError(f"{args.models / part}: missing; --models must hold target/ and draft/")
    for job in plan.jobs:
        if not (Path(job.variant.site) / "sglang").is_dir():
            raise BenchError(f"--variant {job.variant.name}={job.variant.site}: no sglang/ in that folder; "
                             "give the site folder the bundle installed into")


def finish(results: ResultSet, out_dir: Path, args: argparse.Namespace, plan: Plan) -> int:
    """Print the table, plots, selftest and comparisons; the exit status."""
    print(summary.table(results, args.threshold))
    code = 0
    if results.errors:
        print(f"\n{len(results.errors)} failure(s):\n{summary.failures(results)}")
        code = 3
    if not args.no_plot:
        try:
            from benchmark.driver.plot import plot_results

            for png in plot_results(out_dir):
                print(f"plot: {png}")
        except BenchError as exc:
            print(f"plots skipped: {exc}")
    measured = {r.variant for r in results.records}  # a variant whose jobs were all skipped has no figures
    variants = [v for v in dict.fromkeys(j.variant.name for j in plan.jobs) if v in measured]
    if len(variants) > 1:
        side = compare.compare_variants(results, variants[0], variants[-1], args.threshold,
                                        metrics=("latency_ms", "tokens_per_s", "accept_len"))
        print("\n" + side.report(variants[0], variants[-1]))
    if args.profile == "selftest":
        ok, text = selftest.verdict(plan, results)
        print("\n" + text)
        code = code if ok else 1
    if args.compare is not None:
        guard = compare.compare_files(ResultSet.load(args.compare), results, args.threshold)
        print("\n" + guard.report(str(args.compare), str(out_dir / "results.json")))
        if guard.regressions:
            code = 1
    print(f"\nresults: {out_dir}")
    return code


def run(args: argparse.Namespace) -> int:
    inventory = gpu_inventory()
    gpus = args.gpus if args.gpus is not None else (len(inventory) or (2 if args.dry_run else 0))
    variants = parse_variants(args)
    plan = make_plan(args, gpus, variants)
    print(plan.describe())
    if plan.estimate_wall_s() > args.budget_s:
        print(f"note: the estimate exceeds --budget-s {args.budget_s:.0f}; jobs late in the priority order may be "
              "skipped. Split the run with --configs/--kinds, or --calibrate from a real run.")
    if args.dry_run:
        return 0
    check_inputs(args, plan)
    if args.compare is not None:
        ResultSet.load(args.compare)  # fail now, not after ten minutes
    out_dir = artifacts.results_dir(args.out, inventory, args.name or args.profile)
    # as the user typed it: the shim benchmark/run.py (this module runs under -m, its argv[0] its own path)
    argv = [os.path.relpath(REPO / "benchmark" / "run.py"), *(sys.argv[1:] if args.argv is None else args.argv)]
    shape = ModelShape.from_dir(args.models / "target")
    gpu_name = inventory[0]["name"] if inventory else "unknown"
    bandwidth = args.bandwidth or gpu_bandwidth(gpu_name)
    paths = here(REPO)  # this machine's paths, recorded portably
    meta: dict[str, Any] = {
        "name": out_dir.name, "profile": args.profile, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "gpu": gpu_name, "gpu_count": len(inventory), "bandwidth_bytes_per_s": bandwidth,
        "models": portable(str(args.models.resolve()), **paths), "model_shape": dataclasses.asdict(shape),
        "budget_s": args.budget_s, "plan": plan.describe(), "argv": [portable(a, **paths) for a in argv]}
    outcomes: list[JobOutcome] = []

    def write_env() -> None:  # at the start too: a run cut off by its caller keeps it
        artifacts.write_json(out_dir / "env.json", artifacts.env_record(variants, inventory, REPO, outcomes))

    def save(outcome: JobOutcome | None = None) -> ResultSet:
        if outcome is not None:
            outcomes.append(outcome)
        results = build_results(outcomes, meta, shape, bandwidth, out_dir)
        results.save(out_dir / "results.json")
        (out_dir / "command.txt").write_text(artifacts.command_text(argv, os.getcwd(), outcomes, REPO))
        return results

    save()
    write_env()
    started = time.monotonic()
    worker = shlex.split(args.worker) if args.worker else None
    Orchestrator(out_dir, REPO, worker_argv=worker, budget_s=args.budget_s, on_done=save).run_plan(plan)
    meta["elapsed_s"] = round(time.monotonic() - started, 1)
    write_env()
    return finish(save(), out_dir, args, plan)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.argv = argv
    try:
        return run(args)
    except BenchError as exc:
        print(f"run.py: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
