"""Check, time and sweep patch 0007's grouped verify attention on one GPU, beside SGLang's own kernels.

Run on a GPU host with the fork's site on PYTHONPATH (``source test/gpu/device_env.sh``). The sweep of
issue 18 (about 120 s on an H200; ``--budget-s`` stops starting new work after that many seconds):

    python3 benchmark/attn_verify_bench.py --out $OUT/attn --sweep-full --budget-s 140

Add ``--flashmla-so .carry/flashmla.zip`` to time FlashMLA beside it (the slim bundle strips
``sgl_kernel/flashmla_ops.abi3.so``; ``--pack-flashmla WHEEL ZIP`` makes that 3 MB zip on any machine
from the sglang-kernel 0.4.5 wheel). Without it, FlashMLA is skipped with a one-line reason.

1. Correctness at Kimi shapes (MLA: 576/512, one latent KV head, 32 or 8 query heads per rank) and
   a GQA shape (head dim 128), bf16, random context lengths, page sizes 1, 16 and 64, chain and tree
   masks, the default settings and value splits (``dv_splits`` 2 and 4), inside a CUDA graph replayed on
   other lengths than it was captured with: relative error against a float32 torch reference (limit
   1e-2); SGLang's extend kernel on the same inputs beside.
2. Timing, MLA, K draft tokens (4), H 32/8 x bs 1/8 x context 1k/8k/32k, page size 1 (slots scattered
   over the pool): the new kernel with its default settings (``grouped``), SGLang 0.5.17's
   ``extend_attention_fwd`` (what verify runs without the patch, ``extend``), its ``decode_attention_fwd``
   with one query per request (``decode``), the new kernel on the same decode inputs without extend tokens
   (``grouped-decode``, patch 0035), the new kernel on 64-token pages (``grouped-p64``, the layout
   FlashMLA reads) and FlashMLA (``flashmla``, page 64) where it loads.
   Method: N back-to-back calls captured in ONE CUDA graph, call i reading its own copy of the KV
   (disjoint slots of one pool; the N copies together at least 4x the 50 MB L2, N >= ``--calls``),
   median replay time / N. The previous method (one call per graph replay, ``triton.testing.do_bench``
   with L2 flushed before every replay: it adds the fixed cost of a replay) is kept for the decode
   kernel and the default grouped kernel (``decode-replay1``, ``grouped-replay1``), so the change of
   method shows. Each point carries its byte floor (the KV bytes the call must read, context x 1152 B
   per request, at 4.8e12 B/s) and the achieved GB/s.
3. Sweep of the new kernel's settings at the same 12 points (``--sweep-full``): stage A runs every tile
   of ``SWEEP_TILES`` (heads per program, KV tokens per step, warps, stages, value splits) with the
   default split policy; stage B runs the 3 best tiles of each point at the split counts that give
   0.25-8 programs per SM. Each variant is checked against the float reference (<= 1e-2) before it is
   timed. The kernels are compiled first, in parallel worker processes that share Triton's cache
   (``--compile-workers``). Without ``--sweep-full``, a small stage A at 4 points; ``--no-sweep``: none.

The new kernel is taken from the patch that creates it (0007 when written), so the run measures the
committed patch whichever bundle is installed. Writes ``results.json`` (records with mode
``attn_verify``/``attn_decode``, metric ``latency_us``, ``k``, ``bs``, ``ctx``, ``heads``, ``variant``,
``floor_us``, ``gbps``; ``checks``, ``sweep``, ``best``) and ``attn_verify_bench.log``, and prints the
timing table, the sweep's ranking and, last, the best setting per point against the decode kernel.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Callable

import torch

ROOT = Path(__file__).resolve().parents[2]
KERNEL_FILE = "python/sglang/kernels/ops/attention/verify_grouped_attention.py"
HBM_BYTES_PER_S = 4.8e12  # H200
TARGET_SHARE = 0.5  # issue 18: at least half the HBM bandwidth at context >= 8k
TARGET_DECODE_RATIO = 2.0  # issue 18: at most twice the one-token decode kernel
L2_BYTES = 50 * 2**20  # H200
ROTATE_BYTES = 4 * L2_BYTES  # the KV copies of one graph together
MAX_CALLS = 256
MLA_LK, MLA_LV = 576, 512
DECODE_MAX_KV_SPLITS = 256  # what the triton backend sets for Kimi (262144 context, 132 SMs)
FLASHMLA_PAGE = 64
FLASHMLA_SO = "sgl_kernel/flashmla_ops.abi3.so"
FLASHMLA_WHEEL = "sglang_kernel-0.4.5-cp310-abi3-manylinux2014_x86_64.whl"
FLASHMLA_SO_BYTES = (14_980_816, 3_167_112)  # in that wheel: uncompressed, deflated
DEVICE = "cuda"  # the CPU tests of the harness set "cpu"


def _file_diff(text: str, path: str) -> str:
    """The part of a patch's ``text`` that changes ``path``: its ``diff --git`` header up to the next one."""
    body = text[text.index(f"diff --git a/{path} b/{path}\n") :]
    end = body.find("\ndiff --git ", 1)
    return body if end == -1 else body[: end + 1]


def file_from_patch(patch: Path, path: str) -> str:
    """The text of a file that ``patch`` creates (one hunk, every line added)."""
    body = _file_diff(patch.read_text(), path)
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


def file_from_series(path: str, patch_dir: Path = ROOT / "patches") -> str:
    """The text of ``path`` as the series leaves it: the patch that creates it, then the hunks of every later
    patch of the folder that changes it, applied in order (their context must match exactly)."""
    first = patch_creating(path, patch_dir)
    lines = file_from_patch(first, path).splitlines()
    header = f"diff --git a/{path} b/{path}\n"
    for patch in sorted(patch_dir.glob("[0-9]*.patch")):
        text = patch.read_text()
        if patch.name <= first.name or header not in text:
            continue
        shift = 0
        for hunk in _file_diff(text, path).split("\n@@ ")[1:]:
            head, *rows = hunk.split("\n")
            (start, n_old), (_, n_new) = ((int(v) for v in (r[1:] + ",1").split(",")[:2]) for r in head.split()[:2])
            start += shift - (n_old > 0)
            old, new = [], []
            for r in rows:  # as many rows as the header counts (a signature "-- " may follow the last hunk)
                if len(old) == n_old and len(new) == n_new:
                    break
                if r[:1] in (" ", "-"):
                    old.append(r[1:])
                if r[:1] in (" ", "+"):
                    new.append(r[1:])
            assert lines[start:start + len(old)] == old, f"{patch.name} does not apply to {path}"
            lines[start:start + len(old)] = new
            shift += len(new) - len(old)
    return "\n".join(lines) + "\n"


def module_from_series(path: str, name: str, patch_dir: Path = ROOT / "patches", folder: Path | None = None):
    """The file ``path`` as the series leaves it (``file_from_series``), written into ``folder`` (a new temporary
    folder by default) and executed as module ``name``, which ``sys.modules`` holds from before it runs."""
    folder = folder or Path(tempfile.mkdtemp(prefix="fastpath-series-"))
    file = folder / Path(path).name
    file.write_text(file_from_series(path, patch_dir))
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_verify_kernel(patch_dir: Path = ROOT / "patches"):
    """``verify_grouped_attention`` from the committed patches, imported as a standalone module."""
    patch = patch_creating(KERNEL_FILE, patch_dir)
    return module_from_series(KERNEL_FILE, "fastpath_verify_grouped_attention", patch_dir), patch.name


# ----------------------------------------------------------------------------- problems


def make_problem(lens: list[int], k: int, heads: int, kv_heads: int, lk: int, lv: int, page: int,
                 tree: bool, dtype: torch.dtype, seed: int, spare_slots: int = 0) -> dict:
    """A paged KV pool with the requests' prefixes scattered over it, draft KV and queries."""
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    dev = DEVICE
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
    out = torch.empty(x["q"].shape[0], x["heads"], x["lv"], device=DEVICE)
    indptr = x["kv_indptr"].tolist()
    for b, n in enumerate(x["lens"]):
        slots = x["kv_indices"][indptr[b]:indptr[b + 1]]
        rows = slice(b * k, (b + 1) * k)
        seen = torch.cat([torch.ones(k, n, dtype=torch.bool, device=DEVICE), x["draft_masks"][b]], 1)
        keys = torch.cat([x["key"][slots], x["draft_k"][rows]]).float()
        values = torch.cat([x["value"][slots], x["draft_v"][rows]]).float()
        if x["kv_heads"] == 1:  # MLA: one latent for every head, no copy per head
            scores = torch.einsum("thd,nd->htn", x["q"][rows].float(), keys[:, 0]) * x["sm_scale"]
            probs = scores.masked_fill(~seen, float("-inf")).softmax(-1)
            out[rows] = torch.einsum("htn,nd->thd", probs, values[:, 0])
            continue
        keys, values = keys.repeat_interleave(group, 1), values.repeat_interleave(group, 1)
        scores = torch.einsum("thd,nhd->htn", x["q"][rows].float(), keys) * x["sm_scale"]
        probs = scores.masked_fill(~seen, float("-inf")).softmax(-1)
        out[rows] = torch.einsum("htn,nhd->thd", probs, values)
    return out


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).abs().max() / b.float().abs().max())


# ----------------------------------------------------------------------------- kernels


class Kernels:
    def __init__(self, verify_module) -> None:
        from sglang.kernels.ops.attention.decode_attention import decode_attention_fwd
        from sglang.kernels.ops.attention.extend_attention import extend_attention_fwd
        from sglang.kernels.ops.attention.metadata import get_num_kv_splits_triton

        self.module = verify_module
        self.verify = verify_module.verify_grouped_attention_fwd
        self.extend_fwd = extend_attention_fwd
        self.decode_fwd = decode_attention_fwd
        self.num_kv_splits = get_num_kv_splits_triton
        self.sms = torch.cuda.get_device_properties(0).multi_processor_count
        try:  # forward_decode passes use_pdl=is_arch_support_pdl()
            from sgl_kernel.utils import is_arch_support_pdl

            self.use_pdl = bool(is_arch_support_pdl())
        except ImportError:
            self.use_pdl = False

    def plan(self, x: dict, **kw) -> dict:
        """The settings the wrapper resolves for this problem: tile keys, max_kv_splits, min_split_len."""
        return self.module.verify_grouped_plan(x["k"], len(x["lens"]), x["heads"], x["kv_heads"], x["lk"], x["lv"],
                                               x["lv"] < x["lk"], x["key"].element_size(), x["q"].device, **kw)

    def grouped(self, x: dict, o: torch.Tensor, kv_indices: torch.Tensor | None = None, **kw) -> Callable[[], None]:
        args = (x["q"], x["draft_k"], x["draft_v"], o, paged(x["key"], x["page"]), paged(x["value"], x["page"]),
                x["kv_indptr"], x["kv_indices"] if kv_indices is None else kv_indices, x["k"], x["sm_scale"])
        extra = {"custom_mask": x["custom_mask"], "mask_indptr": x["mask_indptr"]} if x["tree"] else {}
        return lambda: self.verify(*args, page_size=x["page"], **extra, **kw)

    def extend(self, x: dict, o: torch.Tensor, kv_indices: torch.Tensor | None = None) -> Callable[[], None]:
        # As the triton backend calls it for target verify (the verify mask is passed at topk 1 too).
        indices = x["kv_indices"] if kv_indices is None else kv_indices
        return lambda: self.extend_fwd(
            x["q"], x["draft_k"], x["draft_v"], o, paged(x["key"], x["page"]), paged(x["value"], x["page"]),
            x["qo_indptr"], x["kv_indptr"], indices, x["custom_mask"], True, x["mask_indptr"], x["k"],
            1.0, 1.0, x["sm_scale"], page_size=x["page"])

    def decode(self, x: dict) -> tuple[Callable[[torch.Tensor | None], Callable[[], None]], torch.Tensor]:
        """One query per request over the same prefixes, as forward_decode runs it for MLA: a factory of
        calls (one per KV copy) and the output."""
        bs, heads = len(x["lens"]), x["heads"]
        q = x["q"][:: x["k"]].contiguous()
        o = torch.empty(bs, heads, x["lv"], device=DEVICE, dtype=q.dtype)
        logits = torch.empty(bs, heads, DECODE_MAX_KV_SPLITS, x["lv"], device=DEVICE, dtype=torch.float32)
        lse = torch.empty(bs, heads, DECODE_MAX_KV_SPLITS, device=DEVICE, dtype=torch.float32)
        splits = torch.empty(bs, device=DEVICE, dtype=torch.int32)
        seq_lens = x["kv_indptr"][1:] - x["kv_indptr"][:-1]
        self.num_kv_splits[(1,)](splits, seq_lens, bs, 1, heads, x["kv_heads"], DECODE_MAX_KV_SPLITS, self.sms,
                                 MAX_NUM_SEQ=256)

        def call(kv_indices: torch.Tensor | None = None) -> Callable[[], None]:
            indices = x["kv_indices"] if kv_indices is None else kv_indices
            return lambda: self.decode_fwd(q, paged(x["key"], x["page"]), paged(x["value"], x["page"]), o,
                                           x["kv_indptr"], indices, logits, lse, splits, DECODE_MAX_KV_SPLITS,
                                           x["sm_scale"], 1.0, 1.0, has_mla=x["lv"] < x["lk"], use_pdl=self.use_pdl)
        return call, o

    def grouped_decode(self, x: dict, **kw) -> tuple[Callable[[torch.Tensor | None], Callable[[], None]],
                                                     torch.Tensor]:
        """``decode``'s queries and prefixes through the new kernel without extend tokens (patch 0035), as
        forward_decode calls it with SGLANG_ENABLE_TRITON_GROUPED_DECODE: a factory of calls and the output.
        ``kw``: the wrapper's tuning overrides (tile keys, max_kv_splits; none: its defaults)."""
        q = x["q"][:: x["k"]].contiguous()
        o = torch.empty(len(x["lens"]), x["heads"], x["lv"], device=DEVICE, dtype=q.dtype)

        def call(kv_indices: torch.Tensor | None = None) -> Callable[[], None]:
            indices = x["kv_indices"] if kv_indices is None else kv_indices
            return lambda: self.verify(q, None, None, o, paged(x["key"], x["page"]), paged(x["value"], x["page"]),
                                       x["kv_indptr"], indices, 1, x["sm_scale"], page_size=x["page"], **kw)
        return call, o


def decode_reference(x: dict) -> torch.Tensor:
    """``reference`` for ``decode``'s problem: each request's first query over its prefix alone."""
    return reference({**x, "q": x["q"][:: x["k"]], "k": 1, "draft_k": x["draft_k"][:0], "draft_v": x["draft_v"][:0],
                      "draft_masks": [torch.ones(1, 0, dtype=torch.bool, device=DEVICE)] * len(x["lens"])})


def load_flashmla(so_path: Path | None) -> tuple[object | None, str]:
    """``sgl_kernel.flash_mla`` with its ops loaded (from ``so_path``, a .so or a zip holding one, if given),
    or None and the reason in one line."""
    try:
        import sgl_kernel
    except Exception as e:  # noqa: BLE001
        return None, f"sgl_kernel does not import: {e!r}"[:200]
    if so_path is not None:
        path = Path(so_path)
        if path.suffix == ".zip":
            folder = Path(tempfile.mkdtemp(prefix="flashmla-"))
            with zipfile.ZipFile(path) as z:
                z.extract(Path(FLASHMLA_SO).name, folder)
            path = folder / Path(FLASHMLA_SO).name
        try:
            spec = importlib.util.spec_from_file_location("sgl_kernel.flashmla_ops", path)
            ops = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(ops)  # registers torch.ops.sgl_kernel's FlashMLA ops
            sys.modules["sgl_kernel.flashmla_ops"] = ops
            sgl_kernel.flashmla_ops = ops
        except Exception as e:  # noqa: BLE001
            return None, f"{path.name} does not load: {e!r}"[:200]
    try:
        import sgl_kernel.flash_mla as flash_mla

        if so_path is not None and getattr(flash_mla, "_flashmla_import_error", None) is not None:
            flash_mla = importlib.reload(flash_mla)  # imported before the ops were loaded
    except Exception as e:  # noqa: BLE001
        return None, f"sgl_kernel.flash_mla does not import: {e!r}"[:200]
    if getattr(flash_mla, "_flashmla_import_error", None) is not None:
        return None, (f"{FLASHMLA_SO} is missing (the slim bundle strips it; {FLASHMLA_SO_BYTES[0]:,} B, "
                      f"{FLASHMLA_SO_BYTES[1]:,} B compressed in {FLASHMLA_WHEEL}): pass --flashmla-so")
    if torch.cuda.get_device_capability(0)[0] != 9:
        return None, "FlashMLA's dense decode kernel is SM90 only"
    return flash_mla, ""


def pack_flashmla(wheel: Path, out: Path) -> int:
    """A zip holding only FlashMLA's ops library from the sglang-kernel wheel (about 3 MB, for a device call)."""
    with zipfile.ZipFile(wheel) as z, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as w:
        w.writestr(Path(FLASHMLA_SO).name, z.read(FLASHMLA_SO))
    return out.stat().st_size


# ----------------------------------------------------------------------------- timing


def capture(fn: Callable[[], None]) -> torch.cuda.CUDAGraph:
    return capture_calls([fn])


def capture_calls(fns: list[Callable[[], None]]) -> torch.cuda.CUDAGraph:
    """One CUDA graph of the calls, in order (each run once outside the capture first: compile and warm)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for fn in fns:
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for fn in fns:
            fn()
    torch.cuda.synchronize()
    return graph


def time_us(fn: Callable[[], None]) -> tuple[float, float, float]:
    """The previous method: median, p20, p80 of one graph replay of ONE call in microseconds (do_bench
    flushes L2 before each replay, and the replay's own fixed cost is in the number)."""
    import triton.testing

    graph = capture(fn)
    med, p20, p80 = triton.testing.do_bench(graph.replay, warmup=20, rep=150, quantiles=[0.5, 0.2, 0.8])
    del graph
    return med * 1e3, p20 * 1e3, p80 * 1e3


def graph_time_us(fns: list[Callable[[], None]], target_s: float = 0.03, min_reps: int = 5,
                  max_reps: int = 200) -> tuple[float, float, float]:
    """Median, p20, p80 per call in microseconds of one CUDA graph holding every call of ``fns`` back to back
    (each call on its own KV copy, so the KV comes from HBM), replayed ``min_reps`` or more times."""
    graph = capture_calls(fns)
    graph.replay()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    graph.replay()
    torch.cuda.synchronize()
    reps = max(min_reps, min(max_reps, int(target_s / max(time.perf_counter() - t0, 1e-6))))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for start, end in events:
        start.record()
        graph.replay()
        end.record()
    torch.cuda.synchronize()
    per_call = sorted(start.elapsed_time(end) * 1e3 / len(fns) for start, end in events)
    del graph

    def q(f: float) -> float:
        return per_call[min(len(per_call) - 1, int(f * len(per_call)))]
    return q(0.5), q(0.2), q(0.8)


def kv_bytes(x: dict) -> int:
    """KV bytes one call must read: the prefixes (latent + rope for MLA, K and V otherwise)."""
    per_token = x["kv_heads"] * (x["lk"] + (0 if x["lv"] < x["lk"] else x["lv"])) * x["key"].element_size()
    return sum(x["lens"]) * per_token


def copies_for(nbytes: int, min_calls: int) -> int:
    """Calls (KV copies) per timing graph: at least ``min_calls``, together at least ROTATE_BYTES."""
    return max(1, min(MAX_CALLS, max(min_calls, math.ceil(ROTATE_BYTES / max(nbytes, 1)))))


def point_record(mode: str, variant: str, x: dict, k: int, ctx: int, us: tuple[float, float, float],
                 **extra) -> dict:
    nbytes = kv_bytes(x)
    return {"variant": variant, "config": "tp-rank", "backend": "triton", "mode": mode, "bs": len(x["lens"]),
            "k": k, "topk": 1, "ctx": ctx, "heads": x["heads"], "metric": "latency_us", "value": round(us[0], 3),
            "p20": round(us[1], 3), "p80": round(us[2], 3), "floor_bytes": nbytes,
            "floor_us": round(nbytes / HBM_BYTES_PER_S * 1e6, 3),
            "gbps": round(nbytes / (us[0] * 1e-6) / 1e9, 1), "page": x["page"], **extra}


# ----------------------------------------------------------------------------- checks


CHECKS = [  # name, lens, k, heads, kv_heads, lk, lv, page, tree
    ("mla-h32-k4-p1", [1000, 9000, 57], 4, 32, 1, MLA_LK, MLA_LV, 1, False),
    ("mla-h8-k4-p1-33k", [33000, 300], 4, 8, 1, MLA_LK, MLA_LV, 1, False),
    ("mla-h32-k8-p16-tree", [5000, 17], 8, 32, 1, MLA_LK, MLA_LV, 16, True),
    ("mla-h8-k1-bs8", [1, 40, 700, 1500, 2500, 3100, 64, 4000], 1, 8, 1, MLA_LK, MLA_LV, 1, False),
    ("mla-h32-k3-p64", [2000, 129], 3, 32, 1, MLA_LK, MLA_LV, 64, False),
    ("gqa-h32-kv8-k4-p1", [2000, 100, 7000], 4, 32, 8, 128, 128, 1, False),
    ("gqa-h16-kv4-k6-p16-tree", [3000, 31], 6, 16, 4, 128, 128, 16, True),
]
# Value splits on the MLA checks (and the GQA one with a tree): the sweep's paths other than the default.
CHECK_VARIANTS = [
    ("dv2", {"dv_splits": 2, "num_warps": 4, "block_n": 16}, ("mla-", "gqa-h16")),
    ("dv4", {"dv_splits": 4}, ("mla-",)),
]


def check_jobs() -> list[dict]:
    """The compile jobs of ``run_checks`` (for the parallel precompile)."""
    jobs = []
    for name, lens, k, heads, kv_heads, lk, lv, page, tree in CHECKS:
        shape = {"lens": lens, "k": k, "heads": heads, "kv_heads": kv_heads, "lk": lk, "lv": lv, "page": page,
                 "tree": tree}
        jobs += [{"kind": "grouped", **shape, "kw": {}}, {"kind": "extend", **shape}]
        jobs += [{"kind": "grouped", **shape, "kw": kw} for _, kw, which in CHECK_VARIANTS if name.startswith(which)]
    return jobs


def run_checks(kern: Kernels, log) -> list[dict]:
    out = []
    for i, (name, lens, k, heads, kv_heads, lk, lv, page, tree) in enumerate(CHECKS):
        x = make_problem(lens, k, heads, kv_heads, lk, lv, page, tree, torch.bfloat16, seed=i)
        ref = reference(x)
        o = torch.full((len(lens) * k, heads, lv), float("nan"), device=DEVICE, dtype=torch.bfloat16)
        kern.grouped(x, o)()
        o_ext = torch.full_like(o, float("nan"))
        kern.extend(x, o_ext)()
        torch.cuda.synchronize()
        rec = {"name": name, "lens": lens, "k": k, "heads": heads, "kv_heads": kv_heads, "page": page, "tree": tree,
               "rel_err": rel_err(o, ref), "nan": bool(o.isnan().any()), "extend_rel_err": rel_err(o_ext, ref)}
        for label, kw, which in CHECK_VARIANTS:
            if name.startswith(which):
                o.fill_(float("nan"))
                kern.grouped(x, o, **kw)()
                torch.cuda.synchronize()
                rec[f"{label}_rel_err"] = rel_err(o, ref)
                rec["nan"] = rec["nan"] or bool(o.isnan().any())
        errs = [v for key, v in rec.items() if key.endswith("rel_err") and key != "extend_rel_err"]
        rec["ok"] = max(errs) <= 1e-2 and not rec["nan"]
        out.append(rec)
        variants = " ".join(f"{label} {rec[label + '_rel_err']:.2e}" for label, _, w in CHECK_VARIANTS
                            if name.startswith(w))
        log(f"check {name}: rel_err {rec['rel_err']:.2e} {variants} (extend {rec['extend_rel_err']:.2e}) "
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
    key = torch.zeros(pool, 1, MLA_LK, device=DEVICE, dtype=torch.bfloat16)
    key[: small["key"].shape[0]] = small["key"]
    x["key"], x["value"] = key, key[..., :MLA_LV]
    indices = torch.zeros(sum(large["lens"]), device=DEVICE, dtype=torch.int64)
    indices[: small["kv_indices"].numel()] = small["kv_indices"]
    x["kv_indices"] = indices
    o = torch.empty(2 * k, heads, MLA_LV, device=DEVICE, dtype=torch.bfloat16)
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


# ----------------------------------------------------------------------------- the 12 points


def make_point(bs: int, ctx: int, k: int, heads: int, copies: int, seed: int, pool: dict | None = None) -> dict:
    """One timing point, in ``make_problem``'s layout (page 1), its KV in ``copies`` disjoint copies of one
    pool: ``x["kv_indices"]`` is copy 0 (checked against ``x["ref"]``), ``x["rot_indices"]`` all of them.
    The pool (shared by the heads of one bs x ctx) also holds FlashMLA's 64-token pages: ``x["p64"]``.
    """
    dev = DEVICE
    g = torch.Generator(device=dev).manual_seed(seed)
    n = bs * ctx
    pages = -(-(ctx + k) // FLASHMLA_PAGE)
    if pool is None:
        region = -(-copies * n // FLASHMLA_PAGE) * FLASHMLA_PAGE  # copies' slots, then copy 0's FlashMLA pages
        total = region + bs * pages * FLASHMLA_PAGE
        key = torch.randn(total, 1, MLA_LK, device=dev, generator=g, dtype=torch.bfloat16)
        perm = torch.randperm(copies * n, device=dev, generator=g)
        rot = [perm[c * n:(c + 1) * n].contiguous() for c in range(copies)]
        draft_k = torch.randn(bs * k, 1, MLA_LK, device=dev, generator=g, dtype=torch.bfloat16)
        # FlashMLA / 64-token pages: copy 0 on its own pages (prefix + draft written there), the other
        # copies on random pages of the slot region (their values do not matter, only where they are).
        blocks0 = region // FLASHMLA_PAGE + torch.arange(bs * pages, device=dev).view(bs, pages)
        region_blocks = region // FLASHMLA_PAGE
        need = (copies - 1) * bs * pages
        reps = -(-need // region_blocks) if need else 0
        others = torch.cat([torch.randperm(region_blocks, device=dev, generator=g) for _ in range(reps)])[:need] \
            if need else torch.empty(0, dtype=torch.int64, device=dev)
        tables = [blocks0] + list(others.view(-1, bs, pages).unbind(0)) if need else [blocks0]
        pos = torch.arange(ctx + k, device=dev)
        for b in range(bs):
            slots = blocks0[b][pos // FLASHMLA_PAGE] * FLASHMLA_PAGE + pos % FLASHMLA_PAGE
            key[slots[:ctx]] = key[rot[0][b * ctx:(b + 1) * ctx]]
            key[slots[ctx:]] = draft_k[b * k:(b + 1) * k]
        p64_indices = []
        for t in tables:  # the same pages as token slots, for the grouped kernel at page 64
            slots = t[:, pos[:ctx] // FLASHMLA_PAGE] * FLASHMLA_PAGE + pos[:ctx] % FLASHMLA_PAGE
            p64_indices.append(slots.flatten().contiguous())
        pool = {"key": key, "rot": rot, "draft_k": draft_k, "tables": [t.to(torch.int32).contiguous() for t in tables],
                "p64_indices": p64_indices, "copies": copies}
    key, rot, draft_k = pool["key"], pool["rot"], pool["draft_k"]
    q = torch.randn(bs * k, heads, MLA_LK, device=dev, generator=g, dtype=torch.bfloat16)
    chain = torch.ones(k, k, dtype=torch.bool, device=dev).tril()
    full = torch.cat([torch.ones(k, ctx, dtype=torch.bool, device=dev), chain], 1).flatten()
    x = {
        "q": q, "draft_k": draft_k, "draft_v": draft_k[..., :MLA_LV].contiguous(), "key": key,
        "value": key[..., :MLA_LV],
        "kv_indptr": torch.arange(0, (bs + 1) * ctx, ctx, device=dev, dtype=torch.int32),
        "kv_indices": rot[0], "rot_indices": rot,
        "qo_indptr": torch.arange(0, (bs + 1) * k, k, device=dev, dtype=torch.int32),
        "custom_mask": full.repeat(bs).to(torch.uint8),
        "mask_indptr": torch.arange(0, (bs + 1) * full.numel(), full.numel(), device=dev),
        "draft_masks": [chain] * bs, "lens": [ctx] * bs, "k": k, "heads": heads, "kv_heads": 1,
        "lk": MLA_LK, "lv": MLA_LV, "page": 1, "tree": False, "sm_scale": MLA_LK ** -0.5, "pool": pool,
    }
    x["ref"] = reference(x)
    return x


def p64_view(x: dict) -> dict:
    """The same point on 64-token pages (FlashMLA's layout): copy i's prefix on copy i's block table."""
    pool = x["pool"]
    return {**x, "page": FLASHMLA_PAGE, "kv_indices": pool["p64_indices"][0], "rot_indices": pool["p64_indices"]}


class Points:
    """The timing points' problems, built once (the KV pool of a bs x ctx is shared by its head counts)."""

    def __init__(self, args) -> None:
        self.args, self.pools, self.points = args, {}, {}

    def keys(self) -> list[tuple[int, int, int]]:
        return [(h, b, c) for h in self.args.heads for b in self.args.bs for c in self.args.ctx]

    def get(self, heads: int, bs: int, ctx: int) -> dict:
        if (heads, bs, ctx) not in self.points:
            copies = copies_for(bs * ctx * MLA_LK * 2, self.args.calls)
            x = make_point(bs, ctx, self.args.k, heads, copies, seed=ctx + bs + heads,
                           pool=self.pools.get((bs, ctx)))
            self.pools[(bs, ctx)] = x["pool"]
            self.points[(heads, bs, ctx)] = x
        return self.points[(heads, bs, ctx)]


def grouped_calls(kern: Kernels, x: dict, o: torch.Tensor, **kw) -> list[Callable[[], None]]:
    return [kern.grouped(x, o, kv_indices=idx, **kw) for idx in x["rot_indices"]]


def flashmla_calls(flash_mla, x: dict) -> tuple[list[Callable[[], None]], Callable[[], torch.Tensor]]:
    """FlashMLA as SGLang's flashmla backend runs target verify: q [bs, K, H, 576] on 64-token pages that
    hold the prefix and the K draft tokens, causal; one call per KV copy, and a call that returns copy 0's out."""
    bs, k, heads, ctx = len(x["lens"]), x["k"], x["heads"], x["lens"][0]
    pool = x["pool"]
    q = x["q"].view(bs, k, heads, MLA_LK)
    cache = pool["key"].view(-1, FLASHMLA_PAGE, 1, MLA_LK)
    seqlens = torch.full((bs,), ctx + k, dtype=torch.int32, device=DEVICE)
    meta, splits = flash_mla.get_mla_metadata(seqlens, k * heads, 1)

    def call(table: torch.Tensor) -> torch.Tensor:
        return flash_mla.flash_mla_with_kvcache(q, cache, table, seqlens, MLA_LV, meta, splits,
                                                softmax_scale=x["sm_scale"], causal=True)[0]
    return [lambda t=t: call(t) for t in pool["tables"]], lambda: call(pool["tables"][0])


def timing_jobs(args) -> list[dict]:
    """The compile jobs of ``run_timing``: the default settings at each head count and batch size (the
    default split policy depends on bs), pages of 1 and 64, and SGLang's decode and extend kernels."""
    jobs = []
    for heads in args.heads:
        for bs in args.bs:
            shape = {"lens": [64] * bs, "k": args.k, "heads": heads, "kv_heads": 1, "lk": MLA_LK, "lv": MLA_LV,
                     "tree": False}
            jobs += [{"kind": "grouped", **shape, "page": 1, "kw": {}}, {"kind": "grouped", **shape, "page": 64,
                                                                          "kw": {}}]
            jobs += [{"kind": kind, **shape, "page": 1} for kind in ("decode", "grouped-decode", "extend")]
    return jobs


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def run_timing(kern: Kernels, points: Points, flash, args, deadline: float, log) -> tuple[list[dict], list[str]]:
    records, skipped = [], []
    flash_mla, flash_reason = flash
    for heads, bs, ctx in points.keys():
        if time.time() > deadline:
            skipped.append(f"h{heads} bs{bs} ctx{ctx}")
            continue
        x = points.get(heads, bs, ctx)
        calls = len(x["rot_indices"])
        method = {"timing": f"graph of {calls} calls, one KV copy each", "calls_per_graph": calls}
        old = {"timing": "one call per graph replay, L2 flushed (do_bench)", "calls_per_graph": 1}
        o = torch.empty(bs * args.k, heads, MLA_LV, device=DEVICE, dtype=torch.bfloat16)
        plan = kern.plan(x)
        kern.grouped(x, o)()
        err = rel_err(o, x["ref"])
        grouped = graph_time_us(grouped_calls(kern, x, o))
        grouped1 = time_us(kern.grouped(x, o))
        decode_call, _ = kern.decode(x)
        decode = graph_time_us([decode_call(idx) for idx in x["rot_indices"]])
        decode1 = time_us(decode_call())
        gdecode_call, gdecode_o = kern.grouped_decode(x)
        gdecode_call()()
        err_gdecode = rel_err(gdecode_o, decode_reference(x))
        gdecode = graph_time_us([gdecode_call(idx) for idx in x["rot_indices"]])
        xp = p64_view(x)
        kern.grouped(xp, o)()
        err_p64 = rel_err(o, x["ref"])
        grouped_p64 = graph_time_us(grouped_calls(kern, xp, o))
        recs = [point_record("attn_verify", "grouped", x, args.k, ctx, grouped, rel_err=err, settings=plan, **method),
                point_record("attn_verify", "grouped-replay1", x, args.k, ctx, grouped1, settings=plan, **old),
                point_record("attn_verify", "grouped-p64", xp, args.k, ctx, grouped_p64, rel_err=err_p64,
                             settings=plan, **method),
                point_record("attn_decode", "decode", x, 1, ctx, decode, **method),
                point_record("attn_decode", "decode-replay1", x, 1, ctx, decode1, **old),
                point_record("attn_decode", "grouped-decode", x, 1, ctx, gdecode, rel_err=err_gdecode,
                             settings=kern.plan({**x, "k": 1}), **method)]
        line = (f"time h{heads} bs{bs} ctx{ctx}: grouped {grouped[0]:.1f} us (1/graph {grouped1[0]:.1f}, "
                f"p64 {grouped_p64[0]:.1f}), decode {decode[0]:.1f} us (1/graph {decode1[0]:.1f}, grouped "
                f"{gdecode[0]:.1f}, rel_err {err_gdecode:.1e})")
        if not args.no_extend:
            ext_calls = [kern.extend(x, torch.empty_like(o), kv_indices=idx) for idx in x["rot_indices"][:4]]
            extend = graph_time_us(ext_calls, min_reps=3)
            recs.append(point_record("attn_verify", "extend", x, args.k, ctx, extend, timing="graph of "
                                     f"{len(ext_calls)} calls, one KV copy each", calls_per_graph=len(ext_calls)))
            line += f", extend {extend[0]:.1f} us"
        if flash_mla is not None:
            try:
                fcalls, fcheck = flashmla_calls(flash_mla, x)
                ferr = rel_err(fcheck().reshape(bs * args.k, heads, MLA_LV), x["ref"])
                fus = graph_time_us(fcalls)
                recs.append(point_record("attn_verify", "flashmla", xp, args.k, ctx, fus, rel_err=ferr, **method))
                line += f", flashmla {fus[0]:.1f} us (rel_err {ferr:.1e})"
            except Exception as e:  # noqa: BLE001
                flash_mla, flash_reason = None, f"FlashMLA failed at h{heads} bs{bs} ctx{ctx}: {e!r}"[:300]
                log(flash_reason)
        records += recs
        log(line + f"; rel_err {err:.1e}")
        torch.cuda.empty_cache()
    if flash_mla is None:
        log(f"flashmla skipped: {flash_reason}")
    return records, skipped


# ----------------------------------------------------------------------------- sweep

# Stage A: structural settings (each one compile per head count); {} is the shipped default.
# Cross-compiled for sm_90 (Triton 3.9, K=4, H=32): shared KB / registers / spill bytes per thread;
# 64-row tiles use wgmma, 32-row tiles mma.sync (and spill 1-2.5 KB, q and k held in registers).
SWEEP_TILES = [
    {},  # shipped: 16 heads (64 rows), 32 tokens, 8 warps, 2 stages: 147 / 255 / 264
    {"num_stages": 3},
    {"block_n": 16, "num_stages": 3},  # 131 / 255 / 0
    {"block_n": 64},  # 221 / 255 / 792: 74 KB of KV per step
    {"dv_splits": 2},  # 147 / 227 / 0
    {"dv_splits": 2, "num_warps": 4, "block_n": 16},  # 111 / 254 / 0: 2 programs per SM
    {"dv_splits": 2, "num_warps": 4, "block_n": 16, "num_stages": 3},
    {"dv_splits": 2, "block_n": 64},  # 221 / 255 / 184
    {"dv_splits": 4, "num_warps": 4, "block_n": 16},  # 111 / 214 / 0: 2 programs per SM
    {"dv_splits": 4},  # 147 / 200 / 0
    {"dv_splits": 4, "block_n": 64, "num_stages": 3},  # 222 / 255 / 16
    {"block_h": 32, "dv_splits": 2},  # 128 rows (H=32 in one pass over the KV): 221 / 240 / 0
    {"block_h": 32, "dv_splits": 4, "block_n": 16, "num_stages": 3},  # 185 / 166 / 0
    {"block_h": 8},  # 32 rows: the sm_120 default, 8 warps: 76 / 255 / 1576
    {"block_h": 8, "dv_splits": 2, "num_warps": 4, "num_stages": 3},  # 76 / 255 / 1584
]
QUICK_POINTS = [(32, 1, 8192), (32, 1, 32768), (8, 1, 32768), (32, 8, 8192)]
STAGE_B_TOP = 3
PROGRAMS_PER_SM = (0.25, 8.0)  # stage B's split counts: programs per SM in this range


def tile_fits(tile: dict, heads: int) -> bool:
    """A tile worth timing at ``heads`` query heads: at most 16 heads a program more than the rank has."""
    return tile.get("block_h", 16) <= max(16, heads)


def label(settings: dict) -> str:
    keys = [("block_h", "h"), ("block_n", "n"), ("num_warps", "w"), ("num_stages", "s"), ("dv_splits", "dv"),
            ("max_kv_splits", "S"), ("min_split_len", "L")]
    return " ".join(f"{short}{settings[key]}" for key, short in keys if key in settings)


def split_plans(kern: Kernels, x: dict, tile: dict, sms: int) -> list[dict]:
    """Stage B: ``tile`` at split counts s (a power of 2) giving PROGRAMS_PER_SM programs per SM, at least
    one KV step per split; max_kv_splits a multiple of 16 (one compile per tile) or 1 (the direct store)."""
    base = kern.plan(x, **tile)
    ctx, bs = x["lens"][0], len(x["lens"])
    per_split = bs * -(-x["heads"] // base["block_h"]) * base["dv_splits"]
    out, s = [], 1
    while s * base["block_n"] <= ctx:
        programs = per_split * s
        if PROGRAMS_PER_SM[0] * sms <= programs <= PROGRAMS_PER_SM[1] * sms:
            out.append({**tile, "max_kv_splits": 1 if s == 1 else max(16, s), "min_split_len": -(-ctx // s)})
        s *= 2
    return out


def effective_splits(plan: dict, ctx: int) -> int:
    return min(max(-(-ctx // plan["min_split_len"]), 1), plan["max_kv_splits"])


def sweep_one(kern: Kernels, x: dict, kw: dict, stage: str, args) -> dict:
    """Check ``kw`` (verify_grouped_attention_fwd settings) at point ``x``; time it when right."""
    bs, heads, ctx = len(x["lens"]), x["heads"], x["lens"][0]
    o = torch.full((bs * args.k, heads, MLA_LV), float("nan"), device=DEVICE, dtype=torch.bfloat16)
    plan = kern.plan(x, **kw)
    programs = bs * -(-heads // plan["block_h"]) * plan["dv_splits"] * effective_splits(plan, ctx)
    base = {"heads": heads, "bs": bs, "ctx": ctx, "k": args.k, "stage": stage, "settings": plan,
            "label": label(plan), "programs": programs}
    try:
        t0 = time.perf_counter()
        kern.grouped(x, o, **kw)()
        sync()
        base["first_call_s"] = round(time.perf_counter() - t0, 3)  # > ~0.5 s: compiled here, not precompiled
        err, nan = rel_err(o, x["ref"]), bool(o.isnan().any())
        if err > 1e-2 or nan:
            return {**base, "error": f"wrong: rel_err {err:.2e}, nan {nan}"}
        us = graph_time_us(grouped_calls(kern, x, o, **kw))
    except Exception as e:  # a tile that does not fit this GPU is a finding, not a crash
        return {**base, "error": repr(e)[:300]}
    calls = len(x["rot_indices"])
    return {**point_record("attn_verify", "grouped-sweep", x, args.k, ctx, us, rel_err=err,
                           timing=f"graph of {calls} calls, one KV copy each", calls_per_graph=calls), **base}


def sweep_points(args) -> list[tuple[int, int, int]]:
    if args.sweep_full:
        return [(h, b, c) for h in args.heads for b in args.bs for c in args.ctx]
    return [p for p in QUICK_POINTS if p[0] in args.heads and p[1] in args.bs and p[2] in args.ctx]


def sweep_jobs(kern: Kernels, points: list[tuple[int, int, int]], args) -> list[dict]:
    """Compile jobs for every setting the sweep may run: stage A's plans and stage B's split classes."""
    jobs = []
    for heads, bs, ctx in points:
        # Explicit split settings: the compiled kernels do not depend on bs (one job for both).
        shape = {"lens": [64], "k": args.k, "heads": heads, "kv_heads": 1, "lk": MLA_LK, "lv": MLA_LV,
                 "page": 1, "tree": False}
        fake = {"k": args.k, "lens": [ctx] * bs, "heads": heads, "kv_heads": 1, "lk": MLA_LK, "lv": MLA_LV,
                "key": torch.empty(0, dtype=torch.bfloat16), "q": torch.empty(0, device=DEVICE)}
        for tile in SWEEP_TILES:
            if not tile_fits(tile, heads):
                continue
            plan = kern.plan(fake, **tile)
            jobs.append({"kind": "grouped", **shape, "kw": {k: plan[k] for k in ("max_kv_splits", "min_split_len")}
                         | tile})
            jobs.append({"kind": "grouped", **shape, "kw": {**tile, "max_kv_splits": 16, "min_split_len": 256}})
            if args.sweep_full:
                for kw in split_plans(kern, fake, tile, kern.sms):
                    if kw["max_kv_splits"] == 1:
                        jobs.append({"kind": "grouped", **shape, "kw": kw})
        if args.sweep_full:  # the merge kernel, one per split count class (next power of 2)
            jobs += [{"kind": "grouped", **shape, "kw": {"max_kv_splits": 1 << e, "min_split_len": 256}}
                     for e in range(4, 11)]
    return jobs


def run_sweep(kern: Kernels, points: Points, args, deadline: float, log) -> list[dict]:
    out = []
    keys = sweep_points(args)
    stage_a_end = deadline - (0.3 * max(0.0, deadline - time.time()) if args.sweep_full else 0.0)
    for heads, bs, ctx in keys:
        x = points.get(heads, bs, ctx)
        for tile in SWEEP_TILES:
            if not tile_fits(tile, heads):
                continue
            if time.time() > stage_a_end:
                log(f"sweep stage A: out of time at h{heads} bs{bs} ctx{ctx}")
                break
            rec = sweep_one(kern, x, dict(tile), "A", args)
            out.append(rec)
            log(f"sweep A h{heads} bs{bs} ctx{ctx} {rec['label']}: "
                + (f"{rec['value']:.1f} us ({rec['gbps']:.0f} GB/s)" if "value" in rec else rec["error"]))
        torch.cuda.empty_cache()
    if not args.sweep_full:
        return out
    for heads, bs, ctx in keys:
        x = points.get(heads, bs, ctx)
        timed = sorted((r for r in out if r.get("stage") == "A" and "value" in r
                        and (r["heads"], r["bs"], r["ctx"]) == (heads, bs, ctx)), key=lambda r: r["value"])
        tiles = []
        for r in timed:
            tile = {key: r["settings"][key] for key in ("block_h", "block_n", "num_warps", "num_stages",
                                                         "dv_splits")}
            if tile not in tiles:
                tiles.append(tile)
        for tile in tiles[:STAGE_B_TOP]:
            for kw in split_plans(kern, x, tile, kern.sms):
                if time.time() > deadline:
                    log(f"sweep stage B: out of time at h{heads} bs{bs} ctx{ctx}")
                    return out
                rec = sweep_one(kern, x, kw, "B", args)
                out.append(rec)
                log(f"sweep B h{heads} bs{bs} ctx{ctx} {rec['label']} ({rec['programs']} programs): "
                    + (f"{rec['value']:.1f} us ({rec['gbps']:.0f} GB/s)" if "value" in rec else rec["error"]))
        torch.cuda.empty_cache()
    return out


# ----------------------------------------------------------------------------- decode sweep

# Patch 0035's plain decode (one query row per head) on the verify kernel's K=4 defaults: session 26 measured it
# 1.5-2.4x faster than SGLang's decode kernel at bs 1 but up to 1.8x slower at bs 8-32 with 8k-32k of context
# (S4/S1 splits: ~1 program per SM walking 2k-32k tokens). These tiles and split counts find what decode wants.
DECODE_SWEEP_TILES = [
    {},  # the shipped decode default for this head count (since session 26: block_h 64 at 64+ heads)
    {"block_h": 64},  # H >= 64: all heads in one program, 64 rows (wgmma), the KV read once per value split
    {"block_h": 64, "dv_splits": 4},
    {"block_h": 16, "block_n": 16, "num_warps": 4, "num_stages": 3},
    {"dv_splits": 4},
]
DECODE_SPLIT_FACTORS = (1, 2, 4, 8)  # times the default max_kv_splits, capped at 128


def decode_sweep_tiles(heads: int) -> list[dict]:
    """``DECODE_SWEEP_TILES`` that fit ``heads`` (a 64-head tile needs 64 heads)."""
    return [t for t in DECODE_SWEEP_TILES if t.get("block_h", 0) <= heads]


def decode_sweep_jobs(args) -> list[dict]:
    """Compile jobs of ``run_decode_sweep``: every tile at each head count (split counts are not compiled in)."""
    return [{"kind": "grouped-decode", "lens": [64], "k": 1, "heads": heads, "kv_heads": 1, "lk": MLA_LK,
             "lv": MLA_LV, "tree": False, "page": 1, "kw": tile}
            for heads in args.heads for tile in decode_sweep_tiles(heads)]


def run_decode_sweep(kern: Kernels, points: Points, deadline: float, log) -> list[dict]:
    """Every decode tile x split count at every point (MLA, page 1), timed as ``run_timing`` times decode; one
    record each (variant ``grouped-decode-sweep``, its resolved settings), or the error. Settings that resolve
    the same (a tile equal to the default) are timed once a point."""
    out = []
    for heads, bs, ctx in points.keys():
        x = points.get(heads, bs, ctx)
        seen: set[str] = set()
        for tile in decode_sweep_tiles(heads):
            base = kern.plan({**x, "k": 1}, **tile)["max_kv_splits"]
            for factor in DECODE_SPLIT_FACTORS:
                if time.time() > deadline:
                    log(f"decode sweep: out of time at h{heads} bs{bs} ctx{ctx}")
                    return out
                kw = {**tile, "max_kv_splits": min(128, base * factor)}
                settings = kern.plan({**x, "k": 1}, **kw)
                key = json.dumps(settings, sort_keys=True)
                if key in seen:
                    continue  # capped at 128, or a tile the default already is
                seen.add(key)
                try:
                    call, o = kern.grouped_decode(x, **kw)
                    call()()
                    err = rel_err(o, decode_reference(x))
                    us = graph_time_us([call(idx) for idx in x["rot_indices"]])
                    rec = point_record("attn_decode", "grouped-decode-sweep", x, 1, ctx, us, rel_err=err,
                                       settings=settings)
                    log(f"decode sweep h{heads} bs{bs} ctx{ctx} {kw}: {us[0]:.1f} us ({rec['gbps']:.0f} GB/s, "
                        f"rel_err {err:.1e})")
                except Exception as e:  # noqa: BLE001
                    rec = {"variant": "grouped-decode-sweep", "mode": "attn_decode", "heads": heads, "bs": bs,
                           "ctx": ctx, "settings": settings, "error": repr(e)[:300]}
                    log(f"decode sweep h{heads} bs{bs} ctx{ctx} {kw}: {rec['error']}")
                out.append(rec)
        torch.cuda.empty_cache()
    return out


def decode_sweep_table(records: list[dict], sweep: list[dict]) -> str:
    """Per point: SGLang's decode, 0035's default, and the fastest swept setting."""
    by_point: dict[tuple, dict] = {}
    for r in records:
        if r["mode"] == "attn_decode" and r["variant"] in ("decode", "grouped-decode"):
            by_point.setdefault((r["heads"], r["bs"], r["ctx"]), {})[r["variant"]] = r["value"]
    for r in sweep:
        if "value" in r:
            point = by_point.setdefault((r["heads"], r["bs"], r["ctx"]), {})
            if "best" not in point or r["value"] < point["best"]["value"]:
                point["best"] = r
    lines = ["heads bs   ctx | decode us | 0035 default us | best swept us | best/decode | best setting",
             "--------------+-----------+-----------------+---------------+-------------+-------------"]
    for (heads, bs, ctx), v in sorted(by_point.items()):
        best = v.get("best")
        if best is None:
            continue
        st = best["settings"]
        label = (f"h{st['block_h']} n{st['block_n']} w{st['num_warps']} s{st['num_stages']} dv{st['dv_splits']} "
                 f"S{st['max_kv_splits']}")
        dec = v.get("decode")
        lines.append(f"{heads:5d} {bs:2d} {ctx:5d} | {dec or float('nan'):9.1f} | "
                     f"{v.get('grouped-decode', float('nan')):15.1f} | {best['value']:13.1f} | "
                     f"{best['value'] / dec if dec else float('nan'):11.2f} | {label}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- parallel compile


def compile_worker(jobs_file: Path, kernel_file: Path, index: int, workers: int) -> int:
    """In a worker process: run every ``workers``-th job once on a tiny problem, so that its kernels are
    compiled into Triton's cache (shared with the main process); one JSON line per job."""
    spec = importlib.util.spec_from_file_location("fastpath_verify_grouped_attention", kernel_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kern = Kernels(module)
    jobs = json.loads(jobs_file.read_text())
    for i, job in enumerate(jobs):
        if i % workers != index:
            continue
        t0 = time.time()
        try:
            lens = [min(n, 64) for n in job["lens"]]
            x = make_problem(lens, job["k"], job["heads"], job["kv_heads"], job["lk"], job["lv"], job["page"],
                             job["tree"], torch.bfloat16, seed=0)
            o = torch.empty(len(lens) * job["k"], job["heads"], job["lv"], device=DEVICE, dtype=torch.bfloat16)
            if job["kind"] == "grouped":
                kern.grouped(x, o, **job["kw"])()
            elif job["kind"] == "extend":
                kern.extend(x, o)()
            elif job["kind"] == "grouped-decode":
                kern.grouped_decode(x, **job.get("kw", {}))[0]()()
            else:
                kern.decode(x)[0]()()
            torch.cuda.synchronize()
            result = {"job": i, "s": round(time.time() - t0, 2)}
        except Exception as e:  # noqa: BLE001
            result = {"job": i, "s": round(time.time() - t0, 2), "error": repr(e)[:300]}
        print(json.dumps(result), flush=True)
    return 0


def precompile(jobs: list[dict], kernel_file: Path, workers: int, deadline: float, log) -> dict:
    """Compile ``jobs`` in ``workers`` processes (Triton's cache is shared by files: the main process then
    loads what they built). Returns a summary; a failure here only means the main process compiles itself."""
    unique = list({json.dumps(j, sort_keys=True): j for j in jobs}.values())
    if workers <= 0 or not unique:
        return {"jobs": len(unique), "workers": 0}
    t0 = time.time()
    folder = Path(tempfile.mkdtemp(prefix="attn-bench-jobs-"))
    jobs_file = folder / "jobs.json"
    jobs_file.write_text(json.dumps(unique))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    procs = [subprocess.Popen([sys.executable, "-m", "benchmark.tools.attn_verify_bench", "--compile-worker",
                               str(jobs_file), "--kernel-file", str(kernel_file), "--worker-slice", f"{i}/{workers}"],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(min(workers, len(unique)))]
    done, errors = [], []
    for proc in procs:
        try:
            stdout, stderr = proc.communicate(timeout=max(5.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            errors.append("a worker ran out of time")
        for line in stdout.splitlines():
            if line.startswith("{"):
                done.append(json.loads(line))
        if proc.returncode not in (0, None) and not stdout.strip():
            errors.append(stderr.strip().splitlines()[-1][:300] if stderr.strip() else f"rc {proc.returncode}")
    failed = [{"job": unique[r["job"]], "error": r["error"]} for r in done if "error" in r]
    summary = {"jobs": len(unique), "workers": len(procs), "compiled": len(done) - len(failed),
               "failed": failed[:20], "worker_errors": errors[:5], "wall_s": round(time.time() - t0, 1),
               "job_s_sum": round(sum(r["s"] for r in done), 1)}
    log(f"precompile: {summary['compiled']}/{len(unique)} jobs in {summary['wall_s']} s on {len(procs)} workers "
        f"({summary['job_s_sum']} s of work), {len(failed)} failed {errors[:1]}")
    return summary


# ----------------------------------------------------------------------------- tables


def table(records: list[dict]) -> str:
    rows = {}
    for r in records:
        rows.setdefault((r["heads"], r["bs"], r["ctx"]), {})[r["variant"]] = r
    lines = ["heads bs   ctx | grouped us (GB/s) | 1/graph | p64 us | extend us | decode us | 1/graph | "
             "g-decode us | flashmla us | grouped/decode | floor us",
             "--------------+-------------------+---------+--------+-----------+-----------+---------+"
             "-------------+-------------+----------------+---------"]

    def us(v: dict, name: str, width: int) -> str:
        return f"{v[name]['value']:{width}.1f}" if name in v else f"{'-':>{width}}"
    for (heads, bs, ctx), v in sorted(rows.items()):
        g, d = v["grouped"], v["decode"]
        lines.append(f"{heads:5d} {bs:2d} {ctx:5d} | {g['value']:8.1f} ({g['gbps']:6.0f}) | "
                     f"{us(v, 'grouped-replay1', 7)} | {us(v, 'grouped-p64', 6)} | {us(v, 'extend', 9)} | "
                     f"{d['value']:9.1f} | {us(v, 'decode-replay1', 7)} | {us(v, 'grouped-decode', 11)} | "
                     f"{us(v, 'flashmla', 11)} | "
                     f"{g['value'] / d['value']:14.2f} | {g['floor_us']:8.2f}")
    return "\n".join(lines)


def best_per_point(records: list[dict], sweep: list[dict]) -> list[dict]:
    """Per point: the fastest right grouped setting (default or sweep), against the decode kernel."""
    out = []
    by_point = {}
    for r in records + sweep:
        if "value" in r:
            by_point.setdefault((r["heads"], r["bs"], r["ctx"]), []).append(r)
    for (heads, bs, ctx), rs in sorted(by_point.items()):
        grouped = [r for r in rs if r["variant"] in ("grouped", "grouped-sweep")]
        decode = next((r for r in rs if r["variant"] == "decode"), None)
        default = next((r for r in rs if r["variant"] == "grouped"), None)
        flash = next((r for r in rs if r["variant"] == "flashmla"), None)
        if not grouped:
            continue
        best = min(grouped, key=lambda r: r["value"])
        nbytes = best["floor_bytes"]
        rec = {"heads": heads, "bs": bs, "ctx": ctx, "settings": best.get("settings"),
               "label": label(best["settings"]) if best.get("settings") else "default", "us": best["value"],
               "gbps": best["gbps"], "hbm_share": round(best["gbps"] * 1e9 / HBM_BYTES_PER_S, 3),
               "default_us": default["value"] if default else None, "decode_us": decode["value"] if decode else None,
               "flashmla_us": flash["value"] if flash else None,
               "us_at_target_share": round(nbytes / (TARGET_SHARE * HBM_BYTES_PER_S) * 1e6, 2)}
        rec["ratio_to_decode"] = round(best["value"] / decode["value"], 2) if decode else None
        rec["meets_decode_target"] = bool(decode) and rec["ratio_to_decode"] <= TARGET_DECODE_RATIO
        rec["meets_bandwidth_target"] = rec["hbm_share"] >= TARGET_SHARE if ctx >= 8192 else None
        out.append(rec)
    return out


def ranking(sweep: list[dict]) -> list[tuple[str, float, int]]:
    """Stage A tiles by their geometric-mean slowdown against each point's fastest stage-A tile."""
    timed = [r for r in sweep if r.get("stage") == "A" and "value" in r]
    fastest = {}
    for r in timed:
        key = (r["heads"], r["bs"], r["ctx"])
        fastest[key] = min(fastest.get(key, r["value"]), r["value"])
    by_tile = {}
    for r in timed:
        by_tile.setdefault(r["label"].split(" S")[0], []).append(r["value"] / fastest[(r["heads"], r["bs"], r["ctx"])])
    return sorted(((t, math.exp(sum(map(math.log, v)) / len(v)), len(v)) for t, v in by_tile.items()),
                  key=lambda t: t[1])


def best_table(best: list[dict]) -> str:
    lines = ["heads bs   ctx | best setting                              |      us |  GB/s | HBM % | at 50% us | "
             "decode us | best/decode | default us | flashmla us",
             "--------------+-------------------------------------------+---------+-------+-------+-----------+"
             "-----------+-------------+------------+------------"]
    for b in best:
        mark_a = "ok" if b["meets_decode_target"] else "MISS"
        mark_b = "" if b["meets_bandwidth_target"] is None else (" ok" if b["meets_bandwidth_target"] else " MISS")
        lines.append(f"{b['heads']:5d} {b['bs']:2d} {b['ctx']:5d} | {b['label']:41s} | {b['us']:7.1f} | "
                     f"{b['gbps']:5.0f} | {100 * b['hbm_share']:4.0f}{mark_b:5s}| {b['us_at_target_share']:9.2f} | "
                     f"{(b['decode_us'] or float('nan')):9.1f} | "
                     f"{(b['ratio_to_decode'] or float('nan')):6.2f} {mark_a:4s} | "
                     f"{(b['default_us'] or float('nan')):10.1f} | "
                     + (f"{b['flashmla_us']:10.1f}" if b["flashmla_us"] else f"{'-':>10}"))
    return "\n".join(lines)


# ----------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="Issue 18's sweep (about 120 s on an H200): python3 benchmark/attn_verify_bench.py --out $OUT/attn "
        "--sweep-full --budget-s 140 [--flashmla-so .carry/flashmla.zip]. Make that zip (3 MB) once with "
        f"--pack-flashmla build/cache/bundle/downloads/{FLASHMLA_WHEEL} .carry/flashmla.zip.")
    ap.add_argument("--out", type=Path, help="results folder (required unless --pack-flashmla)")
    ap.add_argument("--budget-s", type=float, default=240.0, help="stop starting new work after this many seconds")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--bs", type=lambda s: [int(v) for v in s.split(",")], default=[1, 8])
    ap.add_argument("--ctx", type=lambda s: [int(v) for v in s.split(",")], default=[1024, 8192, 32768])
    ap.add_argument("--heads", type=lambda s: [int(v) for v in s.split(",")], default=[32, 8])
    ap.add_argument("--calls", type=int, default=20, help="at least this many calls per timing graph")
    ap.add_argument("--sweep-full", action="store_true", help="stage A at every point, then stage B")
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--no-extend", action="store_true", help="do not time SGLang's extend kernel")
    ap.add_argument("--decode-sweep", action="store_true",
                    help="after the timing, sweep patch 0035's plain-decode tiles and split counts")
    ap.add_argument("--compile-workers", type=int, default=max(0, min(12, (os.cpu_count() or 2) - 2)),
                    help="processes that compile the kernels first (0: compile as they run)")
    ap.add_argument("--flashmla-so", type=Path, help=f"{Path(FLASHMLA_SO).name}, or a zip holding it")
    ap.add_argument("--pack-flashmla", nargs=2, type=Path, metavar=("WHEEL", "ZIP"),
                    help="write ZIP holding FlashMLA's ops library from the sglang-kernel WHEEL, and exit")
    ap.add_argument("--compile-worker", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--kernel-file", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--worker-slice", default="0/1", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.out is None and not (args.pack_flashmla or args.compile_worker):
        ap.error("--out is required")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.pack_flashmla:
        size = pack_flashmla(*args.pack_flashmla)
        print(f"{args.pack_flashmla[1]}: {size} B")
        return 0
    if args.compile_worker:
        index, workers = (int(v) for v in args.worker_slice.split("/"))
        return compile_worker(args.compile_worker, args.kernel_file, index, workers)
    t0 = time.time()
    deadline = t0 + args.budget_s
    args.out.mkdir(parents=True, exist_ok=True)
    log_file = open(args.out / "attn_verify_bench.log", "a")

    def log(msg: str) -> None:
        line = f"[{time.time() - t0:6.1f}s] {msg}"
        print(line, flush=True)
        log_file.write(line + "\n")
        log_file.flush()

    def save() -> None:
        result["elapsed_s"] = round(time.time() - t0, 1)
        (args.out / "results.json").write_text(json.dumps(result, indent=1))

    import triton

    verify_module, patch_name = load_verify_kernel()
    kern = Kernels(verify_module)
    flash = load_flashmla(args.flashmla_so)
    meta = {"gpu": torch.cuda.get_device_name(0), "sms": kern.sms, "torch": torch.__version__,
            "triton": triton.__version__, "kernel_from": patch_name, "bandwidth_bytes_per_s": HBM_BYTES_PER_S,
            "argv": sys.argv, "timing": "CUDA graph of N back-to-back calls, one KV copy each (together >= "
            f"{ROTATE_BYTES >> 20} MiB), median replay / N; *-replay1: one call per graph, do_bench, L2 flushed",
            "decode_max_kv_splits": DECODE_MAX_KV_SPLITS, "flashmla": flash[1] or "loaded",
            "sweep_tiles": SWEEP_TILES}
    log(f"{meta['gpu']} ({kern.sms} SMs), torch {torch.__version__}, triton {triton.__version__}, "
        f"kernel from {patch_name}; flashmla: {meta['flashmla']}")
    result = {"schema": "sglang-fastpath-attn/2", "meta": meta}
    points = Points(args)
    jobs = check_jobs() + timing_jobs(args)
    if not args.no_sweep:
        jobs += sweep_jobs(kern, sweep_points(args), args)
    if args.decode_sweep:
        jobs += decode_sweep_jobs(args)
    result["precompile"] = precompile(jobs, Path(verify_module.__file__), args.compile_workers,
                                      min(deadline, time.time() + 0.35 * args.budget_s), log)
    result["checks"] = run_checks(kern, log)
    save()
    sweep_share = 0.0 if args.no_sweep else 0.6 if args.sweep_full else 0.3
    if args.decode_sweep:
        sweep_share = max(sweep_share, 0.5)
    records, skipped = run_timing(kern, points, flash, args,
                                  deadline - sweep_share * max(0.0, deadline - time.time()), log)
    result.update(records=records, skipped=skipped)
    save()
    if args.decode_sweep:
        result["decode_sweep"] = run_decode_sweep(kern, points, deadline, log)
        save()
    sweep = [] if args.no_sweep else run_sweep(kern, points, args, deadline, log)
    result["sweep"] = sweep
    result["best"] = best_per_point(records, sweep)
    result["ranking"] = [{"tile": t, "geomean_slowdown": round(g, 3), "points": n} for t, g, n in ranking(sweep)]
    save()
    ok = all(c["ok"] for c in result["checks"])
    log(f"checks {'all ok' if ok else 'FAILED'}; {len({(r['heads'], r['bs'], r['ctx']) for r in records})} "
        f"timing points, skipped {skipped}; {sum('value' in r for r in sweep)} sweep timings, "
        f"{sum('error' in r for r in sweep)} sweep errors")
    text = [table(records)]
    if result["ranking"]:
        text.append("stage A tiles, geometric-mean slowdown vs each point's fastest tile:\n" + "\n".join(
            f"  {g:5.2f}x  {t}  ({n} points)" for t, g, n in ranking(sweep)))
    text.append(best_table(result["best"]))
    if args.decode_sweep:
        text.append(decode_sweep_table(records, result["decode_sweep"]))
    print("\n\n".join(text), flush=True)
    log_file.write("\n\n".join(text) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
