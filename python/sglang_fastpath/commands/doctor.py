from __future__ import annotations

import argparse
from pathlib import Path

from sglang_fastpath.doctor import diagnose


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="report SGLang version, applied patches, GPUs, the MoE config SGLang would load, slow paths",
        description="Report the installed SGLang (stock or fastpath, which patches), the GPUs and their "
        "compute capability, which fused-MoE Triton config file SGLang would load for --model at --tp, "
        "and known slow-path warnings. Exit 1 if any warning is printed.",
    )
    p.add_argument("--model", type=Path, help="a model folder (or config.json) to resolve the MoE config for")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel size (default 1)")
    p.add_argument("--ep", type=int, default=1, help="expert-parallel size (default 1)")
    p.add_argument("--device-name", help="GPU name to resolve configs for, e.g. "
                   "'NVIDIA RTX PRO 6000 Blackwell Server Edition' (default: GPU 0)")
    p.add_argument("--max-running-requests", type=int, help="the server's --max-running-requests")
    p.add_argument("--cuda-graph-max-bs-decode", type=int, help="the server's --cuda-graph-max-bs-decode")
    p.add_argument("--pcie", action="store_true", help="the GPUs are joined by PCIe only (no NVLink)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    report = diagnose(args.model, args.tp, args.ep, args.device_name, args.max_running_requests,
                      args.cuda_graph_max_bs_decode, nvlink=False if args.pcie else None)
    print(report.render())
    return 1 if report.warnings else 0
