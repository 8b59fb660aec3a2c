from __future__ import annotations

import argparse
from pathlib import Path

from sglang_fastpath.host.doctor import MemoryQuestion, diagnose


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="report SGLang version, applied patches, GPUs, the MoE config SGLang would load, slow paths",
        description="Report the installed SGLang (stock or fastpath, which patches), the GPUs and their "
        "compute capability, which fused-MoE Triton config file SGLang would load for --model at --tp, "
        "and known slow-path warnings. Exit 1 if any warning is printed.",
    )
    p.add_argument("--model", type=Path, help="a model folder (or config.json) to resolve the MoE config for; "
                   "a pair folder of 'sglang-fastpath models' (target/ and draft/) brings its draft")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel size (default 1)")
    p.add_argument("--ep", type=int, default=1, help="expert-parallel size (default 1)")
    p.add_argument("--device-name", help="GPU name to resolve configs for, e.g. "
                   "'NVIDIA RTX PRO 6000 Blackwell Server Edition' (default: GPU 0)")
    p.add_argument("--max-running-requests", type=int, help="the server's --max-running-requests")
    p.add_argument("--cuda-graph-max-bs-decode", type=int, help="the server's --cuda-graph-max-bs-decode")
    p.add_argument("--pcie", action="store_true", help="the GPUs are joined by PCIe only (no NVLink)")
    m = p.add_argument_group("memory split", "with --model: how each GPU's memory divides between the target, "
                             "its draft and their KV pools (from the checkpoints' sizes and configs; an estimate)")
    m.add_argument("--memory", action="store_true", help="report the memory split")
    m.add_argument("--draft", type=Path, help="the speculative draft model folder")
    m.add_argument("--gpu-memory-gib", type=float, help="memory of one GPU (default: GPU 0's)")
    m.add_argument("--mem-fraction-static", type=float, action="append",
                   help="the server's --mem-fraction-static; repeatable (default 0.6, 0.7, 0.8, 0.88)")
    m.add_argument("--context-length", type=int,
                   help="with --max-running-requests: warn when the KV pools cannot hold them all at full length")
    m.add_argument("--kv-cache-dtype", default="auto", help="the server's --kv-cache-dtype (default auto: bf16)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    memory = None
    if args.memory or args.draft or args.gpu_memory_gib or args.mem_fraction_static:
        if args.model is None:
            raise SystemExit("doctor: the memory split needs --model")
        memory = MemoryQuestion(draft=args.draft, gpu_memory_gib=args.gpu_memory_gib,
                                fractions=tuple(args.mem_fraction_static or MemoryQuestion.fractions),
                                context_length=args.context_length, kv_dtype=args.kv_cache_dtype)
    report = diagnose(args.model, args.tp, args.ep, args.device_name, args.max_running_requests,
                      args.cuda_graph_max_bs_decode, nvlink=False if args.pcie else None, memory=memory)
    print(report.render())
    return 1 if report.warnings else 0
