"""GPU check and timing of the warp-specialized Gluon verify attention (``attention_ws.kernel.verify_mla_ws_fwd``:
stage 1 here + patch 0007's merge) beside patch 0032's ``verify_mla_tma_fwd`` on the same pages.

    source test/gpu/device_env.sh && PYTHONPATH=sgl-kernel:$PYTHONPATH python3 -m fastpath_kernels.attention_ws.bench --out $OUT/ws --budget-s 240

Run from the repository root with the fork's site on PYTHONPATH (0032's module and 0007's merge kernel come from
the installed fork; Triton must be 3.6+ with Gluon). The points, inputs, float32 reference and timing are
``fastpath_kernels.attention_tma.bench``'s: H 8 and 32, bs 1 and 8, context 1k/8k/32k, K=4 (chain), bf16, page 64,
a pool of KV copies >= 200 MB, N calls in one CUDA graph (call i on copy i), median replay / N. Variants:
``ws:<tile>`` for each ``--variants`` name (``xcompile.TILES``: n64b2 the default, n32b4, ...), ``tma-p64``
(0032's default tile) unless ``--no-tma``. A variant is timed only if its output on copy 0 is within ``--tol`` of
the float32 reference (max abs err / max |ref|); one that fails or raises is a note, not a record.

Writes DIR/results.json ({records, notes, env, args}; records as attention_tma.bench's, with ``variant`` and
``pct_hbm``) and prints a table. Stops starting new points at the deadline.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import torch

from benchmark.tools.attn_verify_bench import HBM_BYTES_PER_S, graph_time_us
from fastpath_kernels.attention_tma import bench as tb
from fastpath_kernels.attention_ws import kernel as ws
from fastpath_kernels.attention_ws.xcompile import TILES

LV, PAGE = 512, 64


def ws_calls(x: dict, o: torch.Tensor, tile: dict) -> list[Callable[[], None]]:
    def run(idx: torch.Tensor) -> None:
        if not ws.verify_mla_ws_fwd(x["q"], x["k_ext"], x["v_ext"], o, x["kv"], x["kv_indptr"], idx, x["k"],
                                    x["sm_scale"], page_size=PAGE, **tile):
            raise RuntimeError(f"verify_mla_ws_fwd refused the call (tile {tile}); the log says why")

    return [lambda idx=idx: run(idx) for idx in x["indices"]]


def run(args, log, timer: Callable = graph_time_us) -> tuple[list[dict], list[str]]:
    deadline = time.time() + args.budget_s
    records, notes = [], []
    vt = None
    if not args.no_tma:
        try:
            vt = tb.load_module()
        except Exception as e:  # noqa: BLE001
            notes.append(f"tma-p64 (patch 0032) skipped: {type(e).__name__}: {e}"[:300])
            log(notes[-1])
    variants = [(f"ws:{n}", TILES[n], None) for n in args.variants]
    if vt is not None:
        variants.append(("tma-p64", {}, vt))
    for x, copies in tb.each_point(args, deadline, notes, log):
        heads, bs, ctx = x["heads"], x["bs"], x["ctx"]
        o = torch.empty(bs * args.k, heads, LV, device=tb.DEVICE, dtype=x["kv"].dtype)
        line = []
        for name, tile, module in variants:
            try:
                calls = tb.tma_calls(module, x, o, tile) if module is not None else ws_calls(x, o, tile)
                o.fill_(float("nan"))
                calls[0]()
                torch.cuda.synchronize()
                err = tb.rel_err(o, x["ref"])
                if not err <= args.tol:  # NaN fails too
                    notes.append(f"{name} h{heads} bs{bs} ctx{ctx}: rel_err {err:.2e} > {args.tol}, not timed")
                    log(notes[-1])
                    continue
                us = timer(calls)
                plan = (ws.verify_mla_ws_plan(args.k, bs, heads, x["q"].device, **tile) if module is None
                        else module.verify_mla_tma_plan(args.k, bs, heads, x["q"].device))
                plan = {k: v for k, v in plan.items() if k != "grid"}
                records.append(tb.record(name, x, us, rel_err=err, tile=plan, calls_per_graph=len(calls)))
                line.append(f"{name} {us[0]:.1f} us ({records[-1]['pct_hbm']}%)")
            except Exception as e:  # noqa: BLE001
                notes.append(f"{name} h{heads} bs{bs} ctx{ctx} failed: {type(e).__name__}: {e}"[:400])
                log(notes[-1])
                log(traceback.format_exc(limit=4))
        log(f"h{heads} bs{bs} ctx{ctx} ({copies} calls/graph, floor "
            f"{tb.kv_bytes(x) / HBM_BYTES_PER_S * 1e6:.2f} us): " + ", ".join(line))
    return records, notes


def main(argv: list[str] | None = None, timer: Callable = graph_time_us) -> int:
    ints = lambda s: [int(v) for v in s.split(",")]  # noqa: E731
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--heads", type=ints, default=[8, 32])
    ap.add_argument("--bs", type=ints, default=[1, 8])
    ap.add_argument("--ctx", type=ints, default=[1024, 8192, 32768])
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--variants", type=lambda s: s.split(","), default=["n32b4", "n64b2"],
                    help=f"of {sorted(TILES)}")
    ap.add_argument("--no-tma", action="store_true", help="skip patch 0032's kernel")
    ap.add_argument("--min-calls", type=int, default=2)
    ap.add_argument("--tol", type=float, default=2e-2)
    ap.add_argument("--budget-s", type=float, default=240)
    args = ap.parse_args(argv)
    unknown = [v for v in args.variants if v not in TILES]
    if unknown:
        ap.error(f"unknown variants {unknown}; known: {sorted(TILES)}")
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()

    def log(msg: str) -> None:
        print(f"[{time.time() - t0:6.1f}s] {msg}", flush=True)

    import triton

    env = {"torch": torch.__version__, "triton": triton.__version__, "device": torch.cuda.get_device_name(0)}
    log(f"env {env}")
    records, notes = run(args, log, timer)
    out = {"records": records, "notes": notes, "env": env,
           "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
           "wall_s": round(time.time() - t0, 1)}
    (args.out / "results.json").write_text(json.dumps(out, indent=1))
    print(tb.table(records))
    log(f"wrote {args.out / 'results.json'} ({len(records)} records, {len(notes)} notes)")
    return 0 if records else 1


if __name__ == "__main__":
    sys.exit(main())
