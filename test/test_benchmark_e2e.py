"""The e2e job against a stand-in ``sglang.Engine``: real acceptance, per-run all-reduce counts, profiles."""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

import pytest
from profiler_steps import step_events, write_trace

from benchmark.core.spec import JobSpec
from benchmark.worker import e2e
from benchmark.worker.sink import Sink

LLAMA = {"hidden_size": 512, "num_hidden_layers": 4, "vocab_size": 32000, "num_attention_heads": 8,
         "num_key_value_heads": 4, "head_dim": 64, "intermediate_size": 1536, "torch_dtype": "bfloat16"}
AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"


def _job(spec: dict) -> JobSpec:
    """The typed spec a worker reads, from the fields a test sets (the rest take their defaults)."""
    return JobSpec.from_spec({"kind": "e2e", **spec})


class FakeEngine:
    """Counts 17 all-reduces per generated token (decode) or 4 per token (verify), like the fork's telemetry."""

    started: list[dict] = []
    sampled: list[str] = []
    frozen_after: list[int] = []  # all-reduces counted when freeze_gc was called: after the warm-up, before timing
    spec_shift = 0

    def __init__(self, **kwargs: object) -> None:
        self.kwargs = kwargs
        self.spec = kwargs.get("speculative_algorithm") == "EAGLE3"
        self.count = 0
        self.profile_dir: str | None = None
        FakeEngine.started.append(kwargs)

    def generate(self, input_ids: list[list[int]], sampling_params: dict) -> list[dict]:
        n = sampling_params["max_new_tokens"]
        switch = Path(os.environ.get("FASTPATH_PYSAMPLE_DIR", "/nonexistent")) / "on"
        if switch.is_file():  # what the sampler in the scheduler would see
            FakeEngine.sampled.append(switch.read_text())
        self.count += len(input_ids) * n * (4 if self.spec else 17)
        if self.profile_dir:  # the scheduler writes its trace when the profiled steps are done
            # one all-reduce, then 4 steps whose graph keeps the GPU busy 0.3 ms (decode) or 0.6 ms (verify)
            steps = step_events("TARGET_VERIFY", 600, 4) if self.spec else step_events("DECODE", 300, 4)
            write_trace(Path(self.profile_dir) / "1-TP-0.trace.json.gz",
                        [{"ph": "X", "cat": "kernel", "name": AR, "ts": 0, "dur": 12}, *steps])
            self.profile_dir = None
        meta = {"completion_tokens": n, **({"spec_accept_length": 4.0} if self.spec else {})}
        shift = FakeEngine.spec_shift if self.spec else 0  # a non-zero shift: EAGLE-3 "changes" the output
        return [{"meta_info": dict(meta), "output_ids": [(sum(ids) + j + shift) % 97 for j in range(n)]}
                for ids in input_ids]

    def get_server_info(self) -> dict:
        mode = "target_verify" if self.spec else "decode"
        row = {"mode": mode, "source": "replay", "placement": "in_place", "method": "pynccl", "bytes_le": "8192",
               "count": self.count}
        return {"internal_states": [{"all_reduce_stats": {"counts": [row]}}]}

    def start_profile(self, output_dir: str, **kwargs: object) -> None:
        self.profile_dir = output_dir

    def shutdown(self) -> None:
        pass

    def freeze_gc(self) -> None:
        FakeEngine.frozen_after.append(self.count)


@pytest.fixture
def models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A models folder with a Llama target config; ``sglang`` is the stand-in for the test."""
    fake = types.ModuleType("sglang")
    fake.Engine = FakeEngine
    monkeypatch.setitem(sys.modules, "sglang", fake)
    monkeypatch.setenv("SGLANG_SIMULATE_ACC_LEN", "-1")  # recorded, so the job's own setting is undone after
    monkeypatch.delenv("SGLANG_SIMULATE_ACC_LEN")
    (tmp_path / "m" / "target").mkdir(parents=True)
    (tmp_path / "m" / "target" / "config.json").write_text(json.dumps(LLAMA))
    return tmp_path / "m"


def test_e2e_job_keeps_real_acceptance_and_records_counts_and_profiles(tmp_path, models):
    spec = {"models": str(models), "backend": "triton", "server_args": {"tp_size": 2},
            "e2e": {"bs": [1, 2], "prompt_len": 4, "output_len": 8, "acc_len": 0, "steps": 3, "topk": 1,
                    "draft_tokens": 4, "profile_steps": 5}}
    out = tmp_path / "job.jsonl"
    assert e2e.run_job(_job(spec), Sink(str(out)), str(out)) == 0
    assert "SGLANG_SIMULATE_ACC_LEN" not in __import__("os").environ
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert not [x for x in lines if x["type"] == "error"], lines
    tps = {(x["mode"], x["bs"]) for x in lines if x["type"] == "record" and x["metric"] == "tokens_per_s"}
    assert tps == {("e2e_nospec", 1), ("e2e_nospec", 2), ("e2e_spec", 1), ("e2e_spec", 2)}
    counts = {(x["data"]["mode"], x["data"]["bs"]): x["data"]["rows"] for x in lines
              if x.get("what") == "all_reduce_counts"}
    assert counts[("e2e_nospec", 2)][0]["count"] == 2 * 8 * 17 and counts[("e2e_nospec", 2)][0]["per_token"] == 17
    assert counts[("e2e_spec", 1)][0]["per_token"] == 4
    traces = [x["data"] for x in lines if x.get("what") == "trace_summary"]
    assert {(t["mode"], t["bs"]) for t in traces} == set(tps)
    summary = traces[0]["traces"]["1-TP-0.trace.json.gz"]
    assert summary["categories"]["nccl_allreduce"]["count"] == 1
    assert Path(traces[0]["folder"]).parent == Path(str(out.with_suffix("")) + "-traces")
    assert FakeEngine.started[-1]["speculative_num_draft_tokens"] == 4
    busy = {(x["mode"], x["bs"]): x["value"] for x in lines if x["type"] == "record" and x["metric"] == "gpu_busy_ms"}
    assert busy == {("e2e_nospec", 1): 0.3, ("e2e_nospec", 2): 0.3, ("e2e_spec", 1): 0.6, ("e2e_spec", 2): 0.6}


def test_a_positive_acc_len_is_simulated(tmp_path, models):
    spec = {"models": str(models), "backend": "default", "server_args": {},
            "e2e": {"bs": [1], "prompt_len": 4, "output_len": 4, "acc_len": 3.0, "steps": 3, "topk": 1,
                    "draft_tokens": 4, "profile_steps": 0}}
    out = tmp_path / "job.jsonl"
    assert e2e.run_job(_job(spec), Sink(str(out)), str(out)) == 0
    assert __import__("os").environ["SGLANG_SIMULATE_ACC_LEN"] == "3.0"
    assert not (tmp_path / "job-traces").exists()


def _run_triton_job(tmp_path: Path, models: Path, **points: object) -> list[dict]:
    """One e2e job on the triton backend, real acceptance, no profile, bs 2 x 8 tokens unless ``points`` say;
    its JSON lines."""
    e2e_points = {"bs": [2], "prompt_len": 4, "output_len": 8, "acc_len": 0, "steps": 3, "topk": 1,
                  "draft_tokens": 4, "profile_steps": 0, **points}
    out = tmp_path / "job.jsonl"
    spec = {"models": str(models), "backend": "triton", "server_args": {}, "e2e": e2e_points}
    assert e2e.run_job(_job(spec), Sink(str(out)), str(out)) == 0
    return [json.loads(x) for x in out.read_text().splitlines()]


def test_runs_time_the_call_several_times_and_report_the_median(tmp_path, models):
    lines = _run_triton_job(tmp_path, models, runs=3)
    tps = [x for x in lines if x["type"] == "record" and x["metric"] == "tokens_per_s"]
    assert [x["n"] for x in tps] == [3, 3]
    for record in tps:
        runs = record["extra"]["runs_seconds"]
        assert len(runs) == 3 and record["extra"]["seconds"] == round(sorted(runs)[1], 4)
    counts = {x["data"]["mode"]: x["data"]["rows"][0] for x in lines if x.get("what") == "all_reduce_counts"}
    assert counts["e2e_nospec"]["per_token"] == 17 and counts["e2e_nospec"]["count"] == 3 * 2 * 8 * 17


@pytest.fixture
def generate_calls(monkeypatch) -> list[tuple[int, int]]:
    """(batch size, max_new_tokens) of every generate call the fake engines get, in order."""
    calls: list[tuple[int, int]] = []
    generate = FakeEngine.generate

    def recording(self, input_ids, sampling_params):
        calls.append((len(input_ids), sampling_params["max_new_tokens"]))
        return generate(self, input_ids, sampling_params)

    monkeypatch.setattr(FakeEngine, "generate", recording)
    return calls


def test_every_batch_size_is_warmed_up_at_its_own_shape_before_it_is_timed(tmp_path, models, generate_calls):
    calls = generate_calls
    spec = {"models": str(models), "backend": "triton", "server_args": {},
            "e2e": {"bs": [1, 4], "prompt_len": 4, "output_len": 64, "acc_len": 0, "steps": 3, "topk": 1,
                    "draft_tokens": 4, "profile_steps": 0, "runs": 2}}
    out = tmp_path / "job.jsonl"
    assert e2e.run_job(_job(spec), Sink(str(out)), str(out)) == 0
    per_engine = [(4, 16), (1, 64), (1, 64), (1, 64), (1, 1), (1, 1), (4, 64), (4, 64), (4, 64), (4, 1), (4, 1)]
    # spec off, then on: a short engine warm-up, then at each shape a full-length untimed call, its timed runs and
    # its first tokens
    assert calls == per_engine * 2


def test_a_longer_warm_up_call_runs_at_each_batch_size_before_its_timed_runs(tmp_path, models, generate_calls):
    """--e2e-warmup-len: the untimed call at each shape generates that many tokens (capped at output_len; 0, the
    default, is output_len); the engine-wide warm-up stays short."""
    calls = generate_calls
    for warmup_len, expected in ((16, 16), (48, 48), (500, 64), (0, 64)):
        calls.clear()
        spec = {"models": str(models), "backend": "triton", "server_args": {},
                "e2e": {"bs": [2], "prompt_len": 4, "output_len": 64, "acc_len": 0, "steps": 3, "topk": 1,
                        "draft_tokens": 4, "profile_steps": 0, "runs": 1, "warmup_len": warmup_len}}
        out = tmp_path / f"job-{warmup_len}.jsonl"
        assert e2e.run_job(_job(spec), Sink(str(out)), str(out)) == 0
        assert calls[:3] == [(2, 16), (2, expected), (2, 64)]


def test_the_decode_rate_leaves_the_first_token_out(tmp_path, models, monkeypatch):
    """A call of n new tokens at bs b takes 10 ms + 1 ms per token: after the first token, b*(n-1) tokens in
    (n-1) ms, so b*1000 tokens/s, while the end-to-end rate counts the first token's 11 ms too."""
    generate = FakeEngine.generate
    monkeypatch.setattr(e2e, "_generate", lambda engine, prompts, n: (0.010 + 0.001 * n, generate(
        engine, prompts, {"max_new_tokens": n})))
    lines = _run_triton_job(tmp_path, models, runs=3)
    rates = {(x["mode"], x["metric"]): x for x in lines if x["type"] == "record" and "tokens_per_s" in x["metric"]}
    for mode in ("e2e_nospec", "e2e_spec"):
        assert rates[(mode, "tokens_per_s")]["value"] == pytest.approx(16 / 0.018)
        decode = rates[(mode, "decode_tokens_per_s")]
        assert decode["value"] == pytest.approx(2000.0) and decode["extra"]["prefill_s"] == 0.011
        assert decode["n"] == 3


def test_no_decode_rate_when_the_first_token_is_most_of_the_call(tmp_path, models, monkeypatch):
    """A 1-token call of 10 ms against a 12-ms full call leaves 2 ms of decode: below the 25% share, no rate."""
    generate = FakeEngine.generate
    monkeypatch.setattr(e2e, "_generate", lambda engine, prompts, n: (0.010 if n == 1 else 0.012, generate(
        engine, prompts, {"max_new_tokens": n})))
    lines = _run_triton_job(tmp_path, models, runs=3)
    metrics = {x.get("metric") for x in lines}
    assert "tokens_per_s" in metrics and "decode_tokens_per_s" not in metrics
    # and the job says why (session 41's 16k-prompt run had no decode rate and no word of it)
    skipped = [x["data"] for x in lines if x.get("what") == "decode_rate_skipped"]
    assert {d["mode"] for d in skipped} == {"e2e_nospec", "e2e_spec"}, skipped
    assert skipped[0]["decode_share"] == pytest.approx(2 / 12, abs=1e-3) and skipped[0]["min_share"] == 0.25


def test_no_decode_rate_for_one_new_token(tmp_path, models):
    metrics = {x.get("metric") for x in _run_triton_job(tmp_path, models, output_len=1)}
    assert "tokens_per_s" in metrics and "decode_tokens_per_s" not in metrics


@pytest.mark.parametrize("shift", [0, 1])
def test_real_acceptance_checks_greedy_parity(tmp_path, models, monkeypatch, shift):
    monkeypatch.setattr(FakeEngine, "spec_shift", shift)
    spec = {"models": str(models), "backend": "triton", "server_args": {},
            "e2e": {"bs": [1, 2], "prompt_len": 4, "output_len": 8, "acc_len": 0, "steps": 3, "topk": 1,
                    "draft_tokens": 4, "profile_steps": 0}}
    out = tmp_path / "job.jsonl"
    assert e2e.run_job(_job(spec), Sink(str(out)), str(out)) == shift
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    parity = [x["data"] for x in lines if x.get("what") == "greedy_parity"]
    assert parity == [{"what": "greedy_parity", "bs": [1, 2], "equal": [not shift, not shift]}]
    errors = [x for x in lines if x["type"] == "error"]
    assert (errors[0]["error"] if errors else None) == \
        ("ParityMismatch: EAGLE-3 changed the greedy output at bs [1, 2]" if shift else None)


def test_simulated_acceptance_is_not_checked_for_parity(tmp_path, models, monkeypatch):
    monkeypatch.setattr(FakeEngine, "spec_shift", 1)  # simulated acceptance changes outputs by design
    spec = {"models": str(models), "backend": "triton", "server_args": {},
            "e2e": {"bs": [1], "prompt_len": 4, "output_len": 8, "acc_len": 3.0, "steps": 3, "topk": 1,
                    "draft_tokens": 4, "profile_steps": 0}}
    out = tmp_path / "job.jsonl"
    assert e2e.run_job(_job(spec), Sink(str(out)), str(out)) == 0
    assert "greedy_parity" not in out.read_text()


def test_pysample_runs_are_labelled_and_reach_the_schedulers_path(tmp_path, models, monkeypatch):
    monkeypatch.setattr(e2e.time, "sleep", lambda s: None)
    monkeypatch.setenv("PYTHONPATH", "site")
    monkeypatch.delenv("FASTPATH_PYSAMPLE_DIR", raising=False)
    FakeEngine.sampled.clear()
    spec = {"models": str(models), "backend": "triton", "server_args": {},
            "e2e": {"bs": [1, 4], "prompt_len": 4, "output_len": 8, "acc_len": 3.0, "steps": 3, "topk": 1,
                    "draft_tokens": 4, "profile_steps": 0, "pysample_runs": 2}}
    out = tmp_path / "job.jsonl"
    assert e2e.run_job(_job(spec), Sink(str(out)), str(out)) == 0
    folder = Path(os.environ["FASTPATH_PYSAMPLE_DIR"])
    assert folder == Path(str(out.with_suffix("")) + "-pysample") and not (folder / "on").exists()
    assert os.environ["PYTHONPATH"].split(os.pathsep) == [str(e2e.PYSAMPLE_SITE), "site"]
    assert FakeEngine.sampled == ["e2e_nospec-bs1"] * 2 + ["e2e_nospec-bs4"] * 2 + ["e2e_spec-bs1"] * 2 + [
        "e2e_spec-bs4"] * 2


@pytest.mark.parametrize("freeze", [False, True])
def test_the_freeze_gc_variant_freezes_each_engine_after_its_warm_up(tmp_path, models, monkeypatch, freeze: bool):
    """``FASTPATH_BENCH_FREEZE_GC=1`` (a variant's env) makes each engine call freeze_gc once, after the first warm-up
    call and before any timed run; without it, never."""
    if freeze:
        monkeypatch.setenv(e2e.FREEZE_GC_VAR, "1")
    else:
        monkeypatch.delenv(e2e.FREEZE_GC_VAR, raising=False)
    FakeEngine.frozen_after.clear()
    spec = {"models": str(models), "backend": "triton", "server_args": {},
            "e2e": {"bs": [1, 2], "prompt_len": 4, "output_len": 8, "acc_len": 0, "steps": 3, "topk": 1,
                    "draft_tokens": 4}}
    out = tmp_path / "job.jsonl"
    assert e2e.run_job(_job(spec), Sink(str(out)), str(out)) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    frozen = [x["data"]["mode"] for x in lines if x.get("what") == "freeze_gc"]
    # the warm-up generates 8 tokens for both prompts: 2 * 8 * 17 all-reduces without speculation, 2 * 8 * 4 with
    assert (frozen, FakeEngine.frozen_after) == ((["e2e_nospec", "e2e_spec"], [2 * 8 * 17, 2 * 8 * 4]) if freeze
                                                 else ([], []))
