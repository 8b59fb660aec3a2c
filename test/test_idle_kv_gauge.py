"""The idle republish of the KV usage gauge in the patched SGLang (patch 0006), on CPU.

Runs ``SchedulerMetricsReporter._maybe_log_idle_metrics`` of the tree, executed
from its source file, on a stand-in reporter whose last published report is a
prefill made while nothing else ran: 0 running requests, the new request's 24
KV tokens. That request has finished; the pool is empty. The patched trees (0.5.17
and the upstream port, 0.5.23) must republish 0 at once; pristine 0.5.17 and 0.5.23
keep 24 on the gauge for 30 s (xfail).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sglang_trees import (  # noqa: F401 (trees: a module-scoped fixture)
    PATCHED,
    PATCHED_AND_PRISTINE,
    TreeImporter,
    load_defs,
    source,
    trees,
)

METRICS_REPORTER = "sglang.srt.managers.scheduler_components.metrics_reporter"


@dataclass
class QueueCount:
    """The two parts of SGLang's QueueCount the idle check reads and writes."""

    total: int = 0

    @classmethod
    def from_reqs(cls, reqs: list[Any], enable_priority_scheduling: bool = False) -> QueueCount:
        return cls(total=len(reqs))


class PoolNow:
    """The pool as the scheduler would read it now."""

    def __init__(self, used: int) -> None:
        self.used = used

    def get_kv_token_stats(self) -> tuple[int, float]:
        return self.used, self.used / 1000

    def update_scheduler_stats(self, stats: Any) -> None:
        stats.num_used_tokens = self.used


class Collector:
    """Records what is published."""

    def __init__(self, last_log_time: float) -> None:
        self.last_log_time = last_log_time
        self.published: list[int] = []

    def log_stats(self, stats: Any) -> None:
        self.published.append(stats.num_used_tokens)
        self.last_log_time = time.perf_counter()


def idle_reporter(tree: Path, published_used: int, used_now: int, running: int, seconds_since_log: float):
    """(the tree's _maybe_log_idle_metrics bound to a stand-in reporter, its collector)."""
    TreeImporter.use(tree)
    fn = load_defs(
        source(tree, METRICS_REPORTER),
        ["SchedulerMetricsReporter._maybe_log_idle_metrics"],
        {"ENABLE_METRICS_DEVICE_TIMER": False, "QueueCount": QueueCount,
         "DisaggregationMode": SimpleNamespace(PREFILL="prefill", DECODE="decode")},
    )["SchedulerMetricsReporter._maybe_log_idle_metrics"]  # fmt: skip
    pool = PoolNow(used_now)
    scheduler = SimpleNamespace(
        running_batch=SimpleNamespace(reqs=[SimpleNamespace(priority=None)] * running),
        pool_stats_observer=SimpleNamespace(get_pool_stats=lambda: pool, streaming_session_count=lambda: 0,
                                            session_held_tokens=lambda: 0),
        enable_priority_scheduling=False, waiting_queue=[], grammar_manager=[], disaggregation_mode="null",
        enable_fpm=False,
    )  # fmt: skip
    collector = Collector(time.perf_counter() - seconds_since_log)
    reporter = SimpleNamespace(
        stats=SimpleNamespace(num_running_reqs=QueueCount(total=0), num_used_tokens=published_used,
                              fwd_occupancy=float("nan")),
        current_scheduler_metrics_enabled=True, scheduler=scheduler, metrics_collector=collector,
        _reset_device_timer_window=lambda: None, _log_hicache_stats=lambda: None,
    )  # fmt: skip
    return (lambda: fn(reporter)), collector


@pytest.mark.parametrize("tree_name", PATCHED_AND_PRISTINE)
def test_gauge_left_by_a_lone_prefill_is_republished_at_once(trees, tree_name: str) -> None:
    run, collector = idle_reporter(trees.get(tree_name), published_used=24, used_now=0, running=0, seconds_since_log=1)
    run()
    assert collector.published == [0]


@pytest.mark.parametrize("tree_name", PATCHED)
def test_gauge_that_agrees_with_the_pool_is_not_republished_within_30_s(trees, tree_name: str) -> None:
    run, collector = idle_reporter(trees.get(tree_name), published_used=0, used_now=0, running=0, seconds_since_log=1)
    run()
    run()
    assert collector.published == []


@pytest.mark.parametrize("tree_name", PATCHED)
def test_republished_once_then_quiet(trees, tree_name: str) -> None:
    run, collector = idle_reporter(trees.get(tree_name), published_used=24, used_now=0, running=0, seconds_since_log=1)
    run()
    run()
    assert collector.published == [0]


@pytest.mark.parametrize("tree_name", ["patched", "pristine", "upstream", "upstream_pristine"])
def test_stale_running_count_and_30_s_window_still_republish(trees, tree_name: str) -> None:
    run, collector = idle_reporter(trees.get(tree_name), published_used=0, used_now=0, running=1, seconds_since_log=1)
    run()
    run, later = idle_reporter(trees.get(tree_name), published_used=0, used_now=0, running=0, seconds_since_log=31)
    run()
    assert collector.published == [0] and later.published == [0]
