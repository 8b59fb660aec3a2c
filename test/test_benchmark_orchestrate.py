"""The orchestrator with a fake worker (no SGLang): environment per variant, records, command.txt, env.json."""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from benchmark.core.spec import MicroPoints
from benchmark.driver import orchestrate, run
from benchmark.driver.plan import Variant, build_plan

REPO = Path(__file__).resolve().parents[1]

LLAMA = {"hidden_size": 512, "num_hidden_layers": 4, "vocab_size": 32000, "num_attention_heads": 8,
         "num_key_value_heads": 4, "head_dim": 64, "intermediate_size": 1536, "torch_dtype": "bfloat16"}

FAKE_WORKER = textwrap.dedent('''
    import json, os, subprocess, sys, time
    args = sys.argv
    spec = json.load(open(args[args.index("--spec") + 1]))
    out = args[args.index("--out") + 1]
    def emit(item):
        with open(out, "a") as f:
            f.write(json.dumps(item) + "\\n")
    seen = {k: os.environ.get(k) for k in ("PYTHONPATH", "CUDA_VISIBLE_DEVICES", "NCCL_P2P_DISABLE",
                                           "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST")}
    emit({"type": "info", "what": "versions", "data": {"what": "versions", "env": seen, "cwd": os.getcwd(),
          "sglang_file": spec["site"] + "/sglang/__init__.py"}})
    if spec["variant"] == "empty":
        sys.exit(1)
    if spec["variant"] == "sleeper":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open(spec["models"] + "/child.pid", "w").write(str(child.pid))
        time.sleep(60)
    for bs in spec["micro"]["bs"]:
        emit({"type": "record", "mode": "decode", "bs": bs, "k": 1, "topk": 0, "metric": "latency_ms",
              "value": 1.0 + bs, "graph": True, "ctx": spec["micro"]["ctx"], "n": 3})
    if spec["variant"] == "fork" and spec["config"] == "tp2-pcie":
        emit({"type": "error", "where": "verify bs=1 k=2 topk=1", "error": "RuntimeError: planted"})
        sys.exit(5)
''')


def make_world(tmp_path: Path) -> dict:
    """Models (a Llama config), two sites with sglang/ and a dist-info, this module's fake worker."""
    models = tmp_path / "models"
    (models / "target").mkdir(parents=True)
    (models / "draft").mkdir()
    (models / "target" / "config.json").write_text(json.dumps(LLAMA))
    sites = {}
    for name, version in (("stock", "0.5.17"), ("fork", "0.5.17+fastpath.1")):
        site = tmp_path / f"site-{name}"
        meta = site / f"sglang-{version}.dist-info"
        meta.mkdir(parents=True)
        (site / "sglang").mkdir()
        (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
        sites[name] = site
    fake = tmp_path / "fake_worker.py"
    fake.write_text(FAKE_WORKER)
    return {"models": models, "sites": sites, "fake": fake, "out": tmp_path / "results"}


@pytest.fixture
def world(tmp_path: Path) -> dict:
    return make_world(tmp_path)


def _run(world: dict, *extra: str, gpus: str = "2", repeats: str = "1") -> int:
    return run.main(["--configs", "tp1,tp2-pcie", "--backends", "triton", "--kinds", "micro", "--bs", "1,2",
                     "--repeats", repeats, "--gpus", gpus, "--models", str(world["models"]), "--out", str(world["out"]),
                     "--name", "t",
                     "--variant", f"stock={world['sites']['stock']}", "--variant", f"fork={world['sites']['fork']}",
                     "--no-plot", "--bandwidth", "4.8e12", "--worker", f"{sys.executable} {world['fake']}", *extra])


def test_variants_get_their_site_gpus_and_parallel_env(world, capsys):
    assert _run(world) == 3  # the planted failure of fork on tp2-pcie
    (out_dir,) = world["out"].iterdir()
    assert out_dir.name.endswith("-cpu-t")
    results = json.loads((out_dir / "results.json").read_text())
    status = {p["job"]: p["status"] for p in results["processes"]}
    assert status == {"micro-stock-tp1-triton": "ok", "micro-fork-tp1-triton": "ok",
                      "micro-stock-tp2-pcie-triton": "ok", "micro-fork-tp2-pcie-triton": "failed"}
    seen = {p["job"]: p["info"][0] for p in results["processes"]}
    for job, info in seen.items():
        variant = job.split("-")[1]
        site = str(world["sites"][variant])
        assert info["env"]["PYTHONPATH"] == os.pathsep.join([str(REPO / "python"), site, str(REPO)])
        assert info["env"]["NCCL_NVLS_ENABLE"] == "0" and info["env"]["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
        assert info["env"]["NCCL_P2P_DISABLE"] == ("1" if "pcie" in job else None)
        assert info["env"]["CUDA_VISIBLE_DEVICES"] == ("0,1" if "tp2" in job else "0")
        assert not info["cwd"].startswith(str(out_dir))  # scratch folder, not the results
    records = results["records"]
    assert len(records) == 8
    r = next(r for r in records if r["variant"] == "fork" and r["config"] == "tp2-pcie" and r["bs"] == 2)
    assert (r["backend"], r["tp"], r["value"], r["graph"]) == ("triton", 2, 3.0, True)
    assert r["floor_ms"] > 0 and r["floor_bytes"] > 0
    assert any(e["error"] == "RuntimeError: planted" for e in results["errors"])
    assert any("exit status 5" in e["error"] for e in results["errors"])
    assert (out_dir / "raw" / "micro-fork-tp1-triton.jsonl").is_file()
    assert (out_dir / "logs" / "micro-fork-tp1-triton.log").read_text().startswith("$ ")

    command = (out_dir / "command.txt").read_text()
    assert "--configs tp1,tp2-pcie --backends triton" in command
    job_lines = [ln for ln in command.splitlines() if ln.startswith("env ")]
    assert len(job_lines) == 4
    pcie = [ln for ln in job_lines if "tp2-pcie" in ln]
    assert len(pcie) == 2 and all("NCCL_P2P_DISABLE=1" in ln and "CUDA_VISIBLE_DEVICES=0,1" in ln for ln in pcie)
    # the repository as ``.`` (benchmark/driver/portable.py: committed results hold no machine path)
    assert all(f"PYTHONPATH=python:{world['sites']['stock']}:. " in ln for ln in job_lines if "-stock-" in ln)
    assert str(REPO) not in command

    env = json.loads((out_dir / "env.json").read_text())
    assert env["variants"]["fork"]["sglang_version"] == "0.5.17+fastpath.1"
    assert env["variants"]["stock"]["site"] == str(world["sites"]["stock"])
    assert env["variants"]["stock"]["reported"][0]["env"]["PYTHONPATH"].split(os.pathsep)[1] == str(world["sites"]["stock"])
    assert "git" in env and "host" in env

    printed = capsys.readouterr().out
    assert "tp2-pcie triton     decode" in printed and "results:" in printed


def test_budget_skips_jobs_but_still_writes_results(world):
    assert _run(world, "--budget-s", "0") == 3
    (out_dir,) = world["out"].iterdir()
    results = json.loads((out_dir / "results.json").read_text())
    assert {p["status"] for p in results["processes"]} == {"skipped"}
    assert all(p["note"].startswith("budget") for p in results["processes"])
    assert results["records"] == []


def test_jobs_needing_more_gpus_are_listed_not_failed(world, capsys):
    assert _run(world, gpus="1") == 0
    (out_dir,) = world["out"].iterdir()
    results = json.loads((out_dir / "results.json").read_text())
    status = {p["job"]: p["status"] for p in results["processes"]}
    assert status["micro-fork-tp2-pcie-triton"] == "unrunnable" and status["micro-fork-tp1-triton"] == "ok"
    assert results["errors"] == [] and len(results["records"]) == 4
    assert "# micro-fork-tp2-pcie-triton: not started (needs 2 GPUs, 1 found)" in (out_dir / "command.txt").read_text()


def test_a_site_without_sglang_is_refused_before_running(world, capsys):
    (world["sites"]["fork"] / "sglang").rmdir()
    assert _run(world) == 2
    assert "no sglang/ in that folder" in capsys.readouterr().err
    assert not world["out"].exists()


def test_timeout_kills_the_whole_process_group(world, monkeypatch, tmp_path):
    monkeypatch.setattr(orchestrate, "MIN_TIMEOUT_S", 1.0)
    plan = build_plan("quick", [Variant("sleeper", str(world["sites"]["stock"]))], str(world["models"]), gpus=1,
                      kinds=["micro"], configs=["tp1"], micro=MicroPoints(bs=(1,)), calibration=1e-4, repeats=1)
    orch = orchestrate.Orchestrator(tmp_path / "o", REPO, worker_argv=[sys.executable, str(world["fake"])],
                                    budget_s=600)
    (outcome,) = orch.run_plan(plan)
    assert outcome.status == "timeout" and "killed after" in outcome.note
    pid = int((world["models"] / "child.pid").read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        state = Path(f"/proc/{pid}/stat").read_text().split()[2] if Path(f"/proc/{pid}/stat").exists() else "X"
        if state == "Z":
            break
        time.sleep(0.2)
    alive = Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    assert not alive, "the worker's child survived the timeout"


def test_compare_against_a_faster_baseline_exits_1(world, capsys, tmp_path):
    assert _run(world, gpus="1") == 0
    (first,) = world["out"].iterdir()
    baseline = json.loads((first / "results.json").read_text())
    for r in baseline["records"]:  # the baseline was 20% faster: every latency regressed by 25%
        r["value"], r["lo"], r["hi"] = r["value"] * 0.8, r["lo"] * 0.8, r["hi"] * 0.8
        r["rounds"] = [v * 0.8 for v in r["rounds"]]
    (tmp_path / "baseline.json").write_text(json.dumps(baseline))
    capsys.readouterr()
    assert _run(world, "--compare", str(tmp_path / "baseline.json"), gpus="1") == 1
    out = capsys.readouterr().out
    assert "4 figures, 4 moved more than 5% beyond the spread, 0 within it (noise), 4 regressions" in out
    assert "+25.0%" in out and "(1 round)" in out


def test_a_variant_without_figures_does_not_break_the_report(world, capsys):
    """A last variant whose processes all failed or were skipped: the run still reports the others."""
    code = _run(world, "--configs", "tp1", "--variant", f"empty={world['sites']['fork']}")
    out = capsys.readouterr().out
    assert code == 3 and "compare stock -> fork" in out and "empty" not in out.split("compare")[1]


def test_a_lanes_first_process_needs_room_for_its_first_compile(world, tmp_path):
    """Session 29 lost a call to a first process that fit its estimate but not the Triton compile it paid on top:
    the budget check charges the first-compile allowance to each lane's first process only."""
    plan = build_plan("quick", [Variant("stock", str(world["sites"]["stock"])), Variant("fork", str(world["sites"]["fork"]))],
                      str(world["models"]), gpus=1, kinds=["micro"], configs=["tp1"], micro=MicroPoints(bs=(1,)),
                      calibration=1e-3, repeats=1, first_compile_s=1e5)
    assert plan.first_compile_s == 100.0 and all(j.estimate_s() < 1.0 for j in plan.jobs)
    orch = orchestrate.Orchestrator(tmp_path / "o", REPO, worker_argv=[sys.executable, str(world["fake"])],
                                    budget_s=60)
    first, second = orch.run_plan(plan)
    assert first.status == "skipped" and first.note.startswith("budget: ~100 s needed"), first
    assert second.status == "ok", second
