"""``sglang-fastpath demo``: serve the embedded tiny models with EAGLE-3 and ask one question.

Runs the ordinary ``python -m sglang.launch_server --speculative-algorithm EAGLE3``
on the models made by ``sglang-fastpath models tiny`` (made first if missing),
waits for ``/health``, sends one greedy ``/generate`` request, prints the answer
and the accept length, and stops the server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from sglang_fastpath.errors import FastpathError
from sglang_fastpath.models.folder import ModelsFolder

# Flags known to work offline on H200 and sm_120 hosts without flashinfer's JIT sources.
BASE_SERVER_ARGS = ("--attention-backend", "triton", "--sampling-backend", "pytorch", "--grammar-backend", "none")
DEFAULT_SPEC = {"speculative_num_steps": 3, "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4}


@dataclass(frozen=True)
class DemoResult:
    text: str
    accept_length: float | None
    completion_tokens: int


def ensure_models(models: Path) -> dict:
    """The models.json of ``models``, making the tiny pair there first if it is missing."""
    if not ModelsFolder.is_pair(models):
        subprocess.run([sys.executable, "-m", "sglang_fastpath", "models", "tiny", "--out", str(models)], check=True)
    return ModelsFolder(models).manifest()


def server_command(models: Path, port: int, tp: int, spec: dict, extra: list[str]) -> list[str]:
    pair = ModelsFolder(models)
    cmd = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(pair.target),
           "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(pair.draft),
           "--tp", str(tp), "--port", str(port), "--host", "127.0.0.1", *BASE_SERVER_ARGS]
    for key, value in {**DEFAULT_SPEC, **spec}.items():
        cmd += ["--" + key.replace("_", "-"), str(value)]
    return cmd + extra


def _request(url: str, body: dict | None = None, timeout: float = 10.0) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read() or b"{}")


def wait_healthy(base: str, proc: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise FastpathError(f"the server exited with status {proc.returncode} before it was healthy (see its log)")
        try:
            urllib.request.urlopen(base + "/health", timeout=5).read()
            return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(2)
    raise FastpathError(f"the server was not healthy after {timeout_s:.0f} s")


def run_demo(models: Path, prompt: str, max_new_tokens: int, port: int, tp: int, extra: list[str],
             timeout_s: float, log: Path | None) -> DemoResult:
    meta = ensure_models(models)
    cmd = server_command(models, port, tp, meta.get("speculative", {}), extra)
    print("$ " + " ".join(cmd), flush=True)
    out = open(log, "w") if log else None
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT if out else None, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, proc, timeout_s)
        reply = _request(base + "/generate", {"text": prompt, "sampling_params":
                                              {"temperature": 0, "max_new_tokens": max_new_tokens}}, timeout=120)
        meta_info = reply.get("meta_info", {})
        return DemoResult(reply.get("text", ""), meta_info.get("spec_accept_length"),
                          int(meta_info.get("completion_tokens", 0)))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        if out:
            out.close()
