from __future__ import annotations

import argparse
from pathlib import Path

from sglang_fastpath.host.demo import run_demo


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="serve the embedded tiny models with EAGLE-3, send one request, print answer and accept length",
        description="Make the tiny target + EAGLE-3 draft (if missing), start "
        "'python -m sglang.launch_server --speculative-algorithm EAGLE3' on them, send one greedy request, "
        "print the answer and the accept length, stop the server. Needs a CUDA GPU. Arguments after '--' "
        "go to the server.",
    )
    p.add_argument("--models", type=Path, default=Path("/tmp/sglang-fastpath-tiny"), help="models folder")
    p.add_argument("--prompt", default="The capital of France is", help="the prompt")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel size")
    p.add_argument("--timeout", type=float, default=600, help="seconds to wait for the server")
    p.add_argument("--log", type=Path, default=None, help="write the server log here (default: inherit)")
    p.add_argument("server_args", nargs=argparse.REMAINDER, help="extra server arguments after --")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    extra = args.server_args[1:] if args.server_args[:1] == ["--"] else args.server_args
    result = run_demo(args.models, args.prompt, args.max_new_tokens, args.port, args.tp, extra, args.timeout, args.log)
    print(f"answer: {result.text!r}")
    print(f"completion tokens: {result.completion_tokens}")
    print(f"accept length: {result.accept_length if result.accept_length is not None else 'not reported'}")
    return 0
