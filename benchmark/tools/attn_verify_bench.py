"""Check and time patch 0007's grouped verify attention on one GPU, beside SGLang's own kernels.

Run on a GPU host with the fork's site on PYTHONPATH (``source test/gpu/device_env.sh``):

    python3 benchmark/attn_verify_bench.py --out $OUT --budget-s 200

1. Correctness at Kimi shapes (MLA: 576/512, one latent KV head, 32 or 8 query heads per rank) and
   a GQA shape (head dim 128), bf16, random context lengths, page sizes 1 and 16, chain and tree
   masks, inside a CUDA graph replayed on other lengths than it was captured with: relative error
   against a float32 torch reference (limit 1e-2); SGLang's extend kernel on the same inputs beside.
2. Timing, MLA, K draft tokens (4), bs 1 and 8, context 1k/8k/32k, page size 1: the new kernel
   (``grouped``), SGLang 0.5.17's ``extend_attention_fwd`` (what verify runs today, ``extend``)
   and its ``decode_attention_fwd`` with one query per request (``decode``), each captured in a
   CUDA graph and timed with ``triton.testing.do_bench`` (median; L2 flushed before every call).
   Each point carries its byte floor (the KV bytes read at 4.8e12 B/s) and the achieved GB/s.
3. A small sweep of the new kernel's split and tile settings at a few points.

The new kernel is taken from the patch that creates it (0007 when written), so the check measures
the committed patch whichever bundle is installed. Writes ``results.json`` (records with mode
``attn_verify``/``attn_decode``, metric ``latency_us``) and prints a table last.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import torch

ROOT = Path(__file__).resolve().parents[2]
KERNEL_FILE = "python/sglang/kernels/ops/attention/verify_grouped_attention.py"
HBM_BYTES_PER_S = 4.8e12  # H200
MLA_LK, MLA_LV = 576, 512
DECODE_MAX_KV_SPLITS = 256  # what the triton backend sets for Kimi (262144 context, 132 SMs)


def file_from_patch(patch: Path, path: str) -> str:
    """The text of a file that ``patch`` creates (one hunk, every line added)."""
    text = patch.read_text()
    body = text[text.index(f"diff --git a/{path} b/{path}") :]
    end = body.find("\ndiff --git ", 1)
    body = body if end == -1 else body[: end + 1]
    assert "\nnew file mode " in body, f"{path} is not a new file in {patch.name}"
    lines = body[body.index("\n@@ ") + 1 :].splitlines()[1:]
    out = []
    for line in lines:
        if line.startswith("\\"):  # "\ No newline at end of file"
            continue
        assert line.startswith("+"), f"unexpected line in a new-file hunk: {line[:40]!r}"
        out.append(line[1:])
    return "\n".join(out) + "\n"


def patch_creating(path: str, patch_dir: Path = ROOT / "patches") -> Path:
    """The one patch of the series folder that creates ``path`` (found by content: numbers change)."""
    header = f"diff --git a/{path} b/{path}\nnew file mode "
    found = [p for p in sorted(patch_dir.glob("[0-9]*.patch")) if header in p.read_text()]
    assert len(found) == 1, f"patches creating {path}: {[p.name for p in found]}"
    return found[0]


def load_verify_kernel(patch_dir: Path = ROOT / "patches"):
    """``verify_grouped_attention`` from the committed patch, imported as a standalone module."""
    patch = patch_creating(KERNEL_FILE, patch_dir)
    folder = Path(tempfile.mkdtemp(prefix="verify-kernel-"))
    path = folder / "verify_grouped_attention.py"
    path.write_text(file_from_patch(patch, KERNEL_FILE))
    spec = importlib.util.spec_from_file_location("fastpath_verify_grouped_attention", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, patch.name


# ----------------------------------------------------------------------------- problems


def make_problem(lens: list[int], k: int, heads: int, kv_heads: int, lk: int, lv: int, page: int,
                 tree: bool, dtype: torch.dtype, seed: int, spare_slots: int = 0) -> dict:
    """A paged KV pool with the requests' prefixes scattered over it, draft KV and queries."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    dev = "cuda"
    pages_per_req = [-(-n // page) for n in lens]
    num_pages = sum(pages_per_req) + 1 + spare_slots // page
    order = torch.randperm(num_pages, device=dev, generator=g)
    slots, first = [], 0
    for n, p in zip(lens, pages_per_req):
        pages = order[first:first + p]
        first += p
        pos = torch.arange(n, device=dev)
        slots.append(pages[pos // page] * page + pos % page)
    pool = num_pages * page
    mla = lv < lk
    key = torch.randn(pool, kv_heads, lk, device=dev, generator=g, dtype=torch.float32).to(dtype)
    value = key[..., :lv] if mla else torch.randn(pool, kv_heads, lv, device=dev, generator=g).to(dtype)
    bs = len(lens)
    q = torch.randn(bs * k, heads, lk, device=dev, generator=g).to(dtype)
    draft_k = torch.randn(bs * k, kv_heads, lk, device=dev, generator=g).to(dtype)
    draft_v = draft_k[..., :lv].contiguous() if mla else torch.randn(bs * k, kv_heads, lv, device=dev,
                                                                      generator=g).to(dtype)
    masks = []
    for _ in lens:
        m = torch.ones(k, k, dtype=torch.bool, device=dev).tril()
        if tree:  # each token sees itself and a random ancestor chain
            m = torch.eye(k, dtype=torch.bool, device=dev)
            parent = [-1] + [int(torch.randint(0, i, (1,))) for i in range(1, k)]
            for i in range(k):
                j = i
                while j >= 0:
                    m[i, j] = True
                    j = parent[j]
        masks.append(m)
    full = [torch.cat([torch.ones(k, n, dtype=torch.bool, device=dev), m], 1).flatten() for n, m in zip(lens, masks)]
    return {
        "q": q, "draft_k": draft_k, "draft_v": draft_v, "key": key, "value": value,
        "kv_indptr": torch.tensor([0] + lens, device=dev).cumsum(0).to(torch.int32),
        "kv_indices": torch.cat(slots).to(torch.int64),
        "qo_indptr": torch.arange(0, (bs + 1) * k, k, device=dev, dtype=torch.int32),
        "custom_mask": torch.cat(full).to(torch.uint8),
        "mask_indptr": torch.tensor([0] + [int(x.numel()) for x in full], device=dev).cumsum(0),
        "draft_masks": masks, "lens": lens, "k": k, "heads": heads, "kv_heads": kv_heads,
        "lk": lk, "lv": lv, "page": page, "tree": tree, "sm_scale": lk ** -0.5,
    }


def paged(buf: torch.Tensor, page: int) -> torch.Tensor:
    return buf if page == 1 else buf.view(-1, page, *buf.shape[1:])


def reference(x: dict) -> torch.Tensor:
    """float32 attention per request: prefix keys all visible, draft keys under the mask."""
    k, group = x["k"], x["heads"] // x["kv_heads"]
    out = torch.empty(x["q"].shape[0], x["heads"], x["lv"], device="cuda")
    indptr = x["kv_indptr"].tolist()
    for b, n in enumerate(x["lens"]):
        slots = x["kv_indices"][indptr[b]:indptr[b + 1]]
        rows = slice(b * k, (b + 1) * k)
        keys = torch.cat([x["key"][slots], x["draft_k"][rows]]).float().repeat_interleave(group, 1)
        values = torch.cat([x["value"][slots], x["draft_v"][rows]]).float().repeat_interleave(group, 1)
        scores = torch.einsum("thd,nhd->htn", x["q"][rows].float(), keys) * x["sm_scale"]
        seen = torch.cat([torch.ones(k, n, dtype=torch.bool, device="cuda"), x["draft_masks"][b]], 1)
        probs = scores.masked_fill(~seen, float("-inf")).softmax(-1)
        out[rows] = torch.einsum("htn,nhd->thd", probs, values)
    return out


# ----------------------------------------------------------------------------- kernels


class Kernels:
    def __init__(self, verify_module) -> None:
        from sglang.kernels.ops.attention.decode_attention import decode_attention_fwd
        from sglang.kernels.ops.attention.extend_attention import extend_attention_fwd
        from sglang.kernels.ops.attention.metadata import get_num_kv_splits_triton

        self.verify = verify_module.verify_grouped_attention_fwd
        self.tile = verify_module.verify_grouped_tile
        self.extend_fwd = extend_attention_fwd
        self.decode_fwd = decode_attention_fwd
        self.num_kv_splits = get_num_kv_splits_triton
        self.sms = torch.cuda.get_device_properties(0).multi_processor_count
        try:  # forward_decode passes use_pdl=is_arch_support_pdl()
            from sgl_kernel.utils import is_arch_support_pdl

            self.use_pdl = bool(is_arch_support_pdl())
        except ImportError:
            self.use_pdl = False

    def grouped(self, x: dict, o: torch.Tensor, **kw) -> Callable[[], None]:
        args = (x["q"], x["draft_k"], x["draft_v"], o, paged(x["key"], x["page"]), paged(x["value"], x["page"]),
                x["kv_indptr"], x["kv_indices"], x["k"], x["sm_scale"])
        extra = {"custom_mask": x["custom_mask"], "mask_indptr": x["mask_indptr"]} if x["tree"] else {}
        return lambda: self.verify(*args, page_size=x["page"], **extra, **kw)

    def extend(self, x: dict, o: torch.Tensor) -> Callable[[], None]:
        # As the triton backend calls it for target verify (the verify mask is passed at topk 1 too).
        return lambda: self.extend_fwd(
            x["q"], x["draft_k"], x["draft_v"], o, paged(x["key"], x["page"]), paged(x["value"], x["page"]),
            x["qo_indptr"], x["kv_indptr"], x["kv_indices"], x["custom_mask"], True, x["mask_indptr"], x["k"],
            1.0, 1.0, x["sm_scale"], page_size=x["page"])

    def decode(self, x: dict) -> tuple[Callable[[], None], torch.Tensor]:
        """One query per request over the same prefixes, as forward_decode runs it for MLA."""
        bs, heads = len(x["lens"]), x["heads"]
        q = x["q"][:: x["k"]].contiguous()
        o = torch.empty(bs, heads, x["lv"], device="cuda", dtype=q.dtype)
        logits = torch.empty(bs, heads, DECODE_MAX_KV_SPLITS, x["lv"], device="cuda", dtype=torch.float32)
        lse = torch.empty(bs, heads, DECODE_MAX_KV_SPLITS, device="cuda", dtype=torch.float32)
        splits = torch.empty(bs, device="cuda", dtype=torch.int32)
        seq_lens = x["kv_indptr"][1:] - x["kv_indptr"][:-1]
        self.num_kv_splits[(1,)](splits, seq_lens, bs, 1, heads, x["kv_heads"], DECODE_MAX_KV_SPLITS, self.sms,
                                 MAX_NUM_SEQ=256)
        return (lambda: self.decode_fwd(q, paged(x["key"], x["page"]), paged(x["value"], x["page"]), o,
                                        x["kv_indptr"], x["kv_indices"], logits, lse, splits, DECODE_MAX_KV_SPLITS,
                                        x["sm_scale"], 1.0, 1.0, has_mla=x["lv"] < x["lk"],
                                        use_pdl=self.use_pdl)), o


def capture(fn: Callable[[], None]) -> torch.cuda.CUDAGraph:
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()  # compile and warm outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph


def time_us(fn: Callable[[], None]) -> tuple[float, float, float]:
    """Median, p20, p80 of one graph replay in microseconds (do_bench flushes L2 before each)."""
    import triton.testing

    graph = capture(fn)
    med, p20, p80 = triton.testing.do_bench(graph.replay, warmup=20, rep=150, quantiles=[0.5, 0.2, 0.8])
    del graph
    return med * 1e3, p20 * 1e3, p80 * 1e3


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).abs().max() / b.float().abs().max())


# ----------------------------------------------------------------------------- phases


CHECKS = [  # name, lens, k, heads, kv_heads, lk, lv, page, tree
    ("mla-h32-k4-p1", [1000, 9000, 57], 4, 32, 1, MLA_LK, MLA_LV, 1, False),
    ("mla-h8-k4-p1-33k", [33000, 300], 4, 8, 1, MLA_LK, MLA_LV, 1, False),
    ("mla-h32-k8-p16-tree", [5000, 17], 8, 32, 1, MLA_LK, MLA_LV, 16, True),
    ("mla-h8-k1-bs8", [1, 40, 700, 1500, 2500, 3100, 64, 4000], 1, 8, 1, MLA_LK, MLA_LV, 1, False),
    ("mla-h32-k3-p64", [2000, 129], 3, 32, 1, MLA_LK, MLA_LV, 64, False),
    ("gqa-h32-kv8-k4-p1", [2000, 100, 7000], 4, 32, 8, 128, 128, 1, False),
    ("gqa-h16-kv4-k6-p16-tree", [3000, 31], 6, 16, 4, 128, 128, 16, True),
]


def run_checks(kern: Kernels, log) -> list[dict]:
    out = []
    for i, (name, lens, k, heads, kv_heads, lk, lv, page, tree) in enumerate(CHECKS):
        x = make_problem(lens, k, heads, kv_heads, lk, lv, page, tree, torch.bfloat16, seed=i)
        ref = reference(x)
        o = torch.full((len(lens) * k, heads, lv), float("nan"), device="cuda", dtype=torch.bfloat16)
        kern.grouped(x, o)()
        o_ext = torch.full_like(o, float("nan"))
        kern.extend(x, o_ext)()
        torch.cuda.synchronize()
        rec = {"name": name, "lens": lens, "k": k, "heads": heads, "kv_heads": kv_heads, "page": page, "tree": tree,
               "rel_err": rel_err(o, ref), "nan": bool(o.isnan().any()), "extend_rel_err": rel_err(o_ext, ref)}
        rec["ok"] = rec["rel_err"] <= 1e-2 and not rec["nan"]
        out.append(rec)
        log(f"check {name}: rel_err {rec['rel_err']:.2e} (extend {rec['extend_rel_err']:.2e}) "
            f"{'ok' if rec['ok'] else 'FAIL'}")
    out.append(graph_replay_check(kern, log))
    return out


def graph_replay_check(kern: Kernels, log) -> dict:
    """Capture at one set of lengths, replay after rewriting the device metadata for others."""
    k, heads = 4, 32
    small = make_problem([300, 2000], k, heads, 1, MLA_LK, MLA_LV, 1, False, torch.bfloat16, seed=11)
    large = make_problem([20000, 700], k, heads, 1, MLA_LK, MLA_LV, 1, False, torch.bfloat16, seed=12)
    x = dict(small)
    for name in ("q", "draft_k", "draft_v", "kv_indptr"):
        x[name] = small[name].clone()
    pool = max(small["key"].shape[0], large["key"].shape[0])
    key = torch.zeros(pool, 1, MLA_LK, device="cuda", dtype=torch.bfloat16)
    key[: small["key"].shape[0]] = small["key"]
    x["key"], x["value"] = key, key[..., :MLA_LV]
    indices = torch.zeros(sum(large["lens"]), device="cuda", dtype=torch.int64)
    indices[: small["kv_indices"].numel()] = small["kv_indices"]
    x["kv_indices"] = indices
    o = torch.empty(2 * k, heads, MLA_LV, device="cuda", dtype=torch.bfloat16)
    graph = capture(kern.grouped(x, o))
    o.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    first = rel_err(o, reference(small))
    key[: large["key"].shape[0]] = large["key"]
    indices.copy_(large["kv_indices"])
    for name in ("q", "draft_k", "draft_v", "kv_indptr"):
        x[name].copy_(large[name])
    o.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    second = rel_err(o, reference({**large, "key": key, "value": key[..., :MLA_LV]}))
    rec = {"name": "graph-replay-new-lengths", "rel_err": max(first, second), "captured_rel_err": first,
           "replayed_rel_err": second, "nan": bool(o.isnan().any())}
    rec["ok"] = rec["rel_err"] <= 1e-2 and not rec["nan"]
    log(f"check {rec['name']}: captured {first:.2e}, replayed on other lengths {second:.2e} "
        f"{'ok' if rec['ok'] else 'FAIL'}")
    return rec


def kv_bytes(x: dict) -> int:
    """KV bytes one call must read: the prefixes (latent + rope for MLA, K and V otherwise)."""
    per_token = x["kv_heads"] * (x["lk"] + (0 if x["lv"] < x["lk"] else x["lv"])) * x["key"].element_size()
    return sum(x["lens"]) * per_token


def point_record(mode: str, variant: str, x: dict, k: int, ctx: int, us: tuple[float, float, float],
                 **extra) -> dict:
    nbytes = kv_bytes(x)
    return {"variant": variant, "config": "tp-rank", "backend": "triton", "mode": mode, "bs": len(x["lens"]),
            "k": k, "topk": 1, "ctx": ctx, "heads": x["heads"], "metric": "latency_us", "value": round(us[0], 3),
            "p20": round(us[1], 3), "p80": round(us[2], 3), "floor_bytes": nbytes,
            "floor_us": round(nbytes / HBM_BYTES_PER_S * 1e6, 3),
            "gbps": round(nbytes / (us[0] * 1e-6) / 1e9, 1), "page": 1, **extra}


def run_timing(kern: Kernels, args, deadline: float, log) -> tuple[list[dict], list[str]]:
    records, skipped = [], []
    for heads in args.heads:
        for bs in args.bs:
            for ctx in args.ctx:
                if time.time() > deadline:
                    skipped.append(f"h{heads} bs{bs} ctx{ctx}")
                    continue
                x = make_problem([ctx] * bs, args.k, heads, 1, MLA_LK, MLA_LV, 1, False, torch.bfloat16, seed=ctx)
                o = torch.empty(bs * args.k, heads, MLA_LV, device="cuda", dtype=torch.bfloat16)
                grouped = time_us(kern.grouped(x, o))
                extend = time_us(kern.extend(x, torch.empty_like(o)))
                decode_fn, _ = kern.decode(x)
                decode = time_us(decode_fn)
                records += [point_record("attn_verify", "grouped", x, args.k, ctx, grouped),
                            point_record("attn_verify", "extend", x, args.k, ctx, extend),
                            point_record("attn_decode", "decode", x, 1, ctx, decode)]
                log(f"time h{heads} bs{bs} ctx{ctx}: grouped {grouped[0]:.1f} us, extend {extend[0]:.1f} us, "
                    f"decode {decode[0]:.1f} us")
                del x, o
                torch.cuda.empty_cache()
    return records, skipped


SWEEP_POINTS = [(32, 1, 8192), (32, 1, 32768), (8, 1, 32768), (32, 8, 8192)]
SWEEP_CONFIGS = [
    {},
    {"min_split_len": 256},
    {"min_split_len": 512},
    {"min_split_len": 2048},
    {"min_split_len": 256, "max_kv_splits": 128},
    {"config": {"block_h": 16}},
    {"config": {"block_h": 4, "num_warps": 4}},
    {"config": {"block_n": 64, "num_stages": 1}},
]


def run_sweep(kern: Kernels, args, deadline: float, log) -> list[dict]:
    out = []
    for heads, bs, ctx in SWEEP_POINTS:
        x = make_problem([ctx] * bs, args.k, heads, 1, MLA_LK, MLA_LV, 1, False, torch.bfloat16, seed=ctx + 1)
        o = torch.empty(bs * args.k, heads, MLA_LV, device="cuda", dtype=torch.bfloat16)
        for cfg in SWEEP_CONFIGS:
            if time.time() > deadline:
                return out
            try:
                us = time_us(kern.grouped(x, o, **cfg))
                out.append(point_record("attn_verify", "grouped-sweep", x, args.k, ctx, us, settings=cfg))
                log(f"sweep h{heads} bs{bs} ctx{ctx} {json.dumps(cfg)}: {us[0]:.1f} us")
            except Exception as e:  # a tile that does not fit this GPU is a finding, not a crash
                out.append({"heads": heads, "bs": bs, "ctx": ctx, "settings": cfg, "error": repr(e)[:300]})
                log(f"sweep h{heads} bs{bs} ctx{ctx} {json.dumps(cfg)}: error {e!r}"[:300])
    return out


def table(records: list[dict]) -> str:
    rows = {}
    for r in records:
        if r.get("variant") in ("grouped", "extend", "decode"):
            rows.setdefault((r["heads"], r["bs"], r["ctx"]), {})[r["variant"]] = r
    lines = ["heads bs   ctx | grouped us (GB/s) | extend us | decode us | grouped/decode | extend/grouped | floor us",
             "--------------+-------------------+-----------+-----------+----------------+----------------+---------"]
    for (heads, bs, ctx), v in sorted(rows.items()):
        g, e, d = v["grouped"], v["extend"], v["decode"]
        lines.append(f"{heads:5d} {bs:2d} {ctx:5d} | {g['value']:8.1f} ({g['gbps']:6.0f}) | {e['value']:9.1f} | "
                     f"{d['value']:9.1f} | {g['value'] / d['value']:14.2f} | {e['value'] / g['value']:14.1f} | "
                     f"{g['floor_us']:8.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=240.0, help="stop starting new timings after this")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--bs", type=lambda s: [int(v) for v in s.split(",")], default=[1, 8])
    ap.add_argument("--ctx", type=lambda s: [int(v) for v in s.split(",")], default=[1024, 8192, 32768])
    ap.add_argument("--heads", type=lambda s: [int(v) for v in s.split(",")], default=[32, 8])
    ap.add_argument("--no-sweep", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.time()
    deadline = t0 + args.budget_s
    args.out.mkdir(parents=True, exist_ok=True)
    log_file = open(args.out / "attn_verify_bench.log", "a")

    def log(msg: str) -> None:
        line = f"[{time.time() - t0:6.1f}s] {msg}"
        print(line, flush=True)
        log_file.write(line + "\n")
        log_file.flush()

    import triton

    verify_module, patch_name = load_verify_kernel()
    kern = Kernels(verify_module)
    meta = {"gpu": torch.cuda.get_device_name(0), "sms": kern.sms, "torch": torch.__version__,
            "triton": triton.__version__, "kernel_from": patch_name, "bandwidth_bytes_per_s": HBM_BYTES_PER_S,
            "argv": sys.argv, "timing": "CUDA graph of one call, triton.testing.do_bench median (L2 flushed)",
            "decode_max_kv_splits": DECODE_MAX_KV_SPLITS}
    log(f"{meta['gpu']} ({kern.sms} SMs), torch {torch.__version__}, triton {triton.__version__}, "
        f"kernel from {patch_name}")
    result = {"schema": "sglang-fastpath-attn/1", "meta": meta}
    result["checks"] = run_checks(kern, log)
    (args.out / "results.json").write_text(json.dumps(result, indent=1))
    sweep_share = 0.0 if args.no_sweep else 0.3
    records, skipped = run_timing(kern, args, deadline - sweep_share * max(0.0, deadline - time.time()), log)
    result.update(records=records, skipped=skipped)
    (args.out / "results.json").write_text(json.dumps(result, indent=1))
    if not args.no_sweep:
        result["sweep"] = run_sweep(kern, args, deadline, log)
    result["elapsed_s"] = round(time.time() - t0, 1)
    (args.out / "results.json").write_text(json.dumps(result, indent=1))
    ok = all(c["ok"] for c in result["checks"])
    log(f"checks {'all ok' if ok else 'FAILED'}; {len(records) // 3} timing points, skipped {skipped}")
    print(table(records), flush=True)
    log_file.write(table(records) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
