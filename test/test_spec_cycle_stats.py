"""Patch 0012: EAGLE cycle telemetry (phase times from events read without waiting, graph hits, K, accept).

The last tests check the benchmark harness's side: the e2e job records ``verify_graph_hit`` and
``cycle_ms`` per spec-on batch size from the ``spec_cycle`` snapshots around its timed runs.

Runs ``spec_cycle_stats`` of each patched tree (0.5.17, and the upstream port on 0.5.23) on CPU
with stand-in timing events whose GPU progress the test controls: a cycle is read only once its
last event has completed, and nothing ever waits. The EAGLE worker's ``forward_batch_generation``
and the scheduler's ``get_internal_state`` run with stand-ins around them; on each pristine tree
the worker records no cycle (xfail strict), so the integration test can fail.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import logging
import sys
import types
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from sglang_trees import PATCHED, PATCHED_AND_PRISTINE, TreeImporter, load_defs, source
from sglang_trees import trees  # noqa: F401 (a fixture)
from test_graph_fallback import load_fallback_module

from benchmark.core.spec import JobSpec
from benchmark.driver.schema import METRICS, Direction
from benchmark.worker import e2e, engine_probes
from benchmark.worker.sink import Sink

STATS = "sglang.srt.speculative.spec_cycle_stats"
WORKER = "sglang.srt.speculative.eagle_worker_v2"
SCHEDULER = "sglang.srt.managers.scheduler"
INTERNAL_STATE = "sglang.srt.managers.scheduler_components.internal_state"  # 0.5.23's /server_info
# The patched tree whose spec_cycle_stats and graph_fallback a (pristine) tree's worker runs with.
PATCHED_TWIN = {"patched": "patched", "pristine": "patched", "upstream": "upstream",
                "upstream_pristine": "upstream"}


class FakeGpu:
    """A stream of timing events: a record takes the GPU clock; ``complete`` moves the GPU on."""

    def __init__(self) -> None:
        self.now_ms = 0.0
        self.recorded = 0
        self.completed = 0
        self.created = 0

    def event(self) -> FakeEvent:
        self.created += 1
        return FakeEvent(self)

    def run(self, ms: float) -> None:
        self.now_ms += ms

    def complete(self, upto: int | None = None) -> None:
        self.completed = self.recorded if upto is None else upto


class FakeEvent:
    def __init__(self, gpu: FakeGpu) -> None:
        self.gpu, self.seq, self.stamp = gpu, None, None

    def record(self) -> None:
        self.gpu.recorded += 1
        self.seq, self.stamp = self.gpu.recorded, self.gpu.now_ms

    def query(self) -> bool:
        return self.seq is not None and self.seq <= self.gpu.completed

    def elapsed_time(self, end: FakeEvent) -> float:
        if not (self.query() and end.query()):
            raise RuntimeError("cudaErrorNotReady: read before the event completed")
        return end.stamp - self.stamp

    def synchronize(self) -> None:
        raise AssertionError("the host waited for the GPU")


class Fallbacks:
    """Stand-in for graph_fallback.total: the test says which phase fell back."""

    def __init__(self) -> None:
        self.n = 0

    def total(self) -> int:
        return self.n


def load_stats(tree: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("fastpath_spec_cycle_stats", source(tree, STATS))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def configured(tree: Path, gpu: FakeGpu, fallbacks: Callable[[], int] = lambda: 0, **kwargs: Any):
    stats = load_stats(tree)
    stats.configure(enabled=True, fallback_total=fallbacks, event_factory=gpu.event, **kwargs)
    return stats


def run_cycle(stats, gpu: FakeGpu, ms=(1.0, 2.0, 0.5), k: int = 4, eager=(), fallbacks: Fallbacks | None = None):
    """One cycle: each phase's GPU time; a phase in ``eager`` notes a fallback."""
    cycle = stats.start()
    for i, phase in enumerate(("draft", "verify", "draft_extend")):
        gpu.run(ms[i])
        if phase in eager:
            fallbacks.n += 1
        if i < 2:
            cycle.phase_done()
    cycle.finish(k)
    return cycle


@pytest.mark.parametrize("tree_name", PATCHED)
def test_cycles_are_read_only_after_their_last_event_completed(trees, tree_name: str) -> None:
    gpu = FakeGpu()
    stats = configured(trees.get(tree_name), gpu)
    run_cycle(stats, gpu, ms=(1.0, 2.0, 0.5))
    run_cycle(stats, gpu, ms=(1.5, 3.0, 0.5))
    snap = stats.snapshot()  # the GPU has completed nothing yet: no wait, nothing read
    assert (snap["cycles"], snap["timed"]) == (2, 0)
    gpu.complete(upto=4 + 3)  # cycle 1 done, cycle 2 up to its verify end only
    snap = stats.snapshot()
    assert snap["timed"] == 1
    assert (snap["draft"]["ms_sum"], snap["verify"]["ms_sum"], snap["draft_extend"]["ms_sum"]) == (1.0, 2.0, 0.5)
    assert snap["cycle"]["ms_sum"] == 3.5
    gpu.complete()
    run_cycle(stats, gpu)  # start() reads cycle 2 before timing cycle 3
    assert stats.snapshot()["timed"] == 2
    assert stats.snapshot()["verify"]["ms_sum"] == 5.0
    assert gpu.created == 3 * 4 - 4  # cycle 3 reused cycle 1's events


@pytest.mark.parametrize("tree_name", PATCHED)
def test_a_full_ring_drops_the_oldest_cycle_unread(trees, tree_name: str) -> None:
    gpu = FakeGpu()
    stats = configured(trees.get(tree_name), gpu)
    for _ in range(stats.RING_SIZE + 2):
        run_cycle(stats, gpu)
    gpu.complete()
    snap = stats.snapshot()
    assert (snap["cycles"], snap["timed"], snap["dropped"]) == (stats.RING_SIZE + 2, stats.RING_SIZE, 2)


@pytest.mark.parametrize("tree_name", PATCHED)
def test_means_medians_graph_hits_and_k(trees, tree_name: str) -> None:
    gpu, fallbacks = FakeGpu(), Fallbacks()
    stats = configured(trees.get(tree_name), gpu, fallbacks.total)
    verify_ms = [1.0, 2.0, 3.0, 10.0, 4.0]
    eager = [(), ("verify",), (), ("verify", "draft_extend"), ()]
    for v, e, k in zip(verify_ms, eager, [4, 4, 2, 4, 8]):
        run_cycle(stats, gpu, ms=(0.5, v, 0.25), k=k, eager=e, fallbacks=fallbacks)
    gpu.complete()
    snap = stats.snapshot()
    assert snap["verify"]["ms_mean"] == pytest.approx(4.0)
    assert snap["verify"]["ms_p50"] == 3.0
    assert snap["cycle"]["ms_p50"] == 3.75
    assert (snap["draft"]["graph_hit"], snap["verify"]["graph_hit"], snap["draft_extend"]["graph_hit"]) == (
        1.0, 0.6, 0.8)
    assert (snap["verify"]["steps"], snap["verify"]["graph"]) == (5, 3)
    assert snap["draft_tokens"] == {"2": 1, "4": 3, "8": 1}
    json.dumps(snap)  # /server_info is JSON


@pytest.mark.parametrize("tree_name", PATCHED)
def test_accept_length_counts_the_bonus_token(trees, tree_name: str) -> None:
    stats = configured(trees.get(tree_name), FakeGpu())
    stats.note_accept([3, 3, 1])
    stats.note_accept([])  # an idle batch
    stats.note_accept([2])
    assert stats.snapshot()["accept_length"] == {"mean": 3.25, "reqs": 4, "tokens": 13}


@pytest.mark.parametrize("tree_name", PATCHED)
def test_log_line_covers_the_last_interval_on_rank_zero(trees, caplog, tree_name: str) -> None:
    gpu, fallbacks = FakeGpu(), Fallbacks()
    stats = configured(trees.get(tree_name), gpu, fallbacks.total, log_interval=10.0)
    run_cycle(stats, gpu, ms=(1.0, 2.0, 0.5), eager=("verify",), fallbacks=fallbacks)
    run_cycle(stats, gpu, ms=(1.0, 2.0, 0.5))
    stats.note_accept([3, 2])
    gpu.complete()
    stats.harvest()
    with caplog.at_level(logging.INFO):
        stats.maybe_report(now=0.0)  # before the interval: nothing
        stats.maybe_report(now=1e9)
        stats.maybe_report(now=2e9)  # no cycle since the last line: nothing
    lines = [r.getMessage() for r in caplog.records if r.name == "fastpath_spec_cycle_stats"]
    assert len(lines) == 1
    line = lines[0]
    assert line.startswith("Spec cycle stats (")
    assert "2 cycles (2 timed); ms mean/p50: draft 1.00/1.00, verify 2.00/2.00, draft_extend 0.50/0.50, " \
           "cycle 3.50/3.50; graph hit: draft 1.00, verify 0.50, draft_extend 1.00; accept len 3.50; K: 4=2" in line
    assert stats.snapshot()["cycles"] == 2  # the totals outlive the interval

    other = configured(trees.get(tree_name), gpu, log_interval=10.0, tp_rank=1)
    caplog.clear()
    run_cycle(other, gpu)
    with caplog.at_level(logging.INFO):
        other.maybe_report(now=1e9)
    assert not [r for r in caplog.records if r.name == "fastpath_spec_cycle_stats"]


@pytest.mark.parametrize("tree_name", PATCHED)
def test_prometheus_metric_names_and_labels(trees, tree_name: str) -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    gpu, fallbacks = FakeGpu(), Fallbacks()
    stats = configured(trees.get(tree_name), gpu, fallbacks.total, export_prometheus=True, tp_rank=0)
    try:
        run_cycle(stats, gpu, ms=(1.0, 2.0, 0.5), k=4, eager=("draft_extend",), fallbacks=fallbacks)
        gpu.complete()
        stats.harvest()
        stats.note_accept([3, 1])
        get = prometheus_client.REGISTRY.get_sample_value
        assert get("sglang:spec_cycle_phase_seconds_count", {"phase": "verify", "tp_rank": "0"}) == 1.0
        assert get("sglang:spec_cycle_phase_seconds_sum", {"phase": "verify", "tp_rank": "0"}) == pytest.approx(
            0.002)
        assert get("sglang:spec_cycle_phase_seconds_sum", {"phase": "cycle", "tp_rank": "0"}) == pytest.approx(
            0.0035)
        assert get("sglang:spec_cycle_graph_steps_total", {"phase": "verify", "graph": "true", "tp_rank": "0"}) == 1
        assert get("sglang:spec_cycle_graph_steps_total",
                   {"phase": "draft_extend", "graph": "false", "tp_rank": "0"}) == 1
        assert get("sglang:spec_cycle_draft_tokens_bucket", {"le": "4.0", "tp_rank": "0"}) == 1
        assert get("sglang:spec_cycle_draft_tokens_bucket", {"le": "3.5", "tp_rank": "0"}) == 0
        assert get("sglang:spec_cycle_accept_length_sum", {"tp_rank": "0"}) == 3.0
        buckets = stats.SECONDS_BUCKETS
        assert buckets[0] == 1e-4 and 0.5 < buckets[-1] < 1.0 and len(buckets) == 40
    finally:  # another test's module registers the same names
        for metric in stats._prom["metrics"]:
            prometheus_client.REGISTRY.unregister(metric)


def worker_defs(tree: Path, stats: types.ModuleType | None) -> dict[str, Any]:
    """The worker's two methods, with stand-ins for the names either release's code reads."""
    extra = {
        "CaptureHiddenMode": SimpleNamespace(NULL=0, LAST=1, FULL=2),
        "EagleDraftInput": None, "get_draft_recurrent_hidden_state_spec": None,
        "envs": SimpleNamespace(SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND=SimpleNamespace(get=lambda: False),
                                SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN=SimpleNamespace(get=lambda: False)),  # 0027
        "spec_stage_span": lambda name: nullcontext(),
        "speculative_moe_backend_context": nullcontext, "speculative_moe_a2a_backend_context": nullcontext,
        # 0.5.23: a module-level TP context, PP (one stage here), DP prefill coordination (unused)
        "draft_tp_context": lambda layout: nullcontext(), "get_parallel": lambda: SimpleNamespace(pp_size=1),
        "DPSpecPrefillCoordinationPlan": None, "ForwardMode": None,
    }
    if stats is not None:
        extra["spec_cycle_stats"] = stats
    return load_defs(source(tree, WORKER), ["EAGLEWorkerV2.forward_batch_generation",
                                            "EAGLEWorkerV2.on_verify_complete_cpu"], extra=extra)


class FakeWorker:
    """An EAGLEWorkerV2 around stand-in draft, verify and draft extend that run on a FakeGpu."""

    def __init__(self, gpu: FakeGpu, gf: types.ModuleType, eager_verify_on: set[int]) -> None:
        self.gpu, self.gf, self.eager_verify_on, self.step = gpu, gf, eager_verify_on, 0
        self.speculative_num_steps, self.adaptive_controller = 3, None
        self.activate_step_by_batch = lambda bs: None
        self.draft_worker = SimpleNamespace(
            draft_tp_context=lambda group: nullcontext(), draft_runner=SimpleNamespace(tp_group=None),
            parallel_layout=None, draft=self.draft, _draft_extend_for_decode=self.draft_extend)

    def draft(self, batch):
        self.gpu.run(1.0)
        return SimpleNamespace(is_verify_input=lambda: True, kv_loc_plan=None)

    def verify(self, batch, grammar_barrier=None, pp_proxy_tensors=None):
        self.step += 1
        self.gpu.run(2.0)
        if self.step in self.eager_verify_on:
            self.gf.note("target", "target_verify", "batch_size_above_max", 4, "bs 64, captured max 48")
        return SimpleNamespace(new_seq_lens=None, speculative_num_draft_tokens=4)

    def draft_extend(self, batch, batch_output, kv_loc_plan=None):
        self.gpu.run(0.5)


def decode_batch(idle: bool = False) -> SimpleNamespace:
    mode = SimpleNamespace(is_extend=lambda: False, is_idle=lambda: idle)
    return SimpleNamespace(forward_mode=mode, is_extend_in_batch=False, seq_lens=torch.zeros(2),
                           spec_info=SimpleNamespace(is_verify_input=lambda: False))


@pytest.mark.parametrize("tree_name", PATCHED_AND_PRISTINE)
def test_the_eagle_worker_times_its_cycles(trees, tree_name: str) -> None:
    gpu = FakeGpu()
    twin = trees.get(PATCHED_TWIN[tree_name])
    gf = load_fallback_module(twin)
    stats = configured(twin, gpu, gf.total)
    defs = worker_defs(trees.get(tree_name), stats)
    forward = defs["EAGLEWorkerV2.forward_batch_generation"]
    worker = FakeWorker(gpu, gf, eager_verify_on={2})
    for _ in range(4):
        forward(worker, decode_batch())
    forward(worker, decode_batch(idle=True))  # a DP-attention idle batch is no cycle
    defs["EAGLEWorkerV2.on_verify_complete_cpu"](worker, [3, 3], batch_size=2)
    gpu.complete()
    snap = stats.snapshot()
    assert (snap["cycles"], snap["timed"]) == (5 - 1, 4)
    assert snap["verify"]["graph_hit"] == 0.75 and snap["draft"]["graph_hit"] == 1.0
    assert (snap["draft"]["ms_mean"], snap["verify"]["ms_mean"], snap["draft_extend"]["ms_mean"]) == (1.0, 2.0, 0.5)
    assert snap["draft_tokens"] == {"4": 4}
    assert snap["accept_length"]["mean"] == 4.0


@pytest.mark.parametrize("tree_name", PATCHED)
def test_with_the_knob_off_nothing_is_recorded(trees, tree_name: str) -> None:
    gpu = FakeGpu()
    gf = load_fallback_module(trees.get(tree_name))
    stats = load_stats(trees.get(tree_name))
    stats.configure(enabled=False, fallback_total=gf.total, event_factory=gpu.event)
    assert stats.ENABLED is False
    defs = worker_defs(trees.get(tree_name), stats)
    worker = FakeWorker(gpu, gf, eager_verify_on={1})
    for _ in range(3):
        defs["EAGLEWorkerV2.forward_batch_generation"](worker, decode_batch())
    defs["EAGLEWorkerV2.on_verify_complete_cpu"](worker, [3, 3], batch_size=2)
    assert (gpu.created, gpu.recorded) == (0, 0)
    snap = stats.snapshot()
    assert (snap["cycles"], snap["timed"], snap["accept_length"]["reqs"]) == (0, 0, 0)


STANDALONE = "sglang.srt.speculative.standalone_worker_v2"


def test_the_standalone_worker_turns_the_stats_on_too(trees, monkeypatch) -> None:
    """0.5.23: StandaloneWorkerV2.__init__ skips EAGLEWorkerV2's, so it must configure the stats itself."""
    tree = trees.upstream
    calls: list[dict[str, Any]] = []
    monkeypatch.setenv("SGLANG_SPEC_CYCLE_STATS", "1")
    monkeypatch.setenv("SGLANG_SPEC_CYCLE_STATS_INTERVAL", "5")
    gf = load_fallback_module(tree)
    init = load_defs(source(tree, WORKER), ["EAGLEWorkerV2._init_spec_cycle_stats"], extra={
        "envs": TreeImporter.module(tree, "sglang.srt.environ").envs, "graph_fallback": gf,
        "get_parallel": lambda: SimpleNamespace(tp_rank=3),
        "get_observability": lambda: SimpleNamespace(enable_metrics=True),
        "spec_cycle_stats": SimpleNamespace(configure=lambda **kw: calls.append(kw)),
    })["EAGLEWorkerV2._init_spec_cycle_stats"]
    spec = SimpleNamespace(speculative_eagle_topk=1, speculative_num_steps=3, speculative_num_draft_tokens=4,
                           speculative_algorithm="STANDALONE")
    standalone_init = load_defs(source(tree, STANDALONE), ["StandaloneWorkerV2.__init__"], extra={
        "BaseSpecWorker": SimpleNamespace(__init__=lambda self: None),
        "get_spec": lambda: spec, "get_device": lambda: SimpleNamespace(device="cpu"),
        "get_schedule": lambda: SimpleNamespace(page_size=1),
        "SpeculativeAlgorithm": SimpleNamespace(from_string=lambda name: name),
        "StandaloneDraftWorker": lambda *args: SimpleNamespace(),
        "get_plan_stream": lambda device: (None, nullcontext()),
    })["StandaloneWorkerV2.__init__"]
    worker = SimpleNamespace(_validate_vocab_compatibility=lambda **kw: None)
    worker._init_spec_cycle_stats = types.MethodType(init, worker)
    target = SimpleNamespace(model_runner=SimpleNamespace(model_config=SimpleNamespace(vocab_size=8)), tokenizer=None)
    standalone_init(worker, SimpleNamespace(), 0, 0, target)
    assert calls == [{"enabled": True, "log_interval": 5.0, "tp_rank": 3, "export_prometheus": True,
                      "device": "cpu", "fallback_total": gf.total}]
    # EAGLEWorkerV2.__init__ (super() and a real draft worker: not run here) makes the same call.
    assert "_init_spec_cycle_stats" in calls_in(source(tree, WORKER), "EAGLEWorkerV2", "__init__")


def calls_in(path: Path, cls: str, method: str) -> set[str]:
    """Names of the ``self.<name>(...)`` calls in one method of a source file."""
    module = ast.parse(path.read_text())
    body = next(f for c in module.body if isinstance(c, ast.ClassDef) and c.name == cls
                for f in c.body if isinstance(f, ast.FunctionDef) and f.name == method)
    return {n.func.attr for n in ast.walk(body) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"}


@pytest.mark.parametrize("tree_name", PATCHED)
def test_knobs_default_off_in_environ(trees, tree_name: str, monkeypatch) -> None:
    envs = TreeImporter.module(trees.get(tree_name), "sglang.srt.environ").envs
    assert envs.SGLANG_SPEC_CYCLE_STATS.get() is False
    assert envs.SGLANG_SPEC_CYCLE_STATS_INTERVAL.get() == 60.0
    monkeypatch.setenv("SGLANG_SPEC_CYCLE_STATS", "1")
    monkeypatch.setenv("SGLANG_SPEC_CYCLE_STATS_INTERVAL", "5")
    assert envs.SGLANG_SPEC_CYCLE_STATS.get() is True
    assert envs.SGLANG_SPEC_CYCLE_STATS_INTERVAL.get() == 5.0


def internal_state(tree: Path, stats: types.ModuleType) -> dict[str, Any]:
    """What /server_info reports for a spec-on scheduler: 0.5.17's method, 0.5.23's controller."""
    if source(tree, INTERNAL_STATE).exists():
        return controller_internal_state(tree, stats)
    gf = load_fallback_module(tree)
    extra = {
        "get_context": lambda: SimpleNamespace(resolved_server_args_dict=dict),
        "build_memory_usage": lambda **kw: {}, "RECORD_STEP_TIME": False,
        "all_reduce_stats": SimpleNamespace(ENABLED=False), "graph_fallback": gf,
        "get_exec": lambda: SimpleNamespace(moe=SimpleNamespace(elastic_ep_backend=None)),
        "GetInternalStateReqOutput": lambda internal_state: internal_state,
        "msgspec_to_builtins": lambda d: json.loads(json.dumps(d)), "spec_cycle_stats": stats,
    }
    get = load_defs(source(tree, SCHEDULER), ["Scheduler.get_internal_state"], extra=extra)[
        "Scheduler.get_internal_state"]
    scheduler = SimpleNamespace(
        metrics_reporter=SimpleNamespace(last_gen_throughput=0.0, spec_total_num_forward_ct=0),
        draft_worker=None, tp_worker=SimpleNamespace(model_runner=SimpleNamespace(weight_load_mem_usage=0),
                                                     graph_memory_usage=0),
        token_to_kv_pool_allocator=SimpleNamespace(get_kvcache=lambda: SimpleNamespace(mem_usage=0)),
        startup_available_gpu_memory_gb=0, max_total_num_tokens=0, swa_tokens_per_layer=0,
        startup_time=0, max_running_requests=1, spec_algorithm=SimpleNamespace(is_none=lambda: False,
                                                                               is_dspark=lambda: False))
    return get(scheduler, None)


class Contributors:
    """0.5.23's SchedulerInternalStateController with every contributor but the loaded ones a no-op."""

    def __init__(self, scheduler: SimpleNamespace, **methods: Callable) -> None:
        self.scheduler, self._methods = scheduler, methods

    def __getattr__(self, name: str) -> Callable:
        if name in self._methods:
            return types.MethodType(self._methods[name], self)
        if name.startswith("_add_"):
            return lambda state: None
        raise AttributeError(name)


def controller_internal_state(tree: Path, stats: types.ModuleType) -> dict[str, Any]:
    names = ["get_internal_state", "_add_speculative", "_average_accept_length"]
    extra = {
        "get_context": lambda: SimpleNamespace(resolved_server_args_dict=dict),
        "GetInternalStateReqOutput": lambda internal_state: internal_state,
        "msgspec_to_builtins": lambda d: json.loads(json.dumps(d)), "spec_cycle_stats": stats,
    }
    defs = load_defs(source(tree, INTERNAL_STATE), [f"SchedulerInternalStateController.{n}" for n in names],
                     extra=extra)
    scheduler = SimpleNamespace(
        metrics_reporter=SimpleNamespace(spec_total_num_forward_ct=0),
        spec_algorithm=SimpleNamespace(is_none=lambda: False, is_dspark=lambda: False), draft_worker=None)
    controller = Contributors(scheduler, **{n: defs[f"SchedulerInternalStateController.{n}"] for n in names})
    return controller.get_internal_state(None)


@pytest.mark.parametrize("tree_name", PATCHED)
def test_server_info_has_spec_cycle_only_when_on(trees, tree_name: str) -> None:
    tree = trees.get(tree_name)
    gpu = FakeGpu()
    stats = configured(tree, gpu)
    run_cycle(stats, gpu)
    gpu.complete()
    spec_cycle = internal_state(tree, stats)["spec_cycle"]
    assert spec_cycle["cycles"] == 1 and spec_cycle["timed"] == 1  # the snapshot reads completed cycles
    assert spec_cycle["verify"]["graph_hit"] == 1.0
    assert set(spec_cycle) == {"cycles", "timed", "dropped", "draft", "verify", "draft_extend", "cycle",
                               "accept_length", "draft_tokens"}
    stats.configure(enabled=False)
    assert "spec_cycle" not in internal_state(tree, stats)


@pytest.mark.parametrize("tree_name", PATCHED)
def test_graph_fallback_total_counts_every_noted_step(trees, tree_name: str) -> None:
    gf = load_fallback_module(trees.get(tree_name))
    assert gf.total() == 0
    gf.note("draft", "draft", "no_graph_runner", 1)
    gf.note("target", "target_verify", "batch_size_above_max", 4)
    gf.note("target", "target_verify", "batch_size_above_max", 4)
    assert gf.total() == 3


def spec_cycle(verify_steps: int, verify_graph: int, timed: int, cycle_ms_sum: float,
               draft_tokens: dict[str, int] | None = None) -> dict[str, Any]:
    return {"timed": timed, "verify": {"steps": verify_steps, "graph": verify_graph},
            "cycle": {"ms_sum": cycle_ms_sum}, **({"draft_tokens": draft_tokens} if draft_tokens else {})}


def test_cycle_metrics_are_the_runs_share_of_the_totals() -> None:
    before, after = spec_cycle(10, 10, 9, 45.0), spec_cycle(110, 85, 109, 545.0)
    assert engine_probes.cycle_metrics(before, after) == {"verify_graph_hit": (0.75, 100), "cycle_ms": (5.0, 100)}
    assert engine_probes.cycle_metrics(None, after) == {}  # stock SGLang, or the knob off
    assert engine_probes.cycle_metrics(after, after) == {}  # no cycle in between
    assert METRICS["verify_graph_hit"] is Direction.HIGHER and METRICS["cycle_ms"] is Direction.LOWER


def test_the_runs_mean_k_and_cycles_per_k_come_from_the_histograms_difference() -> None:
    """Issue 12 asks the benchmark to show the K an adaptive policy chose per batch size: the run's cycles per
    K are the difference of the two snapshots' ``draft_tokens`` histograms (a K the run did not use drops out)."""
    before = spec_cycle(10, 10, 10, 40.0, {"2": 4, "4": 6})
    after = spec_cycle(110, 110, 110, 440.0, {"2": 4, "3": 30, "4": 66, "8": 10})
    assert engine_probes.draft_token_mix(before, after) == {"3": 30, "4": 60, "8": 10}
    mean = (3 * 30 + 4 * 60 + 8 * 10) / 100
    assert engine_probes.cycle_metrics(before, after)["draft_tokens_mean"] == (pytest.approx(mean), 100)
    assert engine_probes.draft_token_mix(spec_cycle(1, 1, 1, 1.0), after) == {"2": 4, "3": 30, "4": 66, "8": 10}
    assert engine_probes.draft_token_mix(None, after) == {}
    assert METRICS["draft_tokens_mean"] is Direction.NEUTRAL


class CycleEngine:
    """A stand-in sglang.Engine whose spec-on server info has spec_cycle totals (K 4, 4 tokens a cycle)."""

    with_telemetry = True

    def __init__(self, **kwargs: Any) -> None:
        self.spec = kwargs.get("speculative_algorithm") == "EAGLE3"
        self.cycles = 0

    def generate(self, input_ids: list[list[int]], sampling_params: dict) -> list[dict]:
        n = sampling_params["max_new_tokens"]
        self.cycles += n // 4
        meta = {"completion_tokens": n, **({"spec_accept_length": 4.0} if self.spec else {})}
        return [{"meta_info": meta, "output_ids": [j % 97 for j in range(n)]} for _ in input_ids]

    def get_server_info(self) -> dict:
        state = {}
        if self.spec and self.with_telemetry:  # every other cycle's verify ran eager, 2.5 ms a cycle
            state["spec_cycle"] = spec_cycle(self.cycles, self.cycles // 2, self.cycles, 2.5 * self.cycles,
                                             {"4": self.cycles})
        return {"internal_states": [state]}

    def shutdown(self) -> None:
        pass


@pytest.mark.parametrize("with_telemetry", [True, False])
def test_e2e_job_records_verify_graph_hit_and_cycle_ms(tmp_path: Path, monkeypatch, with_telemetry: bool) -> None:
    fake = types.ModuleType("sglang")
    fake.Engine = CycleEngine
    monkeypatch.setitem(sys.modules, "sglang", fake)
    monkeypatch.setattr(CycleEngine, "with_telemetry", with_telemetry)
    monkeypatch.setenv("SGLANG_SIMULATE_ACC_LEN", "-1")  # the job sets it; undone after the test
    target = tmp_path / "m" / "target"
    target.mkdir(parents=True)
    (target / "config.json").write_text(json.dumps({
        "hidden_size": 64, "num_hidden_layers": 1, "vocab_size": 1000, "num_attention_heads": 4,
        "num_key_value_heads": 4, "head_dim": 16, "intermediate_size": 128, "torch_dtype": "bfloat16"}))
    spec = JobSpec.from_spec({"kind": "e2e", "models": str(tmp_path / "m"), "backend": "triton", "server_args": {},
                              "e2e": {"bs": [1, 2], "prompt_len": 4, "output_len": 64, "acc_len": 0, "steps": 3,
                                      "topk": 1, "draft_tokens": 4, "profile_steps": 0, "runs": 2}})
    out = tmp_path / "job.jsonl"
    assert e2e.run_job(spec, Sink(str(out)), str(out)) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert not [x for x in lines if x["type"] == "error"], lines
    got = {(x["mode"], x["bs"], x["k"], x["metric"]): (x["value"], x["n"]) for x in lines
           if x["type"] == "record" and x["metric"] in ("verify_graph_hit", "cycle_ms", "draft_tokens_mean")}
    expected = {("e2e_spec", bs, 4, metric): (value, 2 * 16) for bs in (1, 2)
                for metric, value in (("verify_graph_hit", 0.5), ("cycle_ms", 2.5), ("draft_tokens_mean", 4.0))}
    assert got == (expected if with_telemetry else {})
    mixes = [x["extra"]["draft_tokens_mix"] for x in lines if x["type"] == "record"
             and x["metric"] == "draft_tokens_mean"]
    assert mixes == ([{"4": 32}, {"4": 32}] if with_telemetry else [])


@pytest.mark.parametrize("tree_name", PATCHED)
def test_both_eagle_workers_configure_the_stats(trees, tree_name: str) -> None:
    """StandaloneWorkerV2.__init__ does not run EAGLEWorkerV2.__init__ (0.5.17 and 0.5.23): each must call
    _init_spec_cycle_stats, or STANDALONE records nothing."""
    tree = trees.get(tree_name)
    assert "_init_spec_cycle_stats" in calls_in(source(tree, WORKER), "EAGLEWorkerV2", "__init__")
    assert "_init_spec_cycle_stats" in calls_in(source(tree, STANDALONE), "StandaloneWorkerV2", "__init__")


def test_the_phase_means_are_the_runs_share_of_each_phases_total() -> None:
    """Where inside the cycle the GPU time goes (idle inside a phase included) rides on ``cycle_ms``'s extra."""
    before, after = spec_cycle(10, 10, 10, 40.0), spec_cycle(110, 110, 110, 440.0)
    for snap, (draft, verify, extend) in ((before, (5.0, 25.0, 10.0)), (after, (55.0, 275.0, 110.0))):
        snap.update(draft={"ms_sum": draft}, verify={**snap["verify"], "ms_sum": verify}, draft_extend={"ms_sum": extend})
    assert engine_probes.phase_ms(before, after) == {"draft_ms": 0.5, "verify_ms": 2.5, "draft_extend_ms": 1.0}
    assert engine_probes.phase_ms(None, after) == {} and engine_probes.phase_ms(after, after) == {}
