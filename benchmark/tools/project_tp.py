"""A projection, not a measurement: verify-step all-reduce time and weight-read floor at TP=N.

  python benchmark/project_tp.py --ar benchmark/results/<run>/ar-pcie-like.json \\
      --config kimi-config.json --tp 2,4,8 --bs 1,8,32,64 --k 4 [--bandwidth 1.792e12] [--json OUT]

Inputs measured at TP=2 (``benchmark/tools/collective_cost.py``): the cost of one in-graph all-reduce
per message size. Model: a ring all-reduce of S bytes over N ranks takes

    t(N, S) = 2 (N - 1) * alpha + 2 (N - 1) / N * S / B

(alpha: latency of one ring step, B: bus bandwidth). At N=2 this is 2 alpha + S / B; alpha and B
are fitted by least squares to the TP=2 points, then evaluated at N. A verify step of bs
requests and k draft tokens all-reduces S = bs * k * hidden * 2 bytes (bf16) ``layers * 2 + 1``
times (attention and MLP/MoE outputs of every layer, plus the vocab-parallel embedding). The
memory floor is ``benchmark/core/floor.py``'s: the bytes one GPU reads per step (weights touched /
N, KV) over ``--bandwidth`` (RTX PRO 6000 Blackwell 1.792e12 B/s by default).

Everything here is an extrapolation from two GPUs of one H200 host with NCCL peer access off,
which is not an 8-GPU PCIe machine: NCCL picks other algorithms (tree, other protocols) at
other sizes and N, the PCIe topology (switches, root complexes) sets B, and alpha grows with
hops. Treat the figures as the shape of the cost (how it scales with N and bs), to be replaced
by the TP=8 measurement (issue #6).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchmark.core.argtypes import int_list
from benchmark.core.errors import BenchError
from benchmark.core.floor import ModelShape, floor_ms

RTX_PRO_6000_BW = 1.792e12


def fit_ring(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(alpha_us, bandwidth_bytes_per_us) of t = 2 alpha + S / B fitted to (bytes, us) points at N=2."""
    if len(points) < 2:
        raise BenchError("need at least two message sizes to fit latency and bandwidth")
    n = len(points)
    mean_s = sum(s for s, _ in points) / n
    mean_t = sum(t for _, t in points) / n
    var = sum((s - mean_s) ** 2 for s, _ in points)
    if var == 0:
        raise BenchError("all points have the same message size")
    slope = sum((s - mean_s) * (t - mean_t) for s, t in points) / var  # us per byte = 1 / B
    intercept = mean_t - slope * mean_s  # 2 alpha
    if slope <= 0 or intercept <= 0:
        raise BenchError(f"the points give no positive latency and bandwidth (2alpha={intercept:.2f} us, "
                         f"1/B={slope:.3g} us/B)")
    return intercept / 2, 1 / slope


def ring_us(tp: int, size: float, alpha_us: float, bytes_per_us: float) -> float:
    return 2 * (tp - 1) * alpha_us + 2 * (tp - 1) / tp * size / bytes_per_us


def points_from(ar: dict[str, Any], method: str) -> list[tuple[float, float]]:
    pts = [(float(r["bytes"]), float(r["us"])) for r in ar["records"] if r["method"] == method]
    if not pts:
        raise BenchError(f"no {method!r} records in the all-reduce file")
    return pts


def project(shape: ModelShape, alpha_us: float, bytes_per_us: float, *, tps: list[int], bss: list[int], k: int,
            ctx: int, bandwidth: float) -> list[dict[str, Any]]:
    calls = 2 * shape.layers + 1
    rows = []
    for tp in tps:
        for bs in bss:
            size = bs * k * shape.hidden * 2
            per_call = ring_us(tp, size, alpha_us, bytes_per_us)
            rows.append({"tp": tp, "bs": bs, "k": k, "message_bytes": size, "all_reduces": calls,
                         "us_per_all_reduce": round(per_call, 1),
                         "all_reduce_ms": round(calls * per_call / 1e3, 2),
                         "floor_ms": round(floor_ms(shape, mode="verify", bs=bs, k=k, ctx=ctx, tp=tp,
                                                    bandwidth=bandwidth), 2)})
    return rows


def table(rows: list[dict[str, Any]], alpha_us: float, bytes_per_us: float) -> str:
    lines = [f"PROJECTION from TP=2 fit: alpha {alpha_us:.2f} us per ring step, B {bytes_per_us / 1e3:.1f} GB/s",
             f"{'tp':>3}{'bs':>4}{'msg KiB':>9}{'AR calls':>9}{'us/AR':>8}{'AR ms':>8}{'floor ms':>10}"]
    lines += [f"{r['tp']:>3}{r['bs']:>4}{r['message_bytes'] / 1024:>9.0f}{r['all_reduces']:>9}"
              f"{r['us_per_all_reduce']:>8.1f}{r['all_reduce_ms']:>8.2f}{r['floor_ms']:>10.2f}" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="benchmark/project_tp.py", description=__doc__.splitlines()[0])
    p.add_argument("--ar", type=Path, required=True, help="collective_cost.py JSON measured at TP=2")
    p.add_argument("--method", default="pynccl_graph", help="which method's points to fit (pynccl_graph)")
    p.add_argument("--config", type=Path, required=True, help="the target's config.json")
    p.add_argument("--layers", type=int, help="override the config's layer count (e.g. 61 for the full model)")
    p.add_argument("--tp", type=int_list, default=[2, 4, 8])
    p.add_argument("--bs", type=int_list, default=[1, 8, 32, 64])
    p.add_argument("--k", type=int, default=4, help="draft tokens per request in the verify step")
    p.add_argument("--ctx", type=int, default=1024)
    p.add_argument("--bandwidth", type=float, default=RTX_PRO_6000_BW, help="GPU memory bytes/s for the floor")
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    try:
        ar = json.loads(args.ar.read_text())
        if ar.get("world") != 2:
            raise BenchError(f"{args.ar}: measured at world {ar.get('world')}, the fit assumes 2")
        config = json.loads(args.config.read_text())
        if args.layers:
            config["num_hidden_layers"] = args.layers
        shape = ModelShape.from_config(config)
        alpha, bw = fit_ring(points_from(ar, args.method))
    except (BenchError, OSError, ValueError, KeyError) as exc:
        print(f"project_tp.py: error: {exc}", file=sys.stderr)
        return 2
    rows = project(shape, alpha, bw, tps=args.tp, bss=args.bs, k=args.k, ctx=args.ctx, bandwidth=args.bandwidth)
    print(table(rows, alpha, bw))
    if args.json:
        args.json.write_text(json.dumps({"kind": "projection", "alpha_us": alpha, "bytes_per_us": bw,
                                         "source": str(args.ar), "method": args.method, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
