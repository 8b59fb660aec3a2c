"""Patch 0031 (0023 on 0.5.23): the adaptive throughput policy times no cycle across an idle wait.

The throughput slot (patch 0019) times a cycle as the host wall time between two verify results. When the
server goes idle between two requests, the first result after the wait also holds the wait; session 22's kimi16
run (bs 1, accept ~1.4) took one such result, 68.5 ms, as steps 0's cycle time (3.9 ms otherwise) and kept the
slot off steps 0 for about ten decisions. Once fully idle, the scheduler's ``on_idle`` calls the speculative
worker's ``on_idle``; the EAGLE worker passes it to its adaptive controller and the policy drops the next
result's time. A prefill under load must not do the same: a server that prefills between every two cycles would
then time no cycle at all (a review of the first version, which reset on every prefill launch, found that).
Runs each patched tree's code on CPU with a fake clock and stand-ins around the scheduler's and the worker's
methods.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sglang_trees import PATCHED, TreeImporter, load_defs, source
from sglang_trees import trees  # noqa: F401 (a fixture)
from test_adaptive_throughput_policy import _clocked, _config, asp  # noqa: F401 (asp: a fixture)

from benchmark.tools.adaptive_sim import FakeClock

STEADY_S, IDLE_S, PREFILL_S = 0.004, 0.0685, 0.002


def _params(asp: Any, tmp_path: Path) -> tuple[Any, FakeClock]:
    """Adaptive params with one throughput slot held at steps 0 (so no decision moves it) on a fake clock."""
    return _clocked(asp, _config(tmp_path, "throughput", candidates=[0], settle_batches=0), initial=0)


def _serve(params: Any, clock: FakeClock, results: int, gap_s: float = STEADY_S) -> None:
    for _ in range(results):
        clock.now += gap_s
        params.on_verify_complete([0], 1)


def _samples(params: Any) -> list[float]:
    return list(params._route(1)._cycle_samples.get(0, ()))


@pytest.mark.parametrize("idle", [True, False], ids=["on_idle", "without_the_call"])
def test_an_idle_wait_times_no_cycle(asp, idle: bool, tmp_path: Path) -> None:
    """Steady cycles, then the request ends, the scheduler idles, the next request arrives; with the call every
    sample is a 4-ms cycle, without it (what the test would see unpatched) the wait enters the window."""
    params, clock = _params(asp, tmp_path)
    _serve(params, clock, 5)
    if idle:
        params.on_idle()
    _serve(params, clock, 1, gap_s=IDLE_S)
    _serve(params, clock, 2)
    samples = _samples(params)
    if idle:
        assert samples == pytest.approx([STEADY_S] * len(samples)) and len(samples) >= 6, samples
        assert params._route(1).cycle_s[0] == pytest.approx(STEADY_S)
    else:
        assert max(samples) == pytest.approx(IDLE_S), samples


def test_prefills_under_load_keep_the_samples(asp, tmp_path: Path) -> None:
    """Under load nothing idles: every result is timed, a prefill's share included (here one cycle in three
    also waits 2 ms for one), and the slot's lower quartile (the lower median before patch 0053) stays a cycle's
    time."""
    params, clock = _params(asp, tmp_path)
    for _ in range(10):
        _serve(params, clock, 2)
        _serve(params, clock, 1, gap_s=STEADY_S + PREFILL_S)
    assert len(_samples(params)) == params._route(1).cycle_window  # the window is full
    assert params._route(1).cycle_s[0] == pytest.approx(STEADY_S)


class Hook:
    def __init__(self) -> None:
        self.calls = 0

    def on_idle(self) -> None:
        self.calls += 1


class SpecWorker(Hook):
    """Stands in for BaseSpecWorker (the scheduler checks the type before it calls the hook)."""


class Stop(Exception):
    """Raised by the stand-in scheduler for any attribute the test did not give it."""


class FakeScheduler:
    def __init__(self, fully_idle: bool, draft_worker: Any) -> None:
        self.draft_worker = draft_worker
        self.fully_idle = fully_idle
        self.dp_attn_adapter = SimpleNamespace(drop_sync_wait_carry=lambda: None)  # 0.5.23
        self.metrics_reporter = SimpleNamespace(record_scheduler_idle=lambda: None,  # 0.5.23
                                                record_scheduler_active=lambda now: None)

    def maybe_send_health_check_signal(self) -> None:
        pass

    def is_fully_idle(self, for_health_check: bool = False) -> bool:
        return self.fully_idle

    def __getattr__(self, name: str) -> Any:
        raise Stop(name)


def _scheduler_on_idle(tree: Path) -> Any:
    stand_ins = {
        "time": SimpleNamespace(monotonic=lambda: 0.0, monotonic_ns=lambda: 0, sleep=lambda s: None),
        "BaseSpecWorker": SpecWorker,
        # 0.5.23's names, stood in for so that no sglang import runs
        "DisaggregationMode": SimpleNamespace(NULL="null", DECODE="decode"), "LOAD_STALL_REFRESH_S": 1.0,
        "SCHEDULER_STAGE_SANITY_CHECK_CACHE": "sanity", "SCHEDULER_STAGE_IDLE": "idle",
        "scheduler_stage_method": lambda *args, **kwargs: (lambda method: method),
    }
    return load_defs(source(tree, "sglang.srt.managers.scheduler"), ["Scheduler.on_idle"],
                     extra=stand_ins)["Scheduler.on_idle"]


def _run_on_idle(on_idle: Any, scheduler: FakeScheduler) -> None:
    try:
        on_idle(scheduler)
    except Stop:
        pass  # the rest of the housekeeping, which the stand-in does not provide


@pytest.mark.parametrize("tree_name", PATCHED)
@pytest.mark.parametrize("fully_idle", [True, False])
def test_the_schedulers_idle_housekeeping_reaches_the_worker_once_fully_idle(trees, tree_name: str,
                                                                             fully_idle: bool) -> None:
    scheduler = FakeScheduler(fully_idle, SpecWorker())
    _run_on_idle(_scheduler_on_idle(trees.get(tree_name)), scheduler)
    assert scheduler.draft_worker.calls == (1 if fully_idle else 0)


@pytest.mark.parametrize("tree_name", PATCHED)
@pytest.mark.parametrize("draft_worker", [None, SimpleNamespace()], ids=["no_speculation", "platform_worker"])
def test_a_server_without_a_spec_worker_idles_as_before(trees, tree_name: str, draft_worker: Any) -> None:
    """No draft worker, or one an out-of-tree platform supplies (0.5.23's get_platform_worker_cls) without the
    hook: the idle housekeeping must not fail on the call."""
    _run_on_idle(_scheduler_on_idle(trees.get(tree_name)), FakeScheduler(True, draft_worker))


@pytest.mark.parametrize("tree_name", PATCHED)
def test_the_eagle_worker_and_its_controller_pass_the_call_on(trees, tree_name: str) -> None:
    tree = trees.get(tree_name)
    worker_on_idle = load_defs(source(tree, "sglang.srt.speculative.eagle_worker_v2"),
                               ["EAGLEWorkerV2.on_idle"])["EAGLEWorkerV2.on_idle"]
    state = TreeImporter.module(tree, "sglang.srt.speculative.adaptive_runtime_state")
    controller = state.AdaptiveController.__new__(state.AdaptiveController)
    controller.params = Hook()
    worker_on_idle(SimpleNamespace(adaptive_controller=controller))
    assert controller.params.calls == 1
    worker_on_idle(SimpleNamespace(adaptive_controller=None))  # no adaptive speculation: nothing to tell
    base = load_defs(source(tree, "sglang.srt.speculative.base_spec_worker"),
                     ["BaseSpecWorker.on_idle"])["BaseSpecWorker.on_idle"]
    assert base(SimpleNamespace()) is None  # every other speculative worker: a no-op
