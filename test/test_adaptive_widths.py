"""Patch 0014: adaptive speculation captures each candidate's draft extend at that candidate's width.

``--speculative-adaptive`` builds one runtime state per candidate step count, overriding the spec
bag (``get_context().override``) while it captures that state's graphs; ``server_args`` stays the
read-only startup record. On pristine 0.5.17 the draft-extend runner takes its width from
``server_args``, so a candidate wider than the launch width overran the runner's buffers (an
illegal memory access at start-up on an H200), and the shared logits buffer was sized for the
launch width only. 0.5.23 reads the bag already: its pristine tree passes the width test.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from types import SimpleNamespace

import pytest
from sglang_trees import SHOWS_THE_BUG, TreeImporter, load_defs, source
from sglang_trees import trees  # noqa: F401 (a fixture)

SPEC_UTILS = "sglang.srt.speculative.spec_utils"
MODEL_RUNNER = "sglang.srt.model_executor.model_runner"
STARTUP_WIDTH = 4  # --speculative-num-draft-tokens at launch
WIDEST = 8  # the widest adaptive candidate (steps 7)
CAPTURE_BS = [1, 2, 4, 8, 16, 32, 64]


def spec_bag(draft_tokens: int) -> SimpleNamespace:
    return SimpleNamespace(speculative_num_draft_tokens=draft_tokens, speculative_eagle_topk=1)


def draft_extend_width(tree: Path, bag_width: int) -> int:
    """The draft-extend width the tree resolves while the spec bag says ``bag_width``."""
    resolve = load_defs(source(tree, SPEC_UTILS), ["resolve_num_tokens_per_req"],
                        extra={"get_spec": lambda: spec_bag(bag_width)})["resolve_num_tokens_per_req"]
    kwargs = {}
    if "server_args" in inspect.signature(resolve).parameters:  # 0.5.17 passes the startup record
        kwargs["server_args"] = SimpleNamespace(speculative_num_draft_tokens=STARTUP_WIDTH,
                                                speculative_eagle_topk=1)
    return resolve(phase="draft_extend", **kwargs)


@pytest.mark.parametrize("tree_name", ["patched", "upstream_pristine",
                                       pytest.param("pristine", marks=SHOWS_THE_BUG)])
@pytest.mark.parametrize("bag_width", [1, 2, WIDEST])
def test_draft_extend_width_follows_the_adaptive_override(trees, tree_name: str, bag_width: int) -> None:
    assert draft_extend_width(trees.get(tree_name), bag_width) == bag_width


@pytest.mark.parametrize("tree_name", ["patched", "upstream_pristine"])
def test_without_an_override_the_width_is_the_launch_width(trees, tree_name: str) -> None:
    assert draft_extend_width(trees.get(tree_name), STARTUP_WIDTH) == STARTUP_WIDTH


class FakeRunner:
    """The two attributes ``max_decode_logits_rows`` reads, with 0.5.17's width rule."""

    def __init__(self, widest: int) -> None:
        self.server_args = SimpleNamespace(speculative_num_draft_tokens=STARTUP_WIDTH,
                                           max_speculative_num_draft_tokens=widest,
                                           speculative_adaptive=False,  # no row bound (patch 0041)
                                           cuda_graph_config=SimpleNamespace(decode=SimpleNamespace(bs=CAPTURE_BS)))

    def decode_num_tokens_per_req(self, *, num_draft_tokens: int | None = None) -> int:
        return STARTUP_WIDTH if num_draft_tokens is None else num_draft_tokens


def logits_rows(tree: Path, widest: int) -> int:
    TreeImporter.use(tree)  # 0041's max_graph_rows comes from the tree's adaptive_spec_params
    rows = load_defs(source(tree, MODEL_RUNNER), ["ModelRunner.max_decode_logits_rows"],
                     extra={"get_batch_sizes_to_capture": lambda runner, width=1: (CAPTURE_BS, [])})
    return rows["ModelRunner.max_decode_logits_rows"](FakeRunner(widest))


@pytest.mark.parametrize("tree_name", ["patched", pytest.param("pristine", marks=SHOWS_THE_BUG)])
def test_the_shared_logits_buffer_holds_the_widest_candidate(trees, tree_name: str) -> None:
    assert logits_rows(trees.get(tree_name), WIDEST) == max(CAPTURE_BS) * WIDEST


def test_without_adaptive_the_logits_buffer_is_unchanged(trees) -> None:
    # max_speculative_num_draft_tokens is the launch width when adaptive is off.
    assert logits_rows(trees.get("patched"), STARTUP_WIDTH) == max(CAPTURE_BS) * STARTUP_WIDTH
