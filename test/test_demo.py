"""The README run command's flow (``sglang-fastpath demo``) against a stand-in server on loopback.

A fake ``sglang.launch_server`` module (a few lines of http.server) answers
/health and /generate like SGLang does, so the demo's launch, wait, request,
report and shutdown are exercised without a GPU. What it sends is checked too:
the EAGLE-3 flags and the models' speculative settings.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sglang_fastpath.host.demo import run_demo, server_command
from sglang_fastpath.errors import FastpathError

FAKE_SERVER = textwrap.dedent('''
    import json, sys
    from http.server import BaseHTTPRequestHandler, HTTPServer

    args = sys.argv[1:]
    port = int(args[args.index("--port") + 1])
    with open(args[args.index("--model-path") + 1] + "/../argv.json", "w") as f:
        json.dump(args, f)
    if "--fail" in args:
        sys.exit(3)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            n = body["sampling_params"]["max_new_tokens"]
            reply = {"text": body["text"][::-1], "meta_info": {"completion_tokens": n, "spec_accept_length": 3.5}}
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    HTTPServer(("127.0.0.1", port), Handler).serve_forever()
''')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def fake_sglang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    pkg = tmp_path / "site" / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "launch_server.py").write_text(FAKE_SERVER)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    models = tmp_path / "models"
    for part in ("target", "draft"):
        (models / part).mkdir(parents=True)
        (models / part / "config.json").write_text("{}")
    (models / "models.json").write_text(json.dumps({"speculative": {"speculative_num_steps": 2,
                                                                    "speculative_num_draft_tokens": 3}}))
    return models


def test_demo_serves_asks_and_reports(fake_sglang: Path, tmp_path: Path) -> None:
    result = run_demo(fake_sglang, "abc", 7, _free_port(), 1, ["--mem-fraction-static", "0.5"], 30, tmp_path / "log")
    assert (result.text, result.completion_tokens, result.accept_length) == ("cba", 7, 3.5)
    argv = json.loads((fake_sglang / "argv.json").read_text())
    flags = dict(zip(argv[::2], argv[1::2]))
    assert flags["--speculative-algorithm"] == "EAGLE3"
    assert flags["--speculative-draft-model-path"] == str(fake_sglang / "draft")
    # The models' own settings win over the defaults; extra arguments are passed through.
    assert (flags["--speculative-num-steps"], flags["--speculative-num-draft-tokens"]) == ("2", "3")
    assert flags["--speculative-eagle-topk"] == "1" and flags["--mem-fraction-static"] == "0.5"


def test_demo_reports_a_server_that_dies(fake_sglang: Path, tmp_path: Path) -> None:
    with pytest.raises(FastpathError, match="exited with status 3"):
        run_demo(fake_sglang, "abc", 4, _free_port(), 1, ["--fail", "x"], 30, tmp_path / "log")


def test_demo_cli_prints_answer_and_accept_length(fake_sglang: Path, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "sglang_fastpath", "demo", "--models", str(fake_sglang),
                           "--port", str(_free_port()), "--prompt", "xy", "--timeout", "30"],
                          capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    assert "answer: 'yx'" in proc.stdout and "accept length: 3.5" in proc.stdout


def test_server_command_is_the_ordinary_launch_server(tmp_path: Path) -> None:
    cmd = server_command(tmp_path, 30001, 2, {}, [])
    assert cmd[1:3] == ["-m", "sglang.launch_server"]
    assert cmd[cmd.index("--tp") + 1] == "2" and cmd[cmd.index("--model-path") + 1] == str(tmp_path / "target")
