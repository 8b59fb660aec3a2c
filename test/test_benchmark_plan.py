"""The run plan (lanes, TP=2 phase, budget, filters), the draft tree and the selftest checks."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from benchmark.core.errors import BenchError
from benchmark.core.spec import E2EPoints, JobSpec, MicroPoints, point_blocks
from benchmark.driver import run, selftest
from benchmark.driver.plan import ADAPTIVE_STATE_S, ADAPTIVE_STATES, Variant, build_plan
from benchmark.driver.schema import Record, ResultSet
from benchmark.worker.tree import draft_tree

VARIANTS = [Variant("stock", "/tmp/site-stock"), Variant("fork", "/tmp/site-fork")]


def test_sweep_fits_one_ten_minute_call_and_keeps_variants_on_one_gpu():
    plan = build_plan("sweep", VARIANTS, "/m", gpus=2)
    assert plan.estimate_wall_s() <= run.BUDGET_S
    for lane in plan.lanes:
        assert all(j.parallel.tp == 1 for j in lane)
        for i in range(0, len(lane), 2):  # a group's stock and fork run back to back on this GPU
            assert lane[i].group == lane[i + 1].group
            assert [lane[i].variant.name, lane[i + 1].variant.name] == ["stock", "fork"]
            assert lane[i].round == lane[i + 1].round
    assert {j.parallel.name for j in plan.serial} == {"tp2-pcie"}
    kinds = {(j.kind, j.parallel.name, j.backend) for j in plan.jobs}
    assert kinds == {("micro", "tp1", "triton"), ("micro", "tp1", "default"), ("micro", "tp2-pcie", "triton")}
    assert {j.rounds for j in plan.jobs} == {3} and len(plan.jobs) == 18


def test_rounds_alternate_variants_and_name_each_process():
    plan = build_plan("sweep", VARIANTS, "/m", gpus=1, configs=["tp1"], backends=["triton"], repeats=3)
    assert [j.name for j in plan.lanes[0]] == [
        "micro-stock-tp1-triton-r1", "micro-fork-tp1-triton-r1", "micro-stock-tp1-triton-r2",
        "micro-fork-tp1-triton-r2", "micro-stock-tp1-triton-r3", "micro-fork-tp1-triton-r3"]
    assert {j.series for j in plan.jobs} == {"micro-stock-tp1-triton", "micro-fork-tp1-triton"}
    spec = plan.jobs[3].spec()
    assert (spec["round"], spec["rounds"], spec["micro"]["warmup_block"]) == (2, 3, True)
    single = build_plan("sweep", VARIANTS, "/m", gpus=1, configs=["tp1"], backends=["triton"], repeats=1)
    assert [j.name for j in single.jobs] == ["micro-stock-tp1-triton", "micro-fork-tp1-triton"]
    quick = build_plan("quick", VARIANTS, "/m", gpus=2)
    assert {(j.kind, j.rounds) for j in quick.jobs} == {("micro", 2), ("e2e", 1)}
    with pytest.raises(BenchError, match="at least 1 round"):
        build_plan("sweep", VARIANTS, "/m", gpus=1, repeats=0)


def test_e2e_runs_scale_the_estimate_and_must_be_positive():
    one = build_plan("all", VARIANTS, "/m", gpus=1, kinds=["e2e"], configs=["tp1"], backends=["triton"])
    five = build_plan("all", VARIANTS, "/m", gpus=1, kinds=["e2e"], configs=["tp1"], backends=["triton"],
                      e2e=E2EPoints(runs=5))
    assert five.jobs[0].estimate_s() > one.jobs[0].estimate_s()
    assert five.jobs[0].spec()["e2e"]["runs"] == 5
    with pytest.raises(BenchError, match="--e2e-runs 0"):
        build_plan("all", VARIANTS, "/m", gpus=1, kinds=["e2e"], e2e=E2EPoints(runs=0))


def test_warmup_block_comes_first_and_is_estimated():
    assert point_blocks((1, 8, 64), True) == [(1, True), (1, False), (8, False), (64, False)]
    assert point_blocks((4,), False) == [(4, False)]
    with_block = MicroPoints(bs=(1, 8))
    assert with_block.blocks()[0] == (1, True)
    job = build_plan("sweep", VARIANTS, "/m", gpus=1, configs=["tp1"], backends=["triton"], micro=with_block).jobs[0]
    without = replace(job, micro=replace(with_block, warmup_block=False))
    assert job.estimate_s() > without.estimate_s()


def test_one_gpu_cannot_run_tp2():
    plan = build_plan("sweep", VARIANTS, "/m", gpus=1)
    assert len(plan.lanes) == 1 and not plan.serial
    assert plan.unrunnable and all("needs 2 GPUs" in why for _job, why in plan.unrunnable)


def test_job_spec_carries_parallel_settings():
    plan = build_plan("sweep", VARIANTS, "/m", gpus=2, configs=["tp2-pcie"], server_args={"dtype": "bfloat16"})
    job = plan.serial[0]
    spec = json.loads(json.dumps(job.spec()))
    assert spec["server_args"] == {"tp_size": 2, "disable_custom_all_reduce": True, "dtype": "bfloat16"}
    assert job.parallel.env() == {"NCCL_P2P_DISABLE": "1"}
    assert spec["micro"]["ks"] == [2, 4, 8] and spec["site"] == "/tmp/site-stock"


@pytest.mark.parametrize("kwargs,message", [
    ({"configs": ["tp3"]}, "--configs tp3"), ({"backends": ["fa9"]}, "--backends fa9"),
    ({"kinds": ["e2e"], "configs": ["tp2"]}, "filters leave nothing")])
def test_bad_filters_are_named(kwargs, message):
    with pytest.raises(BenchError, match=message):
        build_plan("sweep", VARIANTS, "/m", gpus=2, **kwargs)


@pytest.mark.parametrize("text", ["stock", "=/x", "a b=/x", "stock="])
def test_bad_variant_syntax(text):
    with pytest.raises(BenchError, match="NAME=SITE_DIR"):
        Variant.parse(text)


def test_calibration_scales_estimates():
    plain = build_plan("quick", VARIANTS, "/m", gpus=1)
    slow = build_plan("quick", VARIANTS, "/m", gpus=1, calibration=2.0)
    assert slow.estimate_wall_s() == pytest.approx(2 * plain.estimate_wall_s())


def test_dry_run_prints_plan_without_models(capsys):
    assert run.main(["--dry-run", "--quick", "--gpus", "1", "--variant", "stock=/a", "--variant", "fork=/b"]) == 0
    out = capsys.readouterr().out
    assert "plan 'quick': 6 processes on 1 GPU(s), estimated" in out
    assert "micro-fork-tp1-triton-r2" in out and "e2e-stock-tp1-triton " in out


def test_draft_tree_chain_and_tree():
    chain = draft_tree(4, 1)
    assert chain.depths == [0, 1, 2, 3] and chain.next_token() == [1, 2, 3, -1]
    assert chain.mask_rows()[2] == [True, True, True, False]
    tree = draft_tree(8, 4)
    assert tree.parents == (-1, 0, 0, 0, 0, 1, 1, 1) and tree.max_depth == 2
    assert tree.next_token() == [1, 5, -1, -1, -1, -1, -1, -1]
    assert tree.next_sibling() == [-1, 2, 3, 4, -1, 6, 7, -1]
    assert tree.mask_rows()[6] == [True, True, False, False, False, False, True, False]
    flat = tree.flat_mask(ctx=5)
    assert len(flat) == 8 * (5 + 8) and flat[:5] == [True] * 5


def test_selftest_expects_graphs_inside_the_captured_sizes_only():
    plan = build_plan("selftest", VARIANTS[:1], "/m", gpus=1)
    checks = {(c.job, c.mode, c.bs, c.topk): c.graph for c in selftest.checks_for(plan) if c.k in (1, 3)}
    assert checks[("micro-stock-tp1-triton", "verify", 1, 4)] is True
    assert checks[("micro-stock-tp1-triton", "verify", 4, 1)] is False  # past graph_max_bs 2: eager fallback
    assert checks[("micro-stock-tp1-triton", "decode_eager", 1, 0)] is False


def test_selftest_verdict_names_the_failing_path():
    plan = build_plan("selftest", VARIANTS[:1], "/m", gpus=1, kinds=["micro"])
    records = [Record("stock", "tp1", "triton", c.mode, c.bs, c.k, c.topk, c.metric, 1.0, graph=c.graph)
               for c in selftest.checks_for(plan)]
    ok, text = selftest.verdict(plan, ResultSet(records=records))
    assert ok and "FAIL" not in text
    broken = [r for r in records if not (r.mode == "verify" and r.topk == 4 and r.bs == 1)]
    errors = [{"job": "micro-stock-tp1-triton", "where": "verify bs=1 k=3 topk=4", "error": "RuntimeError: boom"}]
    ok, text = selftest.verdict(plan, ResultSet(records=broken, errors=errors))
    assert not ok
    assert "FAIL  micro-stock-tp1-triton: verify graph bs=1 k=3 topk=4: verify bs=1 k=3 topk=4: RuntimeError" in text


def test_selftest_with_rounds_checks_each_variant_once():
    one = build_plan("selftest", VARIANTS[:1], "/m", gpus=1, kinds=["micro"])
    two = build_plan("selftest", VARIANTS[:1], "/m", gpus=1, kinds=["micro"], repeats=2)
    assert [j.name for j in two.jobs] == ["micro-stock-tp1-triton-r1", "micro-stock-tp1-triton-r2"]
    assert selftest.checks_for(two) == selftest.checks_for(one)
    records = [Record("stock", "tp1", "triton", c.mode, c.bs, c.k, c.topk, c.metric, 1.0, graph=c.graph)
               for c in selftest.checks_for(two)]
    processes = [{"job": "micro-stock-tp1-triton-r2", "series": "micro-stock-tp1-triton", "status": "skipped",
                  "note": "budget"}]
    ok, text = selftest.verdict(two, ResultSet(records=records, processes=processes))
    assert ok and "SKIP" not in text  # round 1 measured every path: a skipped round 2 changes nothing
    ok, text = selftest.verdict(two, ResultSet(processes=processes))
    assert ok and "SKIP  micro-stock-tp1-triton: decode graph bs=1 (budget)" in text


def test_variant_env_applies_to_the_named_variant_only():
    from benchmark.driver.orchestrate import job_env
    from benchmark.driver.plan import parse_variant_env

    stock, fork = parse_variant_env(["fork:SGLANG_TEST_X=1", "fork:B=two=2"], VARIANTS)
    assert stock.env == () and fork.env == (("B", "two=2"), ("SGLANG_TEST_X", "1"))
    plan = build_plan("quick", [stock, fork], "/m", gpus=2, configs=["tp1"], kinds=["micro"])
    envs = {j.variant.name: job_env(j, "0", Path("/repo")) for j in plan.jobs}
    assert envs["fork"]["SGLANG_TEST_X"] == "1" and "SGLANG_TEST_X" not in envs["stock"]
    assert [j.spec()["variant_env"] for j in plan.jobs][:2] == [{}, {"B": "two=2", "SGLANG_TEST_X": "1"}]


@pytest.mark.parametrize("text, message", [("nocolon", "NAME:KEY=VALUE"), ("fork:NOEQ", "NAME:KEY=VALUE"),
                                           ("other:A=1", "no --variant named 'other'"),
                                           ("fork:BAD-KEY=1", "NAME:KEY=VALUE")])
def test_bad_variant_env_is_named(text, message):
    from benchmark.driver.plan import parse_variant_env

    with pytest.raises(BenchError, match=message):
        parse_variant_env([text], VARIANTS)


def test_e2e_options_reach_the_points_and_the_estimate(tmp_path):
    args = run.parse_args(["--profile", "all", "--kinds", "e2e", "--configs", "tp2-pcie", "--bs", "1",
                           "--output-len", "256", "--acc-len", "0", "--profile-steps", "24",
                           "--e2e-warmup-len", "256", "--variant", "fork=/s"])
    plan = run.make_plan(args, 2, run.parse_variants(args))
    (job,) = plan.jobs
    assert (job.e2e.acc_len, job.e2e.output_len, job.e2e.profile_steps, job.e2e.bs) == (0, 256, 24, (1,))
    assert job.e2e.warmup_len == 256
    unprofiled = replace(job, e2e=replace(job.e2e, profile_steps=0))
    assert job.estimate_s() > unprofiled.estimate_s()
    assert job.estimate_s() > replace(job, e2e=replace(job.e2e, warmup_len=16)).estimate_s()
    assert "real acceptance" in plan.describe()


def test_long_prompts_count_in_the_e2e_estimate(tmp_path):
    """Session 37's kimi16 job (43 GB, 16k-token prompts, bs 1 / 8, 2 runs) was planned at 162 s and killed at its
    513-s timeout inside the spec engine's bs-8 prefills: the estimate now counts each engine's prefills, and their
    attention over the prompt's own context."""
    args = run.parse_args(["--profile", "all", "--kinds", "e2e", "--configs", "tp1", "--bs", "1,8",
                           "--prompt-len", "16384", "--output-len", "128", "--e2e-runs", "2", "--variant", "tma=/s"])
    (job,) = run.make_plan(args, 1, run.parse_variants(args)).jobs
    job = replace(job, weights_gb=43.06)
    assert job.estimate_s() > 513
    assert job.prefill_s(1, 16384) == pytest.approx(4.2, rel=0.15)  # measured: 0.58 s + 3.58 s for the two chunks
    short = replace(job, e2e=replace(job.e2e, prompt_len=128))
    assert short.estimate_s() < job.estimate_s() / 2
    assert job.prefill_s(8, 16384) == pytest.approx(8 * job.prefill_s(1, 16384))


@pytest.mark.parametrize("k, want", [(None, (3, 1, 4)), ("8", (7, 1, 8)), ("2", (1, 1, 2))])
def test_e2e_k_sets_the_starting_chain_and_ks_does_not(k, want):
    """Session 22 passed --ks 8 to start an adaptive e2e run at K 8; --ks sets only the micro points, so the run
    started at K 4 (the points' default here; a model pair's models.json otherwise). --e2e-k is the e2e knob."""
    argv = ["--profile", "all", "--kinds", "e2e", "--configs", "tp1", "--bs", "1", "--ks", "6",
            "--variant", "fork=/s"] + (["--e2e-k", k] if k else [])
    args = run.parse_args(argv)
    (job,) = run.make_plan(args, 1, run.parse_variants(args)).jobs
    assert (job.e2e.steps, job.e2e.topk, job.e2e.draft_tokens) == want


def test_e2e_k_below_two_is_refused():
    args = run.parse_args(["--profile", "all", "--kinds", "e2e", "--configs", "tp1", "--e2e-k", "1",
                           "--variant", "fork=/s"])
    with pytest.raises(BenchError, match="--e2e-k 1"):
        run.make_plan(args, 1, run.parse_variants(args))


def test_worker_reads_back_the_typed_spec_a_job_writes():
    plan = build_plan("all", [Variant.parse("fork=/site")], "/models", gpus=2, configs=["tp2-pcie"],
                      backends=["triton"], kinds=["micro", "e2e"], e2e=E2EPoints(bs=(1, 8), pysample_runs=2))
    assert {job.kind for job in plan.jobs} == {"micro", "e2e"}
    for job in plan.jobs:
        spec = JobSpec.from_spec(json.loads(json.dumps(job.spec())))  # through the JSON file, as the worker reads it
        assert (spec.kind, spec.tp, spec.site, spec.backend, spec.job) == (job.kind, 2, "/site", "triton", job.name)
        assert spec.micro == job.micro and spec.e2e == job.e2e  # tuples again, not lists
        assert spec.server_args["disable_custom_all_reduce"] is True


def test_spec_defaults_are_the_points_defaults_and_unknown_fields_fail():
    spec = JobSpec.from_spec({"kind": "e2e", "models": "/m", "e2e": {"bs": [1]}})
    assert spec.e2e == E2EPoints(bs=(1,)) and spec.e2e.runs == E2EPoints.runs == 1 and spec.micro is None
    with pytest.raises(BenchError, match="E2EPoints: unknown field.*output_lenn"):
        JobSpec.from_spec({"kind": "e2e", "models": "/m", "e2e": {"output_lenn": 4}})
    with pytest.raises(BenchError, match="job spec: unknown field.*modles"):
        JobSpec.from_spec({"kind": "e2e", "modles": "/m"})


def test_adaptive_speculation_adds_its_extra_graph_states_to_the_estimate():
    e2e = E2EPoints(bs=(1, 8))
    plain = build_plan("all", VARIANTS, "/m", gpus=1, configs=["tp1"], backends=["triton"], kinds=["e2e"],
                       e2e=e2e).jobs[0]
    adaptive = build_plan("all", VARIANTS, "/m", gpus=1, configs=["tp1"], backends=["triton"], kinds=["e2e"],
                          e2e=e2e, server_args={"speculative_adaptive": True}).jobs[0]
    assert adaptive.estimate_s() - plain.estimate_s() == pytest.approx(ADAPTIVE_STATES * ADAPTIVE_STATE_S)


@pytest.mark.parametrize("misses, given, want", [
    ({"accept_length": 3, "miss_rate": None}, None, 0),  # a pair whose draft misses: its own acceptance
    ({"accept_length": None, "miss_rate": 0.2}, None, 0),
    ({"accept_length": None, "miss_rate": None}, None, 3),  # the exact oracle: the simulation, as before
    ({"accept_length": 3, "miss_rate": None}, "2.5", 2.5),  # --acc-len given: it wins
    (None, None, 3),  # no oracle in models.json (random wiring)
])
def test_acc_len_defaults_to_real_acceptance_for_a_pair_that_misses(tmp_path, misses, given, want):
    for side in ("target", "draft"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "config.json").write_text("{}")
    oracle = None if misses is None else {"misses": misses}
    (tmp_path / "models.json").write_text(json.dumps({"oracle": oracle, "speculative": {}}))
    argv = ["--profile", "all", "--kinds", "e2e", "--configs", "tp1", "--bs", "1", "--models", str(tmp_path),
            "--variant", "fork=/s"] + (["--acc-len", given] if given else [])
    args = run.parse_args(argv)
    (job,) = run.make_plan(args, 1, run.parse_variants(args)).jobs
    assert job.e2e.acc_len == want


def test_heavy_weights_and_long_contexts_lengthen_the_estimate():
    micro = MicroPoints(bs=(1, 8, 32), ks=(4,), topks=(1,), ctx=8192)
    light = build_plan("all", VARIANTS, "/m", gpus=1, kinds=["micro"], configs=["tp1"], backends=["triton"],
                       micro=micro, repeats=1).jobs[0]
    kimi16 = replace(light, weights_gb=43.0)
    short = replace(kimi16, micro=replace(micro, ctx=128))
    assert short.estimate_s() - light.estimate_s() >= 43.0 / 1.8  # the weights load in every process
    assert kimi16.estimate_s() > short.estimate_s() + 5.0  # and 41 requests of 8k tokens prefill
    e2e = build_plan("all", VARIANTS, "/m", gpus=1, kinds=["e2e"], configs=["tp1"], backends=["triton"],
                     repeats=1, e2e_repeats=1, weights_gb=43.0).jobs[0]
    assert e2e.weights_gb == 43.0 and e2e.estimate_s() - replace(e2e, weights_gb=0.0).estimate_s() > 2 * 23.0


def test_the_first_compile_allowance_follows_the_targets_architecture():
    """MLA + MoE targets compile far more Triton kernels in their first process than a dense pair (kimi16: 93-101 s
    against dense-4's 27 s); the plan carries the allowance, scaled by the calibration like the estimates."""
    from sglang_fastpath.models import deepseek, llama
    from sglang_fastpath.models.shapes import DeepseekShape, ExpertDtype, LlamaShape

    from benchmark.core.floor import ModelShape
    from benchmark.driver.plan import FIRST_COMPILE_MLA_MOE_S, FIRST_COMPILE_S, first_compile_for

    kimi = ModelShape.from_config(deepseek.config(DeepseekShape().with_overrides(layers=16, routed_experts=96),
                                                  ExpertDtype.INT4))
    dense = ModelShape.from_config(llama.config(LlamaShape(layers=8, hidden=4096, intermediate=14336, heads=32,
                                                           kv_heads=8, vocab=128256)))
    assert first_compile_for(kimi) == FIRST_COMPILE_MLA_MOE_S > first_compile_for(dense) == FIRST_COMPILE_S
    assert first_compile_for(None) == FIRST_COMPILE_S  # no readable config yet (a dry run before the draw)
    plan = build_plan("quick", VARIANTS, "/m", gpus=1, first_compile_s=FIRST_COMPILE_MLA_MOE_S, calibration=0.5)
    assert plan.first_compile_s == 0.5 * FIRST_COMPILE_MLA_MOE_S
    assert plan.estimate_wall_s() == pytest.approx(plan.first_compile_s + sum(j.estimate_s() for j in plan.jobs))
