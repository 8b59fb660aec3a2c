"""Patch 0028: ``AdaptiveController.init_states`` builds the adaptive runtime states widest first, on CPU.

With every CUDA graph runner on one capture stream (0024), a capture reuses the pool blocks earlier
captures freed, but only up to the size they reached; a wider state captured after a narrower one grows
the shared pool again. ``init_states`` of the patched 0.5.17 tree asks the worker for the candidate
states in descending step count, after the startup state the worker registered itself; the release
builds them in the config's order (ascending in ``benchmark/configs/adaptive-ks.json``) and fails here.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sglang_trees import SHOWS_THE_BUG, TreeImporter
from sglang_trees import trees  # noqa: F401 (a fixture)

MODULE = "sglang.srt.speculative.adaptive_runtime_state"
TREES = ["patched", pytest.param("pristine", marks=SHOWS_THE_BUG)]
STARTUP_STEPS = 3  # K 4, as the engine starts with --speculative-num-steps 3


class Worker:
    """Stands in for ``EAGLEWorkerV2``: records the states it is asked to build and the one applied."""

    def __init__(self) -> None:
        self.speculative_num_steps = STARTUP_STEPS
        self.built: list[tuple[int, int, Any]] = []
        self.applied: list[int] = []

    def build_adaptive_runtime_state(self, speculative_num_steps: int, speculative_num_draft_tokens: int,
                                     cuda_graph_bs: list[int] | None = None) -> Any:
        self.built.append((speculative_num_steps, speculative_num_draft_tokens, cuda_graph_bs))
        return SimpleNamespace(speculative_num_steps=speculative_num_steps)

    def apply_runtime_state(self, state: Any) -> None:
        self.applied.append(state.speculative_num_steps)
        self.speculative_num_steps = state.speculative_num_steps


def controller(tree: Path, tmp_path: Path, candidate_steps: list[int]) -> tuple[Any, Worker]:
    config = tmp_path / "adaptive.json"
    config.write_text(json.dumps({"1": {"candidate_steps": candidate_steps}}))  # one bs slot, as adaptive-ks.json
    module = TreeImporter.module(tree, MODULE)
    worker = Worker()
    ctl = module.AdaptiveController(worker, config_path=str(config))
    ctl.register(SimpleNamespace(speculative_num_steps=STARTUP_STEPS))  # the worker's startup state
    return ctl, worker


@pytest.mark.parametrize("tree_name", TREES)
def test_states_are_built_in_descending_step_count(trees, tree_name: str, tmp_path: Path) -> None:
    ctl, worker = controller(trees.get(tree_name), tmp_path, [1, 2, 3, 5, 7])
    ctl.init_states([1, 2, 4, 8])
    assert [steps for steps, _, _ in worker.built] == [7, 5, 2, 1]


@pytest.mark.parametrize("tree_name", ["patched", "pristine"])
def test_the_set_of_states_and_the_active_one_do_not_depend_on_the_order(trees, tree_name: str,
                                                                        tmp_path: Path) -> None:
    ctl, worker = controller(trees.get(tree_name), tmp_path, [7, 1, 5, 2, 3])
    ctl.init_states([1, 2, 4, 8])
    assert sorted(steps for steps, _, _ in worker.built) == [1, 2, 5, 7]  # the startup state is not rebuilt
    assert all(draft_tokens == steps + 1 for steps, draft_tokens, _ in worker.built)
    assert worker.applied == [STARTUP_STEPS]  # and is the one that runs first
