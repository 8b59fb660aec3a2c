"""GPU check, mini-tuner and benchmark of the small-M W4A16 MoE at Kimi-K2.5's shapes (one GPU).

    python -m fastpath_kernels.moe.bench --out DIR [--tp 2,8] [--m 1,2,4,8,16,32,64] [--deadline-s 240]

For each TP shape (hidden 7168, I = 2048/TP, 384 experts, top-8, INT4 group 32, bf16) and M:
1. tunes ``fused_moe_w4a16`` over a small candidate set (gate/up tile, K split and pipelining
   first with the default down, then the down tile and mode with the best gate/up; grouped vs not
   at larger M),
   each timed as one MoE layer under a CUDA graph;
2. checks the winner against a float64 torch dequant reference (max rel err <= 1e-2);
3. then times SGLang 0.5.17's own paths on the same weights and routings (``sglang_baselines``):
   ``triton-default`` (``fused_moe_kernel_gptq_awq``, default config), ``triton-tuned`` (the same with
   ``--tuned-configs``' files, when named in ``--variants``) and ``marlin``
   (``fused_marlin_moe``), each only once a child process has built its JIT kernels (a thread
   starts those builds at the beginning, so they overlap the tuning).

Timing: one CUDA graph holds ``--routings`` layer calls, each with its own routing (M tokens,
8 distinct experts of 384 per token, uniform), so a call rarely finds its experts in L2; the
per-call time is a replay's time over the calls, median of ``--reps`` replays. ``floor_us`` is the
bytes of the distinct experts a call touches (weights + scales, both GEMMs) at 4.8 TB/s.
Writes ``moe_small_m.json`` (records + notes + errors) and prints a table last. Stops tuning and
skips what is left when the deadline comes, saying so in the notes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch

from fastpath_kernels.moe.layout import W4Weights
from fastpath_kernels.moe.reference import moe_reference
from fastpath_kernels.moe.w4a16_small_m import GemmTile, SmallMConfig, check_config, fused_moe_w4a16

GROUP = 32
KIMI = {"hidden": 7168, "inter": 2048, "experts": 384, "top_k": 8}
TINY = {"hidden": 256, "inter": 256, "experts": 16, "top_k": 8}  # --dry-run on CPU (TRITON_INTERPRET=1)
HIDDEN, INTER, EXPERTS, TOP_K = KIMI["hidden"], KIMI["inter"], KIMI["experts"], KIMI["top_k"]
DTYPE = torch.bfloat16


def use_tiny_shapes() -> None:
    """--dry-run: tiny shapes in fp16 (the interpreter's bf16 arithmetic is wrong), for CPU."""
    global HIDDEN, INTER, EXPERTS, TOP_K, DTYPE
    HIDDEN, INTER, EXPERTS, TOP_K = TINY["hidden"], TINY["inter"], TINY["experts"], TINY["top_k"]
    DTYPE = torch.float16
PEAK_BYTES_PER_S = 4.8e12  # H200 HBM3e
BASELINES = ("triton-default", "triton-tuned", "marlin")  # SGLang's own paths, timed after fastpath
MARLIN_FROM_ISSUE_US = 59.0  # issue 13: SGLang's Marlin MoE per call, kimi TP=2 decode bs 1 trace (another run)


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


def make_weights(tp: int, device: str, seed: int = 0) -> tuple[W4Weights, W4Weights]:
    """Random INT4 words (every nibble uniform) and bf16 scales of Kimi's size at this TP."""
    inter = INTER // tp
    g = torch.Generator(device).manual_seed(seed)

    def one(n: int, k: int) -> W4Weights:
        packed = torch.randint(-2**31, 2**31 - 1, (EXPERTS, n, k // 8), dtype=torch.int32, device=device, generator=g)
        scale = (torch.rand(EXPERTS, n, k // GROUP, device=device, generator=g) * 0.004 + 0.002).to(DTYPE)
        return W4Weights(packed, scale)

    return one(2 * inter, HIDDEN), one(HIDDEN, inter)


def draw_routing(m: int, g: torch.Generator, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A verify batch's routing: M tokens, top-8 distinct experts of 384 each, weights summing to 1."""
    ids = torch.rand(m, EXPERTS, generator=g, device=device).topk(TOP_K, dim=1).indices.to(torch.int32)
    w = torch.rand(m, TOP_K, generator=g, device=device) + 0.1
    return w / w.sum(1, keepdim=True), ids


def floor_bytes(ids: torch.Tensor, w13: W4Weights, w2: W4Weights) -> int:
    experts = int(torch.unique(ids[ids >= 0]).numel())
    return experts * (w13.nbytes_per_expert() + w2.nbytes_per_expert())


def time_calls(calls: list[Callable[[], object]], reps: int) -> float:
    """Microseconds per call: ``calls`` captured in one CUDA graph, median of ``reps`` replays
    (on CPU, for --dry-run: eager calls timed on the host)."""
    if not torch.cuda.is_available():
        t0 = time.perf_counter()
        for call in calls:
            call()
        return (time.perf_counter() - t0) * 1e6 / len(calls)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for call in calls:  # compile / JIT outside the capture
            call()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):  # SGLang imports in a thread
        for call in calls:
            call()
    graph.replay()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) * 1000.0 / len(calls))
    del graph
    return statistics.median(samples)


def split_choices(k_tiles: int, programs_per_split: int, targets: tuple[int, ...] = (1024, 4096)) -> list[int]:
    """K splits (divisors of the K tiles) that put the program count nearest each target."""
    divisors = [s for s in range(1, k_tiles + 1) if k_tiles % s == 0]
    if not divisors:
        return []  # the tile is longer than K
    return sorted({min(divisors, key=lambda s: abs(s * programs_per_split - t)) for t in targets})


def gate_up_candidates(m: int, inter: int) -> list[GemmTile]:
    pairs = m * TOP_K
    out = []
    for bn, bk, warps in ((16, 256, 4), (32, 256, 4), (16, 512, 4), (8, 512, 4), (16, 512, 8)):
        for split in split_choices(HIDDEN // bk, pairs * (inter // bn)):
            out += [GemmTile(bn, bk, split, warps, stages) for stages in (1, 3)]
    return out


def down_candidates(m: int, inter: int) -> list[tuple[GemmTile, bool]]:
    """(tile, by token) pairs."""
    bk = min(256, inter)
    out = [(GemmTile(bn, bk, 1, 4), True) for bn in (8, 16, 32)]
    if inter // bk > 1:
        out.append((GemmTile(16, bk, inter // bk, 4), True))
    out += [(GemmTile(bn, bk, 1, 4), False) for bn in (16, 32)]
    if inter // bk > 1:  # a K loop to pipeline
        out += [(GemmTile(32, bk, 1, 4, 3), True), (GemmTile(32, bk, 1, 4, 3), False)]
    return out


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.deadline = Deadline(args.deadline_s)
        self.records: list[dict] = []
        self.notes: list[str] = []
        self.errors: list[str] = []
        self.tuning: list[dict] = []
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu (dry run)"
        self.ready = {"triton-default": threading.Event(), "marlin": threading.Event()}
        self.ready["triton-tuned"] = self.ready["triton-default"]  # the same JIT kernels
        self.warm_done = threading.Event()

    def warm_baselines(self) -> None:
        """In a thread: build each SGLang baseline's JIT kernels in a child process (nvcc), one
        after the other, and mark it ready when that worked; the timing thread carries on."""
        import subprocess

        wanted = set(self.args.variants)
        for name in [v for v in ("triton-default", "marlin")
                     if v in wanted or (v == "triton-default" and "triton-tuned" in wanted)]:
            which = "triton" if name == "triton-default" else "marlin"
            t0 = time.monotonic()
            try:
                done = subprocess.run([sys.executable, "-m", "fastpath_kernels.moe.sglang_baselines", "warm", which],
                                      capture_output=True, text=True, check=False,
                                      timeout=max(1.0, self.deadline.left() - self.args.reserve_s))
                if done.returncode == 0:
                    self.ready[name].set()
                    self.notes.append(f"{name}: JIT warm-up took {time.monotonic() - t0:.0f} s")
                else:
                    self.errors.append(f"{name}: warm-up failed: {(done.stdout + done.stderr)[-800:]}")
            except subprocess.TimeoutExpired:
                self.errors.append(f"{name}: warm-up still running at the deadline ({time.monotonic() - t0:.0f} s)")
        self.warm_done.set()

    def layer_calls(self, cfg: SmallMConfig, x: torch.Tensor, routings, w13, w2) -> list[Callable[[], object]]:
        return [lambda rw=rw, ids=ids: fused_moe_w4a16(x, w13, w2, rw, ids, cfg) for rw, ids in routings]

    def tune(self, tp: int, m: int, x, routings, w13, w2) -> SmallMConfig | None:
        inter = INTER // tp
        best_cfg, best_us = None, float("inf")

        def consider(cfg: SmallMConfig, stage: str) -> None:
            nonlocal best_cfg, best_us
            if self.deadline.left() < self.args.reserve_s and best_cfg is not None:
                return
            try:
                check_config(cfg, HIDDEN, inter)
            except ValueError:
                return  # a candidate these shapes cannot take (tiny dry-run shapes)
            try:
                us = time_calls(self.layer_calls(cfg, x, routings, w13, w2), self.args.reps)
            except Exception as exc:  # noqa: BLE001
                self.errors.append(f"tp{tp} M={m} {cfg.label()}: {exc!r}"[:400])
                return
            self.tuning.append({"tp": tp, "M": m, "stage": stage, "config": cfg.label(), "latency_us": round(us, 2)})
            if us < best_us:
                best_cfg, best_us = cfg, us

        grouped = m * TOP_K > 64
        base_down = (GemmTile(16, min(256, inter), 1, 4), True)
        for tile in gate_up_candidates(m, inter):
            consider(SmallMConfig(tile, base_down[0], grouped=grouped, down_by_token=base_down[1]), "gate_up")
        if best_cfg is None:
            return None
        up = best_cfg.gate_up
        for tile, by_token in down_candidates(m, inter):
            consider(SmallMConfig(up, tile, grouped=grouped, down_by_token=by_token), "down")
        if m * TOP_K >= 64:
            consider(SmallMConfig(best_cfg.gate_up, best_cfg.down, grouped=not best_cfg.grouped,
                                  down_by_token=best_cfg.down_by_token), "grouped")
        if self.deadline.left() < self.args.reserve_s:
            self.notes.append(f"tp{tp} M={m}: tuning cut short by the deadline")
        return best_cfg

    def check(self, tp: int, m: int, cfg: SmallMConfig, x, routing, w13, w2) -> float:
        rw, ids = routing
        out = fused_moe_w4a16(x, w13, w2, rw, ids, cfg).double()
        ref = moe_reference(x, w13, w2, rw, ids)
        rel = ((out - ref).abs().max() / ref.abs().max()).item()
        if not rel <= 1e-2:
            self.errors.append(f"tp{tp} M={m} {cfg.label()}: CHECK FAILED, max rel err {rel:.3e} > 1e-2")
        return rel

    def record(self, tp: int, m: int, variant: str, us: float, floor: float, **extra) -> None:
        self.records.append({
            "mode": "moe", "metric": "latency_us", "value": round(us, 2), "M": m, "tp": tp,
            "shape": f"E={EXPERTS},hidden={HIDDEN},I={INTER // tp},top_k={TOP_K},int4_g{GROUP}",
            "variant": variant, "floor_us": round(floor / PEAK_BYTES_PER_S * 1e6, 2), "floor_bytes": int(floor),
            "achieved_GBps": round(floor / (us * 1e-6) / 1e9, 1), "graph": True,
            "routings": self.args.routings, "reps": self.args.reps, "gpu": self.gpu, **extra,
        })

    def run(self) -> None:
        """fastpath at every (M, TP), M-major so both shapes get each M before the deadline; then
        triton-default at every (M, TP) (SGLang has been loading meanwhile)."""
        weights = {tp: make_weights(tp, self.device) for tp in self.args.tp}
        g = torch.Generator(self.device).manual_seed(1234)
        x_all = torch.randn(max(self.args.m), HIDDEN, generator=g, device=self.device).to(DTYPE)
        inputs = {}
        for m in self.args.m:
            for tp in self.args.tp:
                if self.deadline.left() < self.args.reserve_s:
                    self.notes.append(f"tp{tp} M={m}: fastpath skipped, deadline")
                    continue
                w13, w2 = weights[tp]
                x = x_all[:m].contiguous()
                routings = [draw_routing(m, g, self.device) for _ in range(self.args.routings)]
                floor = statistics.mean(floor_bytes(ids, w13, w2) for _, ids in routings)
                inputs[tp, m] = (x, routings, floor)
                cfg = self.tune(tp, m, x, routings, w13, w2)
                if cfg is None:
                    continue
                rel = self.check(tp, m, cfg, x, routings[0], w13, w2)
                us = min(t["latency_us"] for t in self.tuning if t["tp"] == tp and t["M"] == m)
                self.record(tp, m, "fastpath", us, floor, config=cfg.label(), config_json=asdict(cfg),
                            max_rel_err=rel)
                self.write()
        for name in [v for v in BASELINES if v in self.args.variants]:
            self.run_baseline(name, weights, inputs)

    def run_baseline(self, name: str, weights: dict, inputs: dict) -> None:
        from fastpath_kernels.moe import sglang_baselines

        ready = self.ready[name]
        while not ready.is_set() and not self.warm_done.is_set() and self.deadline.left() > self.args.reserve_s:
            ready.wait(timeout=1.0)
        if not ready.is_set():
            self.notes.append(f"{name}: not run (its JIT warm-up did not finish in time or failed: see errors)")
            return
        for tp in self.args.tp:
            try:
                if name == "triton-tuned":
                    files = [str(f) for f in Path(self.args.tuned_configs).glob(f"E={EXPERTS},N={INTER // tp // 2},*.json")]
                    if not files:
                        self.notes.append(f"triton-tuned tp{tp}: no tuned file for N={INTER // tp // 2} in "
                                          f"{self.args.tuned_configs}")
                        continue
                    folder = sglang_baselines.tuned_config_dir(files, str(Path(self.args.out) / f"tuned-tp{tp}"))
                    call = sglang_baselines.triton_default(*weights[tp], folder)
                elif name == "triton-default":
                    call = sglang_baselines.triton_default(*weights[tp])
                else:
                    call = sglang_baselines.marlin(*weights[tp])
            except Exception as exc:  # noqa: BLE001
                self.errors.append(f"{name} tp{tp}: setup failed: {exc!r} {traceback.format_exc()[-600:]}")
                continue
            for (tp_, m), (x, routings, floor) in inputs.items():
                if tp_ != tp:
                    continue
                if self.deadline.left() < self.args.reserve_s / 2:
                    self.notes.append(f"tp{tp} M={m}: {name} skipped, deadline")
                    continue
                try:
                    rw, ids = routings[0]
                    ref = fused_moe_w4a16(x, *weights[tp], rw, ids).float()
                    got = call(x, rw, ids).float()
                    rel = ((got - ref).abs().max() / ref.abs().max()).item()
                    calls = [lambda rw=rw, ids=ids, x=x, call=call: call(x, rw, ids) for rw, ids in routings]
                    us = time_calls(calls, self.args.reps)
                    self.record(tp, m, name, us, floor, rel_diff_vs_fastpath=rel)
                except Exception as exc:  # noqa: BLE001
                    self.errors.append(f"{name} tp{tp} M={m}: {exc!r} {traceback.format_exc()[-600:]}")
                self.write()
            call = None  # drop the baseline's copies (Marlin repacks) before the next shape
            torch.cuda.empty_cache()

    def table(self) -> str:
        rows = ["| TP | M | variant | latency us | floor us | GB/s | % of 4.8 TB/s | fastpath speed-up |",
                "|---|---|---|---|---|---|---|---|"]
        by = {(r["tp"], r["M"], r["variant"]): r for r in self.records}
        for r in sorted(self.records, key=lambda r: (r["tp"], r["M"], r["variant"])):
            fast = by.get((r["tp"], r["M"], "fastpath"))
            gain = f"{r['value'] / fast['value']:.2f}x" if fast and r["variant"] != "fastpath" else ""
            rows.append(f"| {r['tp']} | {r['M']} | {r['variant']} | {r['value']:.1f} | {r['floor_us']:.1f} | "
                        f"{r['achieved_GBps']:.0f} | {100 * r['achieved_GBps'] * 1e9 / PEAK_BYTES_PER_S:.0f}% | {gain} |")
        return "\n".join(rows)

    def write(self) -> None:
        out = Path(self.args.out)
        out.mkdir(parents=True, exist_ok=True)
        doc = {"schema": "sglang-fastpath-moe-bench/1", "gpu": self.gpu, "torch": torch.__version__,
               "triton": __import__("triton").__version__, "args": vars(self.args), "records": self.records,
               "tuning": self.tuning, "notes": self.notes, "errors": self.errors,
               "marlin_from_issue_us": MARLIN_FROM_ISSUE_US}
        (out / "moe_small_m.json").write_text(json.dumps(doc, indent=1))
        (out / "table.md").write_text(self.table() + "\n")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ints = lambda s: [int(v) for v in s.split(",")]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--tp", type=ints, default=[2, 8])
    p.add_argument("--m", type=ints, default=[1, 2, 4, 8, 16, 32, 64])
    p.add_argument("--variants", type=lambda s: s.split(","), default=["fastpath", "triton-default", "marlin"])
    p.add_argument("--tuned-configs", default=None,
                   help="folder of 'python -m moe_tuning tune' output files, for the triton-tuned variant")
    p.add_argument("--routings", type=int, default=8, help="layer calls (distinct routings) per CUDA graph")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--deadline-s", type=float, default=240.0)
    p.add_argument("--reserve-s", type=float, default=8.0, help="stop tuning when this little time is left")
    p.add_argument("--dry-run", action="store_true", help="tiny shapes on CPU under TRITON_INTERPRET=1")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if "triton-tuned" in args.variants and not args.tuned_configs:
        raise SystemExit("--variants triton-tuned needs --tuned-configs FOLDER (the tuner's output)")
    if args.dry_run:
        use_tiny_shapes()
    bench = Bench(args)
    threading.Thread(target=bench.warm_baselines, daemon=True).start()
    t0 = time.monotonic()
    try:
        bench.run()
        bench.notes.append(f"done in {time.monotonic() - t0:.0f} s")
    except Exception as exc:  # noqa: BLE001 (keep what was measured)
        bench.errors.append(f"aborted: {exc!r} {traceback.format_exc()[-1500:]}")
    bench.write()
    print("\n".join(bench.errors[-20:]), file=sys.stderr)
    print("\n".join(bench.notes))
    print(bench.table())
    return 1 if any("CHECK FAILED" in e or "aborted" in e for e in bench.errors) else 0


if __name__ == "__main__":
    sys.exit(main())
