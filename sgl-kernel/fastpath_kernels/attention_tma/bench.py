"""GPU check and timing of patch 0032's ``verify_mla_tma_fwd`` (64-token pages, TMA tiles) at Kimi-K2.5's MLA shapes.

    PYTHONPATH=sgl-kernel:$PYTHONPATH python3 -m fastpath_kernels.attention_tma.bench --out DIR [--budget-s 140]

The kernel is the installed fork's ``sglang.kernels.ops.attention.verify_mla_tma`` (patch 0032; ``load_module``
imports it when the run starts, so this file imports without SGLang), and so is patch 0007's
``verify_grouped_attention_fwd`` it is compared with: run from the repository root (the ``benchmark`` package) with
the fork's site on PYTHONPATH (``source test/gpu/device_env.sh``).

Points: H (query heads per rank) 8 and 32, bs 1 and 8, context 1k/8k/32k, K=4 draft tokens (chain), bf16,
q/k 576, v 512, one latent KV head, page 64. For each point:
1. a pool of KV copies (each copy: every request's prefix on its own random 64-token pages; copies together
   >= 200 MB, at least ``--min-calls``), draft K/V and q;
2. each variant (``--variants``: names of ``CANDIDATE_TILES``, tile overrides of the module's ``DEFAULT_TILE``; the
   first is recorded as ``tma-p64``, the others as ``tma-p64:<name>``) is checked on copy 0 against a float32
   reference (max abs err / max |ref| <= ``--tol``); a variant that fails, or that the module refuses
   (``verify_mla_tma_fwd`` returns False), is not timed;
3. timing as benchmark/tools/attn_verify_bench.py does it: N back-to-back calls in one CUDA graph, call i on
   copy i, the graph replayed several times; median replay / N (p20, p80 as well). Each call is the module's
   whole call (its cached descriptors, its own partial-output scratch, stage 1 and the merge), as the triton
   backend's verify graphs capture it;
4. patch 0007's ``verify_grouped_attention_fwd`` (on the same pages, page_size 64, its own default tile) the same
   way, as ``grouped-p64``; skipped with one line when it cannot be imported.

Prints one line per point, a table at the end, and writes DIR/results.json: records {mode: attn_verify, metric:
latency_us, value, p20, p80, k, bs, ctx, heads, variant, floor_us (prefix bytes / 4.8 TB/s), gbps, pct_hbm,
rel_err, tile (the module's verify_mla_tma_plan), page: 64, calls_per_graph}, plus notes. Stops starting new
points at the deadline.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import torch

from benchmark.tools.attn_verify_bench import HBM_BYTES_PER_S, ROTATE_BYTES, copies_for, graph_time_us
from benchmark.tools.attn_verify_bench import MLA_LK as LK
from benchmark.tools.attn_verify_bench import MLA_LV as LV

DEVICE = "cuda"  # the CPU test of the harness sets "cpu" (with TRITON_INTERPRET=1)
PAGE = 64
MODULE = "sglang.kernels.ops.attention.verify_mla_tma"
# Tile variants: overrides of the module's DEFAULT_TILE (block_m 64, block_n 64, num_stages 2, num_warps 8,
# index_ahead 3, use_tma). q (block_m x 576 bf16) + num_stages KV tiles (block_n x 576 bf16) must stay under
# sm_90's 227 KB of shared memory.
CANDIDATE_TILES = {
    "n32s4": {"block_n": 32, "num_stages": 4},  # 3 tiles (110 KB) in flight while one is consumed
    "n16s8": {"block_n": 16, "num_stages": 8},  # 7 tiles (129 KB) in flight, more index loads
    "n64s2": {"block_n": 64, "num_stages": 2},  # 1 tile (74 KB) in flight: the module's default
    "n32s3": {"block_n": 32, "num_stages": 3},
    "n32s4-idx1": {"block_n": 32, "num_stages": 4, "index_ahead": 1},  # index by cp.async, waited at once
}


def load_module() -> ModuleType:
    """The installed fork's patch 0032 module; its tile keys must cover CANDIDATE_TILES'."""
    import importlib

    vt = importlib.import_module(MODULE)
    unknown = {k for tile in CANDIDATE_TILES.values() for k in tile} - set(vt.DEFAULT_TILE)
    assert not unknown, f"CANDIDATE_TILES keys not in {MODULE}.DEFAULT_TILE: {sorted(unknown)}"
    return vt


def make_point(bs: int, ctx: int, k: int, heads: int, copies: int, seed: int, pool: dict | None = None) -> dict:
    """``copies`` KV copies of a batch (bs requests of ``ctx`` prefix tokens) on 64-token pages of one buffer.

    Copy c's request b holds pages perm[(c * bs + b) * ppr ...] (ppr pages a request, the last partial when
    ctx % 64): so the pages of a request are scattered and no two copies share a page. One spare page at the
    end is NaN-poisoned, and so are the unused rows of partial last pages: a kernel that reads them shows.
    """
    dev = DEVICE
    g = torch.Generator(device=dev).manual_seed(seed)
    if pool is None:
        ppr = -(-ctx // PAGE)
        total_pages = copies * bs * ppr + 1
        kv = torch.randn(total_pages * PAGE, 1, LK, device=dev, generator=g, dtype=torch.float32)
        kv = kv.to(torch.bfloat16 if dev == "cuda" else torch.float16)
        perm = torch.randperm(total_pages - 1, device=dev, generator=g)
        pos = torch.arange(ctx, device=dev)
        indices = []
        for c in range(copies):
            pages = perm[c * bs * ppr:(c + 1) * bs * ppr].view(bs, ppr)
            slots = pages[:, pos // PAGE] * PAGE + pos % PAGE
            indices.append(slots.flatten().to(torch.int64).contiguous())
            if ctx % PAGE:
                for last in pages[:, -1].tolist():
                    kv[last * PAGE + ctx % PAGE:(last + 1) * PAGE] = float("nan")
        kv[(total_pages - 1) * PAGE:] = float("nan")
        pool = {"kv": kv, "indices": indices, "copies": copies}
    dtype = pool["kv"].dtype
    q = torch.randn(bs * k, heads, LK, device=dev, generator=g).to(dtype)
    k_ext = torch.randn(bs * k, 1, LK, device=dev, generator=g).to(dtype)
    x = {"q": q, "k_ext": k_ext, "v_ext": k_ext[..., :LV], "kv": pool["kv"], "indices": pool["indices"],
         "kv_indptr": torch.arange(0, (bs + 1) * ctx, ctx, device=dev, dtype=torch.int32),
         "bs": bs, "ctx": ctx, "k": k, "heads": heads, "sm_scale": LK ** -0.5, "pool": pool}
    x["ref"] = reference(x)
    return x


def reference(x: dict) -> torch.Tensor:
    """float32 attention of copy 0: every prefix key visible, the draft keys under the causal chain."""
    k, ctx, kv = x["k"], x["ctx"], x["kv"]
    out = torch.empty(x["q"].shape[0], x["heads"], LV, device=kv.device)
    chain = torch.ones(k, k, dtype=torch.bool, device=kv.device).tril()
    seen = torch.cat([torch.ones(k, ctx, dtype=torch.bool, device=kv.device), chain], 1)
    for b in range(x["bs"]):
        slots = x["indices"][0][b * ctx:(b + 1) * ctx]
        rows = slice(b * k, (b + 1) * k)
        keys = torch.cat([kv[slots, 0], x["k_ext"][rows, 0]]).float()
        scores = torch.einsum("thd,nd->htn", x["q"][rows].float(), keys) * x["sm_scale"]
        probs = scores.masked_fill(~seen, float("-inf")).softmax(-1)
        out[rows] = torch.einsum("htn,nd->thd", probs, keys[:, :LV])
    return out


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).abs().max() / b.float().abs().max())


def kv_bytes(x: dict) -> int:
    return x["bs"] * x["ctx"] * LK * x["kv"].element_size()


def tma_calls(vt: ModuleType, x: dict, o: torch.Tensor, tile: dict) -> list[Callable[[], None]]:
    """One call per KV copy, sharing ``o`` (they run in series); a call the module refuses raises."""
    def run(idx: torch.Tensor) -> None:
        ran = vt.verify_mla_tma_fwd(x["q"], x["k_ext"], x["v_ext"], o, x["kv"], x["kv_indptr"], idx, x["k"],
                                    x["sm_scale"], page_size=PAGE, **tile)
        if not ran:
            raise RuntimeError(f"verify_mla_tma_fwd refused the call (tile {tile}); the log says why")

    return [lambda idx=idx: run(idx) for idx in x["indices"]]


def load_p0007() -> tuple[Callable | None, str]:
    try:
        from sglang.kernels.ops.attention.verify_grouped_attention import verify_grouped_attention_fwd
    except Exception as e:  # noqa: BLE001
        return None, f"patch 0007's kernel not importable ({type(e).__name__}: {e})"[:300]
    return verify_grouped_attention_fwd, ""


def p0007_calls(fwd: Callable, x: dict, o: torch.Tensor) -> list[Callable[[], None]]:
    kb = x["kv"].view(-1, PAGE, 1, LK)
    vb = x["kv"][..., :LV].view(-1, PAGE, 1, LV)  # the value slice, paged: its one-latent path

    def call(idx: torch.Tensor) -> Callable[[], None]:
        return lambda: fwd(x["q"], x["k_ext"], x["v_ext"], o, kb, vb, x["kv_indptr"], idx, x["k"], x["sm_scale"],
                           page_size=PAGE)
    return [call(idx) for idx in x["indices"]]


def record(variant: str, x: dict, us: tuple[float, float, float], **extra) -> dict:
    nbytes = kv_bytes(x)
    return {"mode": "attn_verify", "metric": "latency_us", "variant": variant, "k": x["k"], "bs": x["bs"],
            "ctx": x["ctx"], "heads": x["heads"], "topk": 1, "page": PAGE, "value": round(us[0], 3),
            "p20": round(us[1], 3), "p80": round(us[2], 3), "floor_bytes": nbytes,
            "floor_us": round(nbytes / HBM_BYTES_PER_S * 1e6, 3), "gbps": round(nbytes / (us[0] * 1e-6) / 1e9, 1),
            "pct_hbm": round(100 * nbytes / (us[0] * 1e-6) / HBM_BYTES_PER_S, 1), **extra}


def variant_name(i: int, name: str) -> str:
    return "tma-p64" if i == 0 else f"tma-p64:{name}"


def each_point(args, deadline: float, notes: list[str], log: Callable[[str], None]) -> Iterator[tuple[dict, int]]:
    """(inputs, calls per graph) of each point of ``args.heads`` x ``args.bs`` x ``args.ctx``, in that order, until
    ``deadline`` (a point not run then is a note); the KV pool of a (bs, ctx) serves every head count. The cache is
    emptied after each point's timings (the caller's loop body)."""
    pools = {}
    for heads in args.heads:
        for bs in args.bs:
            for ctx in args.ctx:
                if time.time() > deadline:
                    notes.append(f"deadline: h{heads} bs{bs} ctx{ctx} not run")
                    log(notes[-1])
                    continue
                copies = copies_for(bs * ctx * LK * 2, args.min_calls)
                x = make_point(bs, ctx, args.k, heads, copies, seed=ctx + bs + heads, pool=pools.get((bs, ctx)))
                pools[(bs, ctx)] = x["pool"]
                yield x, copies
                if DEVICE == "cuda":
                    torch.cuda.empty_cache()


def run(args, log, timer: Callable = graph_time_us) -> tuple[list[dict], list[str]]:
    deadline = time.time() + args.budget_s
    records, notes = [], []
    vt = load_module()
    p0007, why = (None, "--no-p0007") if args.no_p0007 else load_p0007()
    if p0007 is None:
        log(f"grouped-p64 (patch 0007) skipped: {why}")
        notes.append(f"grouped-p64 skipped: {why}")
    variants = [(variant_name(i, n), n, CANDIDATE_TILES[n]) for i, n in enumerate(args.variants)]
    for x, copies in each_point(args, deadline, notes, log):
        heads, bs, ctx = x["heads"], x["bs"], x["ctx"]
        o = torch.empty(bs * args.k, heads, LV, device=DEVICE, dtype=x["kv"].dtype)
        line = []
        for vname, name, tile in variants:
            tile = {**tile, **args.tile_override}
            if args.pointer_loads:
                tile["use_tma"] = False
            try:
                calls = tma_calls(vt, x, o, tile)
                o.fill_(float("nan"))
                calls[0]()
                err = rel_err(o, x["ref"])
                plan = vt.verify_mla_tma_plan(args.k, bs, heads, x["q"].device, **tile)
                if not err <= args.tol:  # NaN fails too
                    notes.append(f"{vname} h{heads} bs{bs} ctx{ctx}: rel_err {err:.2e} > {args.tol}, not timed")
                    log(notes[-1])
                    continue
                us = timer(calls)
                records.append(record(vname, x, us, rel_err=err, tile=plan, calls_per_graph=len(calls)))
                line.append(f"{vname} {us[0]:.1f} us ({records[-1]['pct_hbm']}%)")
            except Exception as e:  # noqa: BLE001
                notes.append(f"{vname} h{heads} bs{bs} ctx{ctx} failed: {type(e).__name__}: {e}"[:400])
                log(notes[-1])
                log(traceback.format_exc(limit=3))
        if p0007 is not None:
            try:
                calls = p0007_calls(p0007, x, o)
                o.fill_(float("nan"))
                calls[0]()
                err = rel_err(o, x["ref"])
                us = timer(calls)
                records.append(record("grouped-p64", x, us, rel_err=err, calls_per_graph=len(calls)))
                line.append(f"grouped-p64 {us[0]:.1f} us ({records[-1]['pct_hbm']}%)")
            except Exception as e:  # noqa: BLE001
                p0007, why = None, f"patch 0007 failed at h{heads} bs{bs} ctx{ctx}: {e!r}"[:300]
                notes.append(why)
                log(why)
        log(f"h{heads} bs{bs} ctx{ctx} ({copies} calls/graph, floor {kv_bytes(x) / HBM_BYTES_PER_S * 1e6:.2f} us): "
            + ", ".join(line))
    return records, notes


def table(records: list[dict]) -> str:
    points = sorted({(r["heads"], r["bs"], r["ctx"]) for r in records})
    variants = list(dict.fromkeys(r["variant"] for r in records))
    rows = ["| H | bs | ctx | floor us | " + " | ".join(f"{v} us (% HBM)" for v in variants) + " |",
            "|" + "---|" * (4 + len(variants))]
    for h, b, c in points:
        by = {r["variant"]: r for r in records if (r["heads"], r["bs"], r["ctx"]) == (h, b, c)}
        floor = next(iter(by.values()))["floor_us"]
        cells = [f"{by[v]['value']:.1f} ({by[v]['pct_hbm']})" if v in by else "-" for v in variants]
        rows.append(f"| {h} | {b} | {c} | {floor} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ints = lambda s: [int(v) for v in s.split(",")]  # noqa: E731
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog="device: source test/gpu/device_env.sh && PYTHONPATH=sgl-kernel:$PYTHONPATH "
                                        "python3 -m fastpath_kernels.attention_tma.bench --out $OUT/tma")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--heads", type=ints, default=[8, 32])
    ap.add_argument("--bs", type=ints, default=[1, 8])
    ap.add_argument("--ctx", type=ints, default=[1024, 8192, 32768])
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--variants", type=lambda s: s.split(","), default=["n64s2", "n32s4", "n16s8"],
                    help=f"of {sorted(CANDIDATE_TILES)}; the first is recorded as tma-p64")
    ap.add_argument("--tile-override", type=json.loads, default={},
                    help="JSON merged into every variant's tile, e.g. '{\"index_ahead\": 1}'; keys: the module's "
                         "DEFAULT_TILE (block_m, block_n, num_stages, num_warps, index_ahead, use_tma)")
    ap.add_argument("--pointer-loads", action="store_true",
                    help="full tiles by pointer loads instead of TMA descriptors (use_tma False: an A/B of the load "
                         "path)")
    ap.add_argument("--min-calls", type=int, default=2)
    ap.add_argument("--tol", type=float, default=2e-2)
    ap.add_argument("--budget-s", type=float, default=140)
    ap.add_argument("--no-p0007", action="store_true")
    args = ap.parse_args(argv)
    unknown = [v for v in args.variants if v not in CANDIDATE_TILES]
    if unknown:
        ap.error(f"unknown variants {unknown}; known: {sorted(CANDIDATE_TILES)}")
    return args


def main(argv: list[str] | None = None, timer: Callable = graph_time_us) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()

    def log(msg: str) -> None:
        print(f"[{time.time() - t0:6.1f}s] {msg}", flush=True)

    env = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0) if DEVICE == "cuda" else "cpu"}
    try:
        import triton
        env["triton"] = triton.__version__
    except ImportError:
        pass
    log(f"env {env}")
    records, notes = run(args, log, timer)
    out = {"records": records, "notes": notes, "env": env, "args": {k: v if not isinstance(v, Path) else str(v)
                                                                     for k, v in vars(args).items()},
           "timing": f"N calls in one CUDA graph, one KV copy each (>= {ROTATE_BYTES >> 20} MiB together), "
                     "median replay / N", "wall_s": round(time.time() - t0, 1)}
    (args.out / "results.json").write_text(json.dumps(out, indent=1))
    print(table(records))
    log(f"wrote {args.out / 'results.json'} ({len(records)} records, {len(notes)} notes)")
    return 0 if records else 1


if __name__ == "__main__":
    sys.exit(main())
