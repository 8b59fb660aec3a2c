"""What one all-reduce costs, by method and message size, outside and inside a CUDA graph.

  python benchmark/collective_cost.py --world 2 --hidden 4096,7168 --tokens 1,4,8,32,128 --out AR.json
  NCCL_P2P_DISABLE=1 python benchmark/collective_cost.py ...    # PCIe-like: NCCL without peer access

Spawns ``--world`` processes, one GPU each, and times back-to-back all-reduces of a
``tokens x hidden`` bf16 tensor (the message of one TP all-reduce in a decode or verify
step) for each method SGLang can pick when custom all-reduce is off:

* ``torch``: ``torch.distributed.all_reduce`` in place (SGLang's eager in-place path);
* ``pynccl``: SGLang's ``PyNcclCommunicator.all_reduce`` in place;
* ``pynccl_outplace``: ``PyNcclCommunicator.outplace_all_reduce`` (a new output tensor each
  call): the path a forward takes under the CUDA-graph flags;
* ``pynccl_graph``: in-place pynccl captured into a CUDA graph of ``iters`` calls and
  replayed (what a captured decode/verify step pays per all-reduce).

Eager figures are wall time per call with the host launching each one (what an eager
forward pays); the graph figure is replay time divided by the calls in the graph.
Rank 0 writes JSON (one record per method, size) and prints a table. ``--device cpu``
(gloo, ``torch`` only) exists for tests. SGLang must be importable for the pynccl
methods (the variant's site on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

from benchmark.core.argtypes import int_list

METHODS = ("torch", "pynccl", "pynccl_outplace", "pynccl_graph")


def _time_eager(fn: Any, sync: Any, iters: int, repeats: int) -> float:
    """Median over ``repeats`` of (wall time of ``iters`` back-to-back calls) / iters, in µs."""
    samples = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        samples.append((time.perf_counter() - start) / iters * 1e6)
    return statistics.median(samples)


def _pynccl(rank: int, device: Any) -> Any:
    import torch.distributed as dist
    from sglang.srt.distributed.device_communicators.pynccl import PyNcclCommunicator

    comm = PyNcclCommunicator(dist.new_group(backend="gloo"), device)
    comm.disabled = False  # SGLang enables it per use (graph capture, out-of-place paths)
    return comm


def measure(rank: int, world: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    import torch
    import torch.distributed as dist

    cuda = args.device == "cuda"
    device = torch.device(f"cuda:{rank}") if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world,
                            init_method=f"tcp://127.0.0.1:{args.port}", device_id=device if cuda else None)
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    comm = _pynccl(rank, device) if cuda else None
    methods = [m for m in args.methods if cuda or m == "torch"]
    records = []
    for hidden in args.hidden:
        for tokens in args.tokens:
            x = torch.ones(tokens, hidden, dtype=torch.bfloat16 if cuda else torch.float32, device=device)
            calls = {"torch": lambda: dist.all_reduce(x),
                     "pynccl": lambda: comm.all_reduce(x),
                     "pynccl_outplace": lambda: comm.outplace_all_reduce(x)}
            for method in methods:
                if method == "pynccl_graph":
                    us = _time_graph(comm, x, args.iters, args.repeats)
                else:
                    for _ in range(args.warmup):
                        calls[method]()
                    us = _time_eager(calls[method], sync, args.iters, args.repeats)
                records.append({"method": method, "tokens": tokens, "hidden": hidden,
                                "bytes": x.numel() * x.element_size(), "us": round(us, 2)})
    dist.barrier()
    dist.destroy_process_group()
    return records


def _time_graph(comm: Any, x: Any, iters: int, repeats: int) -> float:
    import torch

    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # pynccl launches on the current stream: the capturing one
        for _ in range(3):
            comm.all_reduce(x)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(iters):
                comm.all_reduce(x)
    graph.replay()
    return _time_eager(graph.replay, torch.cuda.synchronize, 1, repeats) / iters


def _worker(rank: int, world: int, args: argparse.Namespace) -> None:
    records = measure(rank, world, args)
    if rank == 0:
        env = {k: os.environ[k] for k in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_ALGO", "NCCL_PROTO")
               if k in os.environ}
        result = {"world": world, "device": args.device, "env": env, "iters": args.iters,
                  "repeats": args.repeats, "records": records}
        if args.out:
            with open(args.out, "w") as f:
                json.dump(result, f, indent=1)
        print(table(result))


def table(result: dict[str, Any]) -> str:
    env = ", ".join(f"{k}={v}" for k, v in result["env"].items()) or "default NCCL"
    lines = [f"all-reduce cost, world {result['world']} ({env}), µs per call",
             f"{'hidden':>7}{'tokens':>7}{'bytes':>9}" + "".join(f"{m:>17}" for m in METHODS)]
    rows: dict[tuple[int, int, int], dict[str, float]] = {}
    for r in result["records"]:
        rows.setdefault((r["hidden"], r["tokens"], r["bytes"]), {})[r["method"]] = r["us"]
    for (hidden, tokens, size), by_method in sorted(rows.items()):
        cells = "".join(f"{by_method[m]:>17.1f}" if m in by_method else f"{'-':>17}" for m in METHODS)
        lines.append(f"{hidden:>7}{tokens:>7}{size:>9}{cells}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="benchmark/collective_cost.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--hidden", type=int_list, default=[4096, 7168])
    p.add_argument("--tokens", type=int_list, default=[1, 4, 8, 32, 128, 256])
    p.add_argument("--methods", type=lambda s: [m for m in s.split(",") if m], default=list(METHODS))
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--port", type=int, default=29517)
    p.add_argument("--out", help="JSON file rank 0 writes")
    args = p.parse_args(argv)
    bad = [m for m in args.methods if m not in METHODS]
    if bad or args.world < 2:
        p.error(f"--methods from {','.join(METHODS)}; --world at least 2" + (f" (got {','.join(bad)})" if bad else ""))
    return args


def main(argv: list[str] | None = None) -> int:
    import torch.multiprocessing as mp

    args = parse_args(argv)
    mp.spawn(_worker, args=(args.world, args), nprocs=args.world, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
