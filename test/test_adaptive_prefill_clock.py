"""Patch 0031 (0023 on 0.5.23): the adaptive throughput policy times no cycle across a prefill.

The throughput slot (patch 0019) times a cycle as the host wall time between two verify results. A result
that follows a prefill also waited for the prefill and for any idle time before it; session 22's kimi16 run
(bs 1, accept ~1.4) took one such result, 68.5 ms, as steps 0's cycle time (3.9 ms measured otherwise) and
kept the slot off steps 0 for about ten decisions. ``on_prefill`` drops the next result's time; the EAGLE
worker calls it when it is handed an extend batch. Runs each patched tree's code on CPU with a fake clock and
stand-ins around ``EAGLEWorkerV2.forward_batch_generation``.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sglang_trees import PATCHED, TreeImporter
from sglang_trees import trees  # noqa: F401 (a fixture)
from test_spec_cycle_stats import worker_defs

MODULE = "sglang.srt.speculative.adaptive_spec_params"
STEADY_S, IDLE_S = 0.004, 0.0685


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _params(tree: Path, tmp_path: Path) -> tuple[Any, Clock]:
    """Adaptive params with one throughput slot held at steps 0 (so no decision moves it) on a fake clock."""
    cfg = tmp_path / "adaptive.json"
    cfg.write_text(json.dumps({"policy": "throughput", "1": {"candidate_steps": [0], "settle_batches": 0}}))
    clock = Clock()
    asp = TreeImporter.module(tree, MODULE)
    return asp.AdaptiveSpeculativeParams(initial_steps=0, cfg_path=str(cfg), clock=clock), clock


def _serve(params: Any, clock: Clock, results: int) -> None:
    for _ in range(results):
        clock.now += STEADY_S
        params.on_verify_complete([0], 1)


def _after_an_idle_gap(params: Any, clock: Clock, prefill: bool) -> list[float]:
    """Steady cycles, then a request ends, the server idles, the next request's prefill is launched (or, with
    ``prefill`` False, nobody says so), and steady cycles again; the slot's cycle-time window."""
    _serve(params, clock, 5)
    if prefill:
        params.on_prefill()
    clock.now += IDLE_S
    params.on_verify_complete([0], 1)
    _serve(params, clock, 2)
    return list(params._route(1)._cycle_samples[0])


@pytest.mark.parametrize("tree_name", PATCHED)
@pytest.mark.parametrize("prefill", [True, False], ids=["on_prefill", "without_the_call"])
def test_a_prefill_and_the_idle_wait_before_it_time_no_cycle(trees, tree_name: str, prefill: bool, tmp_path: Path,
                                                             monkeypatch) -> None:
    """With the call every sample is a 4-ms cycle; without it (what the test would see unpatched) the idle gap
    enters the window."""
    monkeypatch.delenv("SGLANG_SPEC_ADAPTIVE_POLICY", raising=False)
    params, clock = _params(trees.get(tree_name), tmp_path)
    samples = _after_an_idle_gap(params, clock, prefill=prefill)
    if prefill:
        assert samples == pytest.approx([STEADY_S] * len(samples)) and len(samples) >= 6, samples
        assert params._route(1).cycle_s[0] == pytest.approx(STEADY_S)
    else:
        assert max(samples) == pytest.approx(IDLE_S), samples


class Controller:
    def __init__(self) -> None:
        self.prefills = 0

    def on_prefill(self) -> None:
        self.prefills += 1


class Stop(Exception):
    """Raised by the stand-in target forward: the test needs only what ran before it."""


def _stop(*args: Any, **kwargs: Any) -> None:
    raise Stop


def _batch(extend: bool) -> SimpleNamespace:
    mode = SimpleNamespace(is_extend=lambda: extend, is_idle=lambda: False)
    return SimpleNamespace(forward_mode=mode, is_extend_in_batch=False, seq_lens=SimpleNamespace(shape=(1,)))


@pytest.mark.parametrize("tree_name", PATCHED)
def test_the_eagle_worker_reports_a_prefill_batch_and_not_a_decode_one(trees, tree_name: str) -> None:
    forward = worker_defs(trees.get(tree_name), None)["EAGLEWorkerV2.forward_batch_generation"]
    controller = Controller()
    worker = SimpleNamespace(
        adaptive_controller=controller, speculative_algorithm=SimpleNamespace(is_standalone=lambda: False),
        enable_dp_spec_prefill_coordination=False, target_worker=SimpleNamespace(forward_batch_generation=_stop),
        _forward_prefill_batch=_stop, activate_step_by_batch=_stop)
    with pytest.raises(Stop):
        forward(worker, _batch(extend=True))
    assert controller.prefills == 1
    with pytest.raises(Stop):
        forward(worker, _batch(extend=False))  # a decode batch goes to activate_step_by_batch first
    assert controller.prefills == 1


@pytest.mark.parametrize("tree_name", PATCHED)
def test_the_controller_forwards_the_call_to_its_policy(trees, tree_name: str) -> None:
    state = TreeImporter.module(trees.get(tree_name), "sglang.srt.speculative.adaptive_runtime_state")
    controller = state.AdaptiveController.__new__(state.AdaptiveController)
    controller.params = Controller()
    controller.on_prefill()
    assert controller.params.prefills == 1
