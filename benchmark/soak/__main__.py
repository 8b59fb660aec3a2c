"""``python -m benchmark.soak``: soak a SGLang server under load, faults and bad input; write soak.json.

Either starts the server (``--launch "ARGS"``: ``python -m sglang.launch_server
ARGS`` on 127.0.0.1 with ``--enable-metrics``; with ``--reference`` the same
arguments without the ``--speculative-*`` options are soaked after it, as the
no-speculation reference) or attaches to one running on loopback (``--url``).
Writes ``OUT/soak.json`` (the main run's fields at the top level, the
reference's under ``reference``) and the server logs beside it. Exit status:
0 every target met, 1 a target missed (``failures`` in soak.json says which),
2 usage error, 3 the server did not start.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import shlex
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from benchmark.driver.portable import here, portable
from benchmark.soak.http_client import Endpoint, NotLoopback
from benchmark.soak.server import LaunchedServer, ServerFailed, server_facts, without_speculation
from benchmark.soak.soak import SoakConfig, run_soak

REPO = Path(__file__).resolve().parents[2]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmark.soak", description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--launch", metavar="ARGS", help="launch_server arguments, one quoted string")
    where.add_argument("--url", help="a running server on loopback, e.g. http://127.0.0.1:30000")
    p.add_argument("--out", type=Path, required=True, help="results folder (soak.json, server logs)")
    p.add_argument("--reference", action="store_true", help="with --launch: also soak without --speculative-*")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument("--start-timeout", type=float, default=600.0, help="seconds for the server to become healthy")
    p.add_argument("--itl-tolerance", type=float, default=0.1,
                   help="with --reference: how far (fraction) p99 ITL may exceed the reference's (0.1)")  # fmt: skip
    p.add_argument("--vocab-size", type=int, help="default: the model's config.json, via /get_model_info")
    p.add_argument("--context-len", type=int, help="default: max_model_len of /v1/models")
    defaults = SoakConfig()
    for f in fields(SoakConfig):
        default = getattr(defaults, f.name)
        if isinstance(default, bool):
            p.add_argument("--" + f.name.replace("_", "-"), action=argparse.BooleanOptionalAction, default=default)
        else:
            p.add_argument("--" + f.name.replace("_", "-"), type=type(default), default=default)
    return p.parse_args(argv)


def soak_config(args: argparse.Namespace) -> SoakConfig:
    return SoakConfig(**{f.name: getattr(args, f.name) for f in fields(SoakConfig)})


def raise_fd_limit(needed: int) -> None:
    """A burst holds one socket per request: lift the soft open-files limit toward the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, needed + 256)) if hard != resource.RLIM_INFINITY else max(soft, needed + 256)
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def soak_url(url: str, args: argparse.Namespace, server: LaunchedServer | None = None) -> dict[str, Any]:
    ep = Endpoint.parse(url)
    facts = asyncio.run(server_facts(ep, args.vocab_size, args.context_len))
    return asyncio.run(run_soak(ep, facts, soak_config(args), server))


def soak_launched(launch_args: list[str], args: argparse.Namespace, log: Path) -> dict[str, Any]:
    server = LaunchedServer(launch_args, args.port, log)
    try:
        server.start(args.start_timeout)
        record = soak_url(server.url, args, server)
    finally:
        server.stop()
    record["server_command"] = portable(shlex.join(server.cmd), **here(REPO))
    return record


def compare_itl(record: dict[str, Any], reference: dict[str, Any], tolerance: float) -> None:
    """Issue 14's latency target: the speculative run's p99 inter-token latency no worse than the reference's.

    ``tolerance`` is the noise allowed (0.1: up to 10 % above the reference passes).
    """
    spec, ref = record.get("itl_p99_ms"), reference.get("itl_p99_ms")
    record["itl_p99_vs_reference"] = round(spec / ref, 3) if spec and ref else None
    if spec and ref and spec > ref * (1 + tolerance):
        record["failures"].append(f"p99 inter-token latency {spec} ms is above the reference's {ref} ms "
                                  f"by more than {tolerance:.0%}")  # fmt: skip
        record["passed"] = False


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    raise_fd_limit(args.burst + args.clients)
    try:
        if args.url:
            record = soak_url(args.url, args)
        else:
            launch = shlex.split(args.launch)
            record = soak_launched(launch, args, args.out / "server.log")
            if args.reference:
                record["reference"] = soak_launched(without_speculation(launch), args, args.out / "server-reference.log")
                compare_itl(record, record["reference"], args.itl_tolerance)
    except NotLoopback as e:
        print(f"soak: {e}", file=sys.stderr)
        return 2
    except ServerFailed as e:
        print(f"soak: {e}", file=sys.stderr)
        return 3
    (args.out / "soak.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    runs = [("main", record)] + ([("reference", record["reference"])] if "reference" in record else [])
    for name, run in runs:
        keys = ("requests", "completed", "unexpected_errors", "bad_inputs_tried", "bad_inputs_rejected_4xx",
                "leaked_tokens", "parity_mismatches", "ttft_p99_ms", "itl_p99_ms", "tokens_per_s")  # fmt: skip
        print(f"{name}: " + ", ".join(f"{k}={run[k]}" for k in keys))
        for failure in run["failures"]:
            print(f"{name}: FAILED {failure}")
    print(f"wrote {args.out / 'soak.json'}")
    return 0 if all(run["passed"] for _, run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
