"""A request's ``spec_accept_length`` counts the tokens its verifies produced (patch 0050), on CPU.

SGLang 0.5.17 gives each finished request ``completion_tokens / spec_verify_ct``. Under the spec off path
(``SGLANG_SPEC_OFF_PATH``, patches 0045-0047) a turned-down cycle decodes one token without a verify, so a request
that spent most of its cycles off read an accept length of 44 and 49 at bs 8 and 32 in session 40's dense-8 run
(``benchmark/results/20261205-1325-h100-tp1-dense8-miss65-koff-off-path``); the prefill's token also counts. The
patch divides the verifies' own tokens (correct drafts plus one bonus each) by their count, as the decode log and
``/server_info``'s ``avg_spec_accept_length`` do. Here the tree's
``TokenizerManager._calculate_spec_decoding_metrics`` runs on a stand-in output batch; the release counts every
completion token (xfail).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from sglang_trees import SHOWS_THE_BUG, tree_defs
from sglang_trees import trees  # noqa: F401 (a fixture)

TOKENIZER = "sglang.srt.managers.tokenizer_manager"
METHOD = "TokenizerManager._calculate_spec_decoding_metrics"
TREES = ["patched", pytest.param("pristine", marks=SHOWS_THE_BUG)]
ALL = ["patched", "pristine"]


def meta(tree_name: str, trees: Any, completion: int, verifies: int, correct: int,
         proposed: int | None = None) -> dict[str, Any]:
    """The meta_info one finished request gets from the tree: ``completion`` tokens, ``verifies`` verify cycles
    that accepted ``correct`` drafts in all, with 4 draft tokens a verify at start-up; ``proposed``: the drafts
    its verifies checked, as patch 0052's output batches carry it (None: a batch without it)."""
    extra = {"_ragged_verify_cap_accept": lambda: False,
             "get_spec": lambda: SimpleNamespace(speculative_num_draft_tokens=4)}  # 0.5.23 reads it there
    fn = tree_defs(trees.get(tree_name), TOKENIZER, [METHOD], extra=extra)[METHOD]
    manager = SimpleNamespace(server_args=SimpleNamespace(speculative_num_draft_tokens=4))
    recv = SimpleNamespace(spec_verify_ct=[verifies], spec_num_correct_drafts=[correct], completion_tokens=[completion],
                           spec_correct_drafts_histogram=None, spec_cap_lens_histogram=None)  # fmt: skip
    if proposed is not None:
        recv.spec_num_proposed_drafts = [proposed]
    info: dict[str, Any] = {}
    fn(manager, info, recv, 0)
    return info


@pytest.mark.parametrize("tree_name", TREES)
def test_off_cycles_leave_the_accept_length_alone(trees, tree_name: str) -> None:
    # 40 verifies of 3 tokens each (2 correct drafts), the prefill's token and 135 tokens of off cycles.
    info = meta(tree_name, trees, completion=1 + 120 + 135, verifies=40, correct=80)
    assert info["spec_accept_length"] == pytest.approx(3.0)  # the release: 256 / 40 = 6.4


@pytest.mark.parametrize("tree_name", TREES)
def test_steps0_verifies_count_one_token_each(trees, tree_name: str) -> None:
    # A request the policy held at steps 0 on the spec path: each verify gives the bonus token alone.
    info = meta(tree_name, trees, completion=1 + 64, verifies=64, correct=0)
    assert info["spec_accept_length"] == pytest.approx(1.0)  # the release: 65 / 64


@pytest.mark.parametrize("tree_name", ALL)
def test_the_accept_rate_and_a_request_that_never_verified_read_as_before(trees, tree_name: str) -> None:
    info = meta(tree_name, trees, completion=1 + 120 + 135, verifies=40, correct=80)
    assert info["spec_accept_rate"] == pytest.approx(80 / (40 * 3))
    assert info["spec_verify_ct"] == 40 and info["spec_num_correct_drafts"] == 80
    # every cycle off: no spec figure at all
    assert "spec_accept_length" not in meta(tree_name, trees, completion=64, verifies=0, correct=0)
