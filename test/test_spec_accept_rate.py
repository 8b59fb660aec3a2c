"""The speculative accept rate counts each cycle's own drafts (patch 0049; 0028 of the 0.5.23 port), on CPU.

``--speculative-adaptive`` moves the worker between step counts, but the release divides an interval's correct drafts
by its forward count times the start-up draft count (``get_spec()`` keeps the start-up value). Session 39's dense-8
run, started at K 2 and switching among K 2-4, logged "accept len: 2.50, accept rate: 1.50". Here the tree's
``update_spec_metrics`` and ``report_decode_stats`` run on a stand-in reporter: cycles at K 4 then K 2 under a
start-up K 2, fixed K, steps-0 cycles and a result without a draft count. The releases divide by the start-up count
(xfail).
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sglang_trees import PATCHED_AND_PRISTINE, TreeImporter, find_def, tree_defs
from sglang_trees import trees  # noqa: F401 (a fixture)

REPORTER = "sglang.srt.managers.scheduler_components.metrics_reporter"
RESULTS = "sglang.srt.managers.scheduler_components.batch_result_processor"
ALL = ["patched", "upstream", "pristine", "upstream_pristine"]
METHODS = ["update_spec_metrics", "report_decode_stats", "_startup_draft_per_round"]


class Reporter(SimpleNamespace):
    """SchedulerMetricsReporter's per-interval state with the tree's methods bound to it."""


def reporter(tree: Path, startup_k: int) -> tuple[Reporter, list[str]]:
    """A reporter of ``tree`` whose server started at ``startup_k`` draft tokens, and the lines it logs."""
    TreeImporter.use(tree)
    lines: list[str] = []
    names = []
    for method in METHODS:
        try:
            find_def(tree, REPORTER, f"SchedulerMetricsReporter.{method}")
        except LookupError:
            continue  # the release has no _startup_draft_per_round
        names.append(f"SchedulerMetricsReporter.{method}")
    defs = tree_defs(tree, REPORTER, names, extra={
        "RECORD_STEP_TIME": False, "LOG_FORWARD_ITERS": False, "ENABLE_METRICS_DEVICE_TIMER": False,
        "logger": SimpleNamespace(info=lines.append), "QueueCount": None, "compute_routing_key_stats": None,
        "DisaggregationMode": SimpleNamespace(PREFILL="prefill", DECODE="decode"),
        "get_disagg": lambda: SimpleNamespace(language_only=False, disaggregation_decode_host_receive_threshold=1),
        "get_spec": lambda: SimpleNamespace(speculative_num_draft_tokens=startup_k, speculative_num_steps=startup_k - 1)},
    )  # fmt: skip
    pool = SimpleNamespace(get_decode_usage_msg_parts=lambda: ["token usage: 0.01"])
    scheduler = SimpleNamespace(
        spec_algorithm=SimpleNamespace(is_none=lambda: False, is_dspark=lambda: False),
        pool_stats_observer=SimpleNamespace(get_pool_stats=lambda: pool), forward_ct=0, waiting_queue=[],
        disaggregation_mode="null", server_args=SimpleNamespace(language_only=False),
        kv_events_publisher=SimpleNamespace(emit_kv_metrics=lambda: None, publish_kv_events=lambda: None))  # fmt: skip
    rep = Reporter(
        current_scheduler_metrics_enabled=False, is_stats_logging_rank=True, enable_mfu_metrics=False,
        forward_ct_decode=0, decode_log_interval=40, last_decode_stats_tic=0.0, num_generated_tokens=0,
        spec_num_accept_tokens=0, spec_num_correct_drafts=0, spec_num_forward_ct=0, spec_num_block_accept_tokens=0,
        spec_num_cap_tokens=0, spec_total_num_accept_tokens=0, spec_total_num_forward_ct=0,
        spec_num_proposed_drafts=0, scheduler=scheduler, _graph_backend_label="cuda graph")  # fmt: skip
    for name, fn in defs.items():
        setattr(rep, name.rpartition(".")[2], fn.__get__(rep))
    return rep, lines


def cycle(rep: Reporter, accept_lens: list[int], k: int | None) -> None:
    """Report one verify cycle of ``len(accept_lens)`` requests run at ``k`` draft tokens (None: not recorded)."""
    bs, correct = len(accept_lens), sum(accept_lens) - len(accept_lens)
    kwargs: dict[str, Any] = {}
    params = inspect.signature(rep.update_spec_metrics).parameters
    if "num_accept_tokens" in params:  # 0.5.23
        kwargs["num_accept_tokens"] = sum(accept_lens)
    if "num_draft_tokens" in params:
        kwargs["num_draft_tokens"] = k
    rep.update_spec_metrics(bs, correct, **kwargs)


def end_interval(rep: Reporter) -> None:
    """The decode log interval's end: the tree's report_decode_stats over a batch of two."""
    rep.report_decode_stats(True, running_batch=SimpleNamespace(reqs=[object()] * 2, forward_iter=None))


def logged_rate(rep: Reporter, lines: list[str]) -> float:
    end_interval(rep)
    assert len(lines) == 1 and "accept rate: " in lines[0], lines
    return float(lines.pop().split("accept rate: ")[1].split(",")[0])


@pytest.mark.parametrize("tree_name", PATCHED_AND_PRISTINE)
def test_the_rate_divides_by_the_drafts_each_cycle_ran(trees, tree_name: str) -> None:
    rep, lines = reporter(trees.get(tree_name), startup_k=2)
    cycle(rep, [3, 3], k=4)  # 4 correct of 6 drafts
    cycle(rep, [2, 1], k=2)  # 1 correct of 2
    assert logged_rate(rep, lines) == pytest.approx(5 / 8, abs=0.01)  # the release: 5 / 4 = 1.25
    cycle(rep, [1, 1], k=1)  # steps 0: a bonus token each, no drafts
    cycle(rep, [3, 2], k=3)  # 3 correct of 4
    assert logged_rate(rep, lines) == pytest.approx(3 / 4, abs=0.01)  # the interval's count starts again


@pytest.mark.parametrize("tree_name", ALL)
def test_fixed_k_and_results_without_a_count_read_as_before(trees, tree_name: str) -> None:
    rep, lines = reporter(trees.get(tree_name), startup_k=4)
    cycle(rep, [4, 2, 1], k=4)
    cycle(rep, [3, 3, 3], k=None)  # falls back to the start-up count
    assert logged_rate(rep, lines) == pytest.approx(10 / 18, abs=0.01)
    assert rep.spec_total_num_forward_ct == 6


@pytest.mark.parametrize("tree_name", PATCHED_AND_PRISTINE)
def test_the_decode_result_passes_its_draft_count(trees, tree_name: str) -> None:
    """process_batch_result_decode hands the result's verify width (speculative_num_draft_tokens) over."""
    node = find_def(trees.get(tree_name), RESULTS, "SchedulerBatchResultProcessor.process_batch_result_decode")
    calls = [c for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
             and c.func.attr == "update_spec_metrics"]  # fmt: skip
    assert len(calls) == 1
    passed = {kw.arg: ast.unparse(kw.value) for kw in calls[0].keywords}
    assert passed.get("num_draft_tokens") == "result.speculative_num_draft_tokens"
