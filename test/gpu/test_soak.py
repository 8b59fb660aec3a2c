"""A short soak of the real server on the tiny pair (the gate's version of benchmark/soak), GPU only.

Starts ``python -m sglang.launch_server`` with EAGLE-3 on the tiny pair (KV
capped like the gate's other engines, so it can share a GPU), drives it for
30 s with 16 clients, cut streams, aborts, the bad-input catalogue and a burst
of 200, and requires every soak target: no unexpected error, every bad input
a 4xx naming its problem, no KV token left after the drain, greedy parity
under load, no dead server process. soak.json lands in $OUT/soak-tiny.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from benchmark.soak import __main__ as soak_cli
from engines import MAX_TOTAL_TOKENS, MEM_FRACTION, SPEC

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.gpu


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_short_soak_of_eagle3_server_meets_every_target(tiny_models: Path, tmp_path: Path) -> None:
    out = Path(os.environ["OUT"]) / "soak-tiny" if os.environ.get("OUT") else tmp_path / "soak-tiny"
    launch = [
        "--model-path", str(tiny_models / "target"), "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", str(tiny_models / "draft"),
        *[f"--{k.replace('_', '-')}={v}" for k, v in SPEC.items()],
        "--attention-backend", "triton", "--sampling-backend", "pytorch", "--grammar-backend", "none",
        "--mem-fraction-static", str(MEM_FRACTION), "--max-total-tokens", str(MAX_TOTAL_TOKENS),
    ]  # fmt: skip
    status = soak_cli.main([
        "--launch", " ".join(launch), "--port", str(free_port()), "--out", str(out), "--duration-s", "30",
        "--clients", "16", "--burst", "200", "--max-output", "128", "--start-timeout", "300",
    ])  # fmt: skip
    record = json.loads((out / "soak.json").read_text())
    assert status == 0, record["failures"]
    assert record["completed"] > 200 and record["bad_inputs_rejected_4xx"] > 0
