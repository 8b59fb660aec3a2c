"""What the host pays to launch one CUDA graph, per kernel it holds, and what changes that price.

  python benchmark/graph_launch_cost.py --kernels 64,256,512 --out graph_launch.json

Why: in an EAGLE-3 cycle on kimi16 (one H200, TP 1, bs 1) ``cudaGraphLaunch`` of the verify graph (506
kernels) holds the host 0.96 ms; it is issued onto an idle GPU, which starts the graph's first kernel after
0.17 ms and then runs out of handed-over work for 0.53 ms. At bs 8, issued onto a busy GPU, the same launch
takes 0.63 ms; plain decode's (480 kernels) 0.51 ms
(``benchmark/results/20261202-0248-h200-tp1-kimi16-real-accept3-stock-vs-fork``, ``cycle_phases.py
--graphs``). This measures how the host's price per node depends on the graph's size and on what the GPU
is doing at launch, and which graph features raise it.

Each case captures graphs of N tiny kernels (one-element adds, so the GPU part is negligible to the
host's) and times the host side of ``CUDAGraph.replay()`` alone, ``--iters`` times, median reported:

* ``idle``: the GPU idle at launch (synchronised before);
* ``busy``: the GPU running a long kernel at launch (``torch.cuda._sleep``), as in a cycle;
* ``after_other``: like ``busy``, but two other graphs (N/8 and N/16 kernels, a draft and a draft
  extend) were launched just before, as in a cycle (decode relaunches one graph);
* ``side_stream``: the graph forks to a second stream and joins back every 16 kernels during
  capture (a multi-stream graph, as the MoE shared-expert overlap captures);
* ``other_stream``: replayed alternately on two streams;
* ``memcpy``: every fourth node a device-to-device copy instead of a kernel;
* ``many_args``: a Triton kernel of 16 tensor and 8 integer arguments in place of the add (the
  parameter block size of attention and MoE kernels), when Triton is importable.

``--profiled`` times every case a second time inside ``torch.profiler`` with CUDA activities on (case
``<case>+profiler``), as the e2e benchmark's ``--profile-steps`` traces are taken, after every unprofiled
point: once a profiler has run in a process, launches stay 10-20x slower after it stops
(``benchmark/results/20261202-0816-h200-graph-launch-cost-profiled``, whose run interleaved the two and whose
unprofiled points after the first are slowed so). There, inside the profiler, a launch cost 0.7-1.3 µs per
node against 0.01-0.03 clean: the 0.96 ms of kimi16's profiled 506-node verify launch.

Writes JSON records (``case``, ``kernels``, ``host_us`` median, ``p10_us``, ``p90_us``,
``us_per_node``) and prints a table. GPU only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from benchmark.core.argtypes import int_list
from benchmark.core.stats import quantile

CASES = ("idle", "busy", "after_other", "side_stream", "other_stream", "memcpy", "many_args")
PROFILED = "+profiler"  # suffix of a case timed inside torch.profiler
FORK_EVERY = 16
MEMCPY_EVERY = 4
SLEEP_CYCLES = 5_000_000  # a few ms of GPU time at ~2 GHz: longer than any launch timed here


def record(case: str, kernels: int, samples_s: list[float]) -> dict[str, Any]:
    """One JSON record from the host seconds of each timed launch."""
    us = [s * 1e6 for s in samples_s]
    median = statistics.median(us)
    return {"case": case, "kernels": kernels, "host_us": round(median, 2), "p10_us": round(quantile(us, 0.1), 2),
            "p90_us": round(quantile(us, 0.9), 2), "us_per_node": round(median / kernels, 3),
            "iters": len(us)}


def table(records: list[dict[str, Any]]) -> str:
    """Host µs per launch and per node, one row per case, one column pair per graph size."""
    sizes = sorted({r["kernels"] for r in records})
    order = [c + suffix for c in CASES for suffix in ("", PROFILED)]
    cases = [c for c in order if any(r["case"] == c for r in records)]
    by = {(r["case"], r["kernels"]): r for r in records}
    head = "case".ljust(14) + "".join(f"{f'N={n} us':>12}{'us/node':>9}" for n in sizes)
    lines = [head]
    for case in cases:
        cells = []
        for n in sizes:
            r = by.get((case, n))
            cells.append(f"{r['host_us']:>12.1f}{r['us_per_node']:>9.2f}" if r else f"{'-':>12}{'-':>9}")
        lines.append(case.ljust(14) + "".join(cells))
    return "\n".join(lines)


# --- GPU side ---------------------------------------------------------------------------------------


def _many_args_kernel() -> Callable[[Any, list[Any]], None] | None:
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def touch(x, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15,
              s1, s2, s3, s4, s5, s6, s7, s8):
        v = tl.load(x) + s1 + s2 + s3 + s4 + s5 + s6 + s7 + s8
        tl.store(x, v)

    def launch(x: Any, others: list[Any]) -> None:
        touch[(1,)](x, *others, 0, 0, 0, 0, 0, 0, 0, 0)

    return launch


def _body(case: str, n: int, bufs: list[Any], torch: Any, side: Any, many_args: Any) -> None:
    """Issue the N nodes of a case's graph on the current (capturing) stream; ``bufs[0]`` is the
    one-element tensor the kernels touch, the rest their other arguments (allocated outside capture)."""
    x, spare = bufs[0], bufs[1]
    for i in range(n):
        if case == "side_stream" and i % FORK_EVERY == 0 and i:
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                spare.add_(1)
            torch.cuda.current_stream().wait_stream(side)
        elif case == "memcpy" and i % MEMCPY_EVERY == 0:
            spare.copy_(x)
        elif case == "many_args":
            many_args(x, bufs[1:])
        else:
            x.add_(1)


def _capture(case: str, n: int, torch: Any, side: Any, many_args: Any) -> Any:
    bufs = [torch.zeros(1, device="cuda") for _ in range(16)]
    _body(case, n, bufs, torch, side, many_args)  # warm up (Triton compiles here, not in capture)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _body(case, n, bufs, torch, side, many_args)
    graph.replay()
    torch.cuda.synchronize()
    graph.bufs = bufs  # keep the tensors the graph reads alive with it
    return graph


def time_case(case: str, n: int, iters: int, torch: Any, profiled: bool = False) -> list[float]:
    """Host seconds of each timed ``replay()`` of an N-node graph under ``case``; with ``profiled`` the
    timed launches (not the capture) run inside ``torch.profiler``."""
    side = torch.cuda.Stream()
    many_args = _many_args_kernel() if case == "many_args" else None
    if case == "many_args" and many_args is None:
        return []
    graph = _capture(case, n, torch, side, many_args)
    small = [_capture("idle", max(1, n // d), torch, side, None) for d in (8, 16)] if case == "after_other" else []
    streams = [torch.cuda.current_stream(), torch.cuda.Stream()]
    with _profiler(torch) if profiled else contextlib.nullcontext():
        samples = _timed_launches(case, graph, small, streams, iters, torch)
    torch.cuda.synchronize()
    return samples


def _timed_launches(case: str, graph: Any, small: list[Any], streams: list[Any], iters: int,
                    torch: Any) -> list[float]:
    samples = []
    for i in range(iters):
        torch.cuda.synchronize()
        if case != "idle":
            torch.cuda._sleep(SLEEP_CYCLES)
        for g in small:
            g.replay()
        stream = streams[i % 2] if case == "other_stream" else streams[0]
        with torch.cuda.stream(stream):
            start = time.perf_counter()
            graph.replay()
            samples.append(time.perf_counter() - start)
    return samples


def _profiler(torch: Any) -> Any:
    """A profiler as the e2e worker's ``--profile-steps`` runs it: CPU and CUDA activities, no stacks."""
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    return torch.profiler.profile(activities=acts)


def time_all(cases: list[str], kernels: Sequence[int], iters: int, torch: Any, profiled: bool) -> list[dict]:
    """Every (case, size) point unprofiled, then, with ``profiled``, every point again inside the profiler:
    a profiler slows every later launch of its process, so no clean point may follow a profiled one."""
    records = []
    for inside in (False, True) if profiled else (False,):
        for case in cases:
            for n in kernels:
                samples = time_case(case, n, iters, torch, profiled=inside)
                if samples:
                    records.append(record(case + (PROFILED if inside else ""), n, samples))
    return records


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--kernels", type=int_list, default=(64, 256, 512), help="nodes per graph (64,256,512)")
    p.add_argument("--cases", default=",".join(CASES), help=f"comma list of {', '.join(CASES)}")
    p.add_argument("--iters", type=int, default=100, help="timed launches per case and size (100)")
    p.add_argument("--profiled", action="store_true",
                   help="also time every case inside torch.profiler (CPU + CUDA activities)")
    p.add_argument("--out", help="write the records as JSON here")
    args = p.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        p.error(f"unknown case {', '.join(unknown)}: choose from {', '.join(CASES)}")
    import torch

    if not torch.cuda.is_available():
        print("graph_launch_cost: needs a CUDA GPU", file=sys.stderr)
        return 2
    records = time_all(cases, args.kernels, args.iters, torch, args.profiled)
    out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "records": records}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    print(table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
