"""The trace summarizer against hand-made torch-profiler traces: categories, busy/idle, CPU calls, CLI."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmark.core.errors import BenchError
from benchmark.tools.trace_summary import (
    kernel_category, load_trace, main, summarize, summarize_dir, union_length)

ROOT = Path(__file__).resolve().parents[1]

NCCL_AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
NVJET = "nvjet_tst_64x8_64x16_4x1_v_bz_TNT"

CLASSIFIED = [
    (NCCL_AR, "nccl_allreduce"),
    ("ncclKernel_AllReduce_RING_LL_Sum_half(ncclWorkElem)", "nccl_allreduce"),
    ("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "nccl_allgather"),
    ("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "nccl_other"),
    ("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", "nccl_other"),
    ("void sglang::cross_device_reduce_1stage<__nv_bfloat16, 2>(sglang::RankData*, int, int)", "custom_allreduce"),
    ("void vllm::cross_device_reduce_2stage<half, 8>(vllm::RankData*, int, int)", "custom_allreduce"),
    (("void (anonymous namespace)::all_reduce_kernel<(anonymous namespace)::AllReducePushImpl<__nv_bfloat16, 2u,"
      " true>, 2u, 1>((anonymous namespace)::AllReduceParams<2u>)"), "custom_allreduce"),
    ("void c10d::symmetric_memory::one_shot_all_reduce_kernel<c10::BFloat16, 8>(float*)", "custom_allreduce"),
    ("void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<bf16>()", "custom_allreduce"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_cublas", "gemm"),
    (NVJET, "gemm"),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>(Params)", "gemm"),
    ("void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, float, 128, 16, 4, 4>(float)", "gemm"),
    ("void splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float>(cublasSplitKParams<float>)", "gemm"),
    ("_fwd_kernel", "attention"),
    ("_fwd_grouped_kernel_stage1", "attention"),
    ("_fwd_kernel_stage2", "attention"),
    ("void flashinfer::BatchPrefillWithPagedKVCacheKernel<KTraits, Params>(Params)", "attention"),
    ("void flashinfer::BatchDecodeWithPagedKVCacheKernel<PosEncodingMode, 2u>(Params)", "attention"),
    ("void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<Mainloop>>>(Params)",
     "attention"),
    ("void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*)", "other"),
    ("void flashinfer::sampling::TopKTopPSamplingFromProbKernel<1024u, float, int>(float*)", "other"),
    ("fused_moe_kernel", "moe"),
    ("void marlin_moe_wna16::Marlin<__nv_bfloat16, 4, 8>(int4 const*)", "moe"),
    ("void moe_align_block_size_kernel<int>(int const*)", "moe"),
    ("create_extend_after_decode_spec_info", "other"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, float)", "other"),
    ("Memcpy DtoD (Device -> Device)", "memcpy"),
    ("Memset (Device)", "memset"),
]


@pytest.mark.parametrize(("name", "category"), CLASSIFIED)
def test_kernel_category(name: str, category: str) -> None:
    assert kernel_category(name) == category


def test_cat_decides_memcpy_and_memset() -> None:
    assert kernel_category("whatever", "gpu_memcpy") == "memcpy"
    assert kernel_category(NCCL_AR, "gpu_memset") == "memset"


def _x(name: str, cat: str, ts: float, dur: float, tid: int = 7) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": tid, "ts": ts, "dur": dur, "args": {}}


def trace_events(shift: float = 0.0) -> list[dict]:
    """Busy: [100,160] [200,240] [300,305] [310,330] = 125 µs; span 100..330 = 230 µs; idle 105 µs."""
    s = shift
    return [
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "python"}},
        _x(NCCL_AR, "kernel", 100 + s, 50),                               # [100,150]
        _x(NVJET, "kernel", 120 + s, 40, tid=8),                          # [120,160], overlaps on stream 8
        _x("_fwd_grouped_kernel_stage1", "kernel", 200 + s, 30),          # [200,230]
        _x("Memcpy DtoD (Device -> Device)", "gpu_memcpy", 230 + s, 10),  # [230,240], touches
        _x("Memset (Device)", "gpu_memset", 300 + s, 5),                  # [300,305]
        _x(NVJET, "kernel", 310 + s, 20),                                 # [310,330]
        _x("fused_moe_kernel", "kernel", 315 + s, 5, tid=8),              # inside the one above
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 1, "pid": 0, "tid": 1, "ts": 90 + s},
        _x("cudaLaunchKernel", "cuda_runtime", 95, 4, tid=1),
        _x("cudaLaunchKernel", "cuda_runtime", 96, 4, tid=1),
        _x("cudaGraphLaunch", "cuda_runtime", 97, 12, tid=1),
        _x("cudaStreamSynchronize", "cuda_runtime", 98, 100, tid=1),
        _x("cuLaunchKernel", "cuda_driver", 99, 3, tid=1),
        _x("cudaGetDevice", "cuda_runtime", 99, 1, tid=1),
        _x("nccl:all_reduce", "cpu_op", 90, 20, tid=1),
        _x("nccl:all_reduce", "cpu_op", 190, 20, tid=1),
        _x("c10d::allreduce_", "cpu_op", 89, 25, tid=1),
        _x("nccl:all_reduce", "gpu_user_annotation", 100, 50),
        _x("ProfilerStep#3", "user_annotation", 0, 400, tid=1),
        _x("ProfilerStep#4", "user_annotation", 400, 300, tid=1),
        _x("forward_decode", "gpu_user_annotation", 100, 90),
    ]


def write_trace(path: Path, events: list[dict]) -> Path:
    data = json.dumps({"schemaVersion": 1, "traceEvents": events}).encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def test_busy_is_the_union_of_overlapping_intervals() -> None:
    assert union_length([(0, 10), (5, 15), (20, 30), (22, 25), (30, 31)]) == 26
    assert union_length([]) == 0


def test_summary_of_a_gzip_trace(tmp_path: Path) -> None:
    s = summarize(load_trace(write_trace(tmp_path / "p-TP-0.trace.json.gz", trace_events())))
    assert (s["gpu_events"], s["busy_us"], s["span_us"], s["idle_us"]) == (7, 125, 230, 105)
    cats = {c: (r["count"], r["total_us"]) for c, r in s["categories"].items() if r["count"]}
    assert cats == {"nccl_allreduce": (1, 50), "gemm": (2, 60), "attention": (1, 30), "moe": (1, 5),
                    "memcpy": (1, 10), "memset": (1, 5)}
    assert s["categories"]["custom_allreduce"] == {"count": 0, "total_us": 0}
    assert [(k["name"], k["category"], k["count"], k["total_us"]) for k in s["top_kernels"]] == [
        (NVJET, "gemm", 2, 60), (NCCL_AR, "nccl_allreduce", 1, 50),
        ("_fwd_grouped_kernel_stage1", "attention", 1, 30), ("Memcpy DtoD (Device -> Device)", "memcpy", 1, 10),
        ("Memset (Device)", "memset", 1, 5), ("fused_moe_kernel", "moe", 1, 5)]


def test_cpu_side_calls_collectives_and_annotations(tmp_path: Path) -> None:
    s = summarize(load_trace(write_trace(tmp_path / "t.trace.json", trace_events())))
    api = {n: (r["count"], r["total_us"]) for n, r in s["cuda_api"].items() if r["count"]}
    assert api == {"cudaLaunchKernel": (2, 8), "cudaGraphLaunch": (1, 12), "cudaStreamSynchronize": (1, 100),
                   "cuLaunchKernel": (1, 3)}
    assert s["cuda_api"]["cudaDeviceSynchronize"] == {"count": 0, "total_us": 0}
    assert s["collectives"] == {"c10d::allreduce_": {"count": 1, "total_us": 25},
                                "nccl:all_reduce": {"count": 2, "total_us": 40}}
    assert [(a["name"], a["cat"], a["count"], a["total_us"]) for a in s["annotations"]] == [
        ("ProfilerStep#", "user_annotation", 2, 700), ("forward_decode", "gpu_user_annotation", 1, 90),
        ("nccl:all_reduce", "gpu_user_annotation", 1, 50)]


def test_load_trace_takes_a_bare_event_array(tmp_path: Path) -> None:
    path = tmp_path / "bare.json"
    path.write_text(json.dumps(trace_events()))
    assert len(load_trace(path)) == len(trace_events())


def test_load_trace_rejects_what_is_not_a_trace(tmp_path: Path) -> None:
    (tmp_path / "bad.trace.json.gz").write_bytes(b"\x1f\x8b not really gzip")
    (tmp_path / "obj.trace.json").write_text('{"a": 1}')
    with pytest.raises(BenchError, match="bad.trace.json.gz: unreadable trace"):
        load_trace(tmp_path / "bad.trace.json.gz")
    with pytest.raises(BenchError, match="obj.trace.json: no traceEvents"):
        load_trace(tmp_path / "obj.trace.json")


def test_summarize_dir_one_entry_per_rank(tmp_path: Path) -> None:
    write_trace(tmp_path / "p-TP-0.trace.json.gz", trace_events())
    write_trace(tmp_path / "p-TP-1.trace.json", trace_events(shift=1000))
    (tmp_path / "results.json").write_text("{}")  # not a trace: skipped
    got = summarize_dir(tmp_path)
    assert sorted(got) == ["p-TP-0.trace.json.gz", "p-TP-1.trace.json"]
    assert got["p-TP-1.trace.json"]["busy_us"] == 125 and got["p-TP-1.trace.json"]["span_us"] == 230


def test_cli_prints_tables_and_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_trace(tmp_path / "p-TP-0.trace.json.gz", trace_events())
    write_trace(tmp_path / "p-TP-1.trace.json.gz", trace_events())
    out = tmp_path / "out" / "summary.json"
    out.parent.mkdir()
    assert main([str(tmp_path), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.count("== ") == 2
    assert "7 GPU events, busy 0.125 ms, span 0.230 ms, idle 0.105 ms (45.7% of span)" in text
    assert "  nccl_allreduce          1      0.050   40.0%" in text
    assert "  gemm                    2      0.060   48.0%" in text
    assert "custom_allreduce" not in text  # categories without events are left out of the table
    assert "cuda api: cudaGraphLaunch 1x 0.012 ms, cudaLaunchKernel 2x 0.008 ms" in text
    assert "collectives: c10d::allreduce_ 1x 0.025 ms, nccl:all_reduce 2x 0.040 ms" in text
    assert "annotations: ProfilerStep# 2x 0.700 ms, forward_decode 1x 0.090 ms, nccl:all_reduce 1x 0.050 ms" in text
    written = json.loads(out.read_text())
    assert sorted(written) == [str(tmp_path / "p-TP-0.trace.json.gz"), str(tmp_path / "p-TP-1.trace.json.gz")]
    assert written[str(tmp_path / "p-TP-0.trace.json.gz")]["idle_us"] == 105


def test_cli_exit_2_without_a_trace_or_with_a_bad_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("trace_summary.py: error: no *trace.json(.gz) in ") and err.count("\n") == 1
    assert main([str(tmp_path / "missing")]) == 2
    assert "missing: no such file or folder" in capsys.readouterr().err
    (tmp_path / "x-TP-0.trace.json.gz").write_bytes(b"\x1f\x8b\x08broken")
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "x-TP-0.trace.json.gz: unreadable trace" in err and err.count("\n") == 1


def test_runs_as_a_script(tmp_path: Path) -> None:
    write_trace(tmp_path / "p-TP-0.trace.json.gz", trace_events())
    done = subprocess.run([sys.executable, str(ROOT / "benchmark" / "trace_summary.py"), str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    assert "busy 0.125 ms" in done.stdout
    empty = tmp_path / "empty"
    empty.mkdir()
    done = subprocess.run([sys.executable, str(ROOT / "benchmark" / "trace_summary.py"), str(empty)],
                          capture_output=True, text=True, cwd=tmp_path, check=False)
    assert done.returncode == 2 and "no *trace.json(.gz)" in done.stderr
