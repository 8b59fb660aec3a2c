"""Where the GPU time of a profiled run goes: a summary of torch-profiler Chrome traces.

Usage:
  python benchmark/trace_summary.py DIR_OR_FILE... [--json OUT.json]

SGLang's ``engine.start_profile(output_dir=D, ...)`` writes one trace per rank into D
(``<id>-TP-<rank>.trace.json.gz``); a folder is searched for ``*trace.json`` and
``*trace.json.gz`` (not recursively), a file is read whatever its name, gzip or not.

GPU events are those of cat ``kernel``, ``gpu_memcpy`` and ``gpu_memset``. Each is put in
one category by ``kernel_category``; the first rule that matches the lower-cased name wins:
  1. cat gpu_memcpy / gpu_memset (or a name starting ``Memcpy`` / ``Memset``) -> memcpy / memset;
  2. ``nccl`` in the name -> nccl_allreduce with ``allreduce``, nccl_allgather with
     ``allgather``, else nccl_other (so NCCL kernels never count as custom all-reduce);
  3. custom_allreduce: ``cross_device_reduce`` (sgl_kernel / vLLM), ``all_reduce`` or
     ``allreduce`` (SGLang's JIT ``all_reduce_kernel``, torch symmetric memory, FlashInfer
     and TensorRT-LLM fusion kernels), ``one_shot`` / ``two_shot`` / ``oneshot`` / ``twoshot``;
  4. attention: ``attn``, ``attention``, ``flash`` (outside the word ``flashinfer``, whose
     norm, sampling and activation kernels are not attention), ``decode_kernel``,
     ``_fwd_kernel`` and ``_fwd_grouped_kernel`` (Triton decode / extend / prefill),
     FlashInfer's ``prefillwith`` / ``decodewith`` / ``mergestate`` / ``merge_state``;
     before gemm because FA3 kernels run inside ``cutlass::device_kernel``. A bare
     ``extend`` is not a rule: EAGLE's metadata kernels (``create_extend_*``) carry it;
  5. moe: ``moe``, ``marlin``, ``expert`` (before gemm: grouped MoE GEMMs are MoE time);
  6. gemm: ``gemm``, ``gemv``, ``cutlass``, ``cublas``, ``xmma``, ``nvjet``, ``matmul``,
     ``splitkreduce`` (cuBLAS split-K);
  7. other.
Busy time is the union of the GPU events' intervals (overlapping streams counted once),
span runs from the first GPU event's start to the last one's end, idle = span - busy.
Category totals add durations, so their sum may exceed busy when streams overlap.
On the CPU side: the CUDA runtime / driver calls in CUDA_API, the collective ops (names
``nccl:*`` or ``c10d::*``, e.g. ``nccl:all_reduce``, ``c10d::allreduce_``) and the 20
user annotations (cat user_annotation or gpu_user_annotation) of most total time, a
trailing ``#<n>`` dropped so ``ProfilerStep#7`` and ``ProfilerStep#8`` add up.
Exit status: 0 done, 2 no trace found or one unreadable.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from benchmark.core.errors import BenchError

CATEGORIES = ("nccl_allreduce", "nccl_allgather", "nccl_other", "custom_allreduce", "gemm",
              "attention", "moe", "memcpy", "memset", "other")
GPU_CATS = {"kernel": "", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
CUDA_API_CATS = ("cuda_runtime", "cuda_driver")
CUDA_API = ("cudaGraphLaunch", "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel",
            "cuLaunchKernelEx", "cudaStreamSynchronize", "cudaDeviceSynchronize",
            "cudaEventSynchronize", "cudaMemcpyAsync")
COLLECTIVE_PREFIXES = ("nccl:", "c10d::")
ANNOTATION_CATS = ("user_annotation", "gpu_user_annotation")
TOP_KERNELS = 15
TOP_ANNOTATIONS = 20

_CUSTOM_AR = ("cross_device_reduce", "all_reduce", "allreduce", "one_shot", "two_shot", "oneshot", "twoshot")
_ATTENTION = ("attn", "attention", "flash", "decode_kernel", "_fwd_kernel", "_fwd_grouped_kernel",
              "prefillwith", "decodewith", "mergestate", "merge_state")
_MOE = ("moe", "marlin", "expert")
_GEMM = ("gemm", "gemv", "cutlass", "cublas", "xmma", "nvjet", "matmul", "splitkreduce")
_STEP_SUFFIX = re.compile(r"#\d+$")


def kernel_category(name: str, cat: str = "kernel") -> str:
    """The category of one GPU event (rules in the module docstring, first match wins)."""
    if GPU_CATS.get(cat):
        return GPU_CATS[cat]
    if name.startswith(("Memcpy", "Memset")):
        return name[:6].lower()
    low = name.lower()
    if "nccl" in low:
        if "allreduce" in low:
            return "nccl_allreduce"
        return "nccl_allgather" if "allgather" in low else "nccl_other"
    if any(word in low for word in _CUSTOM_AR):
        return "custom_allreduce"
    if any(word in low.replace("flashinfer", "") for word in _ATTENTION):
        return "attention"
    if any(word in low for word in _MOE):
        return "moe"
    return "gemm" if any(word in low for word in _GEMM) else "other"


def load_trace(path: Path | str) -> list[dict[str, Any]]:
    """The ``traceEvents`` of a Chrome trace, plain or gzip JSON (a bare event array too)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        doc = json.loads(raw)
    except (OSError, EOFError, ValueError) as exc:  # gzip.BadGzipFile and JSONDecodeError are both
        raise BenchError(f"{path}: unreadable trace ({exc}); give a torch-profiler .trace.json(.gz)") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise BenchError(f"{path}: no traceEvents list; give a torch-profiler .trace.json(.gz)")
    return [e for e in events if isinstance(e, dict)]


def _interval(event: dict[str, Any]) -> tuple[float, float] | None:
    """(start, duration) in µs of a complete event, None for instants, flows and metadata."""
    try:
        return float(event["ts"]), float(event["dur"])
    except (KeyError, TypeError, ValueError):
        return None


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by (start, end) intervals, overlaps counted once."""
    total, cur_start, cur_end = 0.0, 0.0, float("-inf")
    for start, end in sorted(intervals):
        if start > cur_end:  # a gap: close the current run, open a new one
            total += max(0.0, cur_end - cur_start)
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    return total + max(0.0, cur_end - cur_start)


class _Tally:
    """Count and total µs per key."""

    def __init__(self) -> None:
        self.count: dict[Any, int] = defaultdict(int)
        self.total: dict[Any, float] = defaultdict(float)

    def add(self, key: Any, dur: float) -> None:
        self.count[key] += 1
        self.total[key] += dur

    def row(self, key: Any) -> dict[str, Any]:
        return {"count": self.count.get(key, 0), "total_us": round(self.total.get(key, 0.0), 3)}

    def top(self, limit: int) -> list[Any]:
        return sorted(self.total, key=lambda k: (-self.total[k], str(k)))[:limit]


def summarize(events: list[dict[str, Any]]) -> dict[str, Any]:
    """GPU time per category, busy / span / idle, top kernels, CUDA API calls, collectives, annotations."""
    categories, kernels, api, collectives, annotations = _Tally(), _Tally(), _Tally(), _Tally(), _Tally()
    spans: list[tuple[float, float]] = []
    for event in events:
        interval = _interval(event)
        if interval is None:
            continue
        start, dur = interval
        name, cat = str(event.get("name", "")), str(event.get("cat", ""))
        if cat in GPU_CATS:
            category = kernel_category(name, cat)
            categories.add(category, dur)
            kernels.add((name, category), dur)
            spans.append((start, start + dur))
        elif cat in CUDA_API_CATS and name in CUDA_API:
            api.add(name, dur)
        if cat not in GPU_CATS and cat != "gpu_user_annotation" and name.startswith(COLLECTIVE_PREFIXES):
            collectives.add(name, dur)
        if cat in ANNOTATION_CATS:
            annotations.add((_STEP_SUFFIX.sub("#", name), cat), dur)
    busy = union_length(spans)
    span = max(e for _, e in spans) - min(s for s, _ in spans) if spans else 0.0
    return {
        "gpu_events": len(spans),
        "busy_us": round(busy, 3),
        "span_us": round(span, 3),
        "idle_us": round(span - busy, 3),
        "categories": {c: categories.row(c) for c in CATEGORIES},
        "top_kernels": [{"name": n, "category": c, **kernels.row((n, c))} for n, c in kernels.top(TOP_KERNELS)],
        "cuda_api": {n: api.row(n) for n in CUDA_API},
        "collectives": {n: collectives.row(n) for n in sorted(collectives.count)},
        "annotations": [{"name": n, "cat": c, **annotations.row((n, c))}
                        for n, c in annotations.top(TOP_ANNOTATIONS)],
    }


def trace_files(path: Path | str) -> list[Path]:
    """The trace files of a folder (``*trace.json``, ``*trace.json.gz``), or [path] for a file."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise BenchError(f"{path}: no such file or folder; give the profile output_dir or a trace file")
    return sorted(p for pattern in ("*trace.json", "*trace.json.gz") for p in path.glob(pattern) if p.is_file())


def summarize_dir(folder: Path | str) -> dict[str, dict[str, Any]]:
    """One summary per trace file of the folder, keyed by file name."""
    return {p.name: summarize(load_trace(p)) for p in trace_files(folder)}


def _ms(us: float) -> str:
    return f"{us / 1e3:.3f}"


def table(label: str, summary: dict[str, Any], top: int = 5) -> str:
    """The compact text report of one trace."""
    busy, span, idle = summary["busy_us"], summary["span_us"], summary["idle_us"]
    idle_share = f"{idle / span:.1%}" if span else "-"
    lines = [(f"== {label}: {summary['gpu_events']} GPU events, busy {_ms(busy)} ms, "
              f"span {_ms(span)} ms, idle {_ms(idle)} ms ({idle_share} of span)"),
             f"  {'category':<17}{'count':>8}{'total ms':>11}{'% busy':>8}"]
    for category, row in summary["categories"].items():
        if row["count"]:
            share = f"{row['total_us'] / busy:.1%}" if busy else "-"
            lines.append(f"  {category:<17}{row['count']:>8}{_ms(row['total_us']):>11}{share:>8}")
    for k in summary["top_kernels"][:top]:
        lines.append(f"  top {_ms(k['total_us']):>10} ms {k['count']:>6}x {k['category']:<16} {k['name'][:70]}")
    for title, rows in (("cuda api", summary["cuda_api"]), ("collectives", summary["collectives"])):
        shown = [f"{n} {r['count']}x {_ms(r['total_us'])} ms" for n, r in rows.items() if r["count"]]
        lines.append(f"  {title}: {', '.join(shown) if shown else 'none'}")
    shown = [f"{a['name'][:40]} {a['count']}x {_ms(a['total_us'])} ms" for a in summary["annotations"][:top]]
    lines.append(f"  annotations: {', '.join(shown) if shown else 'none'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="benchmark/trace_summary.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="profile output folders or trace files")
    parser.add_argument("--json", type=Path, metavar="OUT.json", help="write every summary here")
    args = parser.parse_args(argv)
    try:
        files = [f for p in args.paths for f in trace_files(p)]
        if not files:
            raise BenchError(f"no *trace.json(.gz) in {', '.join(map(str, args.paths))}; "
                             "pass the output_dir given to engine.start_profile")
        summaries = {str(f): summarize(load_trace(f)) for f in files}
    except BenchError as exc:
        print(f"trace_summary.py: error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(table(label, s) for label, s in summaries.items()))
    if args.json:
        try:
            args.json.write_text(json.dumps(summaries, indent=1) + "\n")
        except OSError as exc:
            print(f"trace_summary.py: error: --json {args.json}: {exc.strerror}; give a writable path", file=sys.stderr)
            return 2
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
