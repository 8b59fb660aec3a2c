"""A request's ``spec_accept_rate`` divides by the drafts its own verifies checked (patch 0052; 0029 of the 0.5.23
port), on CPU.

SGLang 0.5.17 gives each finished request ``spec_num_correct_drafts / (spec_verify_ct * (K - 1))`` with the start-up
K from the server args, which ``--speculative-adaptive`` leaves as started while the worker switches. A request that
verified at K 4 under a start-up K 2 reads a rate above 1; one held at steps 0 or at short chains reads too low. The
patch counts each request's proposed drafts as its verifies run (each result's own ``speculative_num_draft_tokens``)
and carries the count to the tokenizer beside the correct drafts. Here: the tree's
``_resolve_spec_v2_tokens`` on stand-ins, its ``_calculate_spec_decoding_metrics`` with and without the count, and
every place that hands ``spec_num_correct_drafts`` on also handing the new count. The releases fail the first two
(xfail).
"""

from __future__ import annotations

import ast
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from sglang_trees import PATCHED_AND_PRISTINE, source, tree_defs
from sglang_trees import trees  # noqa: F401 (a fixture)
from test_spec_accept_length_per_request import meta

RESULTS = "sglang.srt.managers.scheduler_components.batch_result_processor"
RESOLVE = "SchedulerBatchResultProcessor._resolve_spec_v2_tokens"
PIPELINE = ["sglang.srt.managers.scheduler_components.output_streamer", "sglang.srt.managers.io_struct",
            "sglang.srt.managers.detokenizer_manager", "sglang.srt.managers.multi_tokenizer_mixin"]


class Req(SimpleNamespace):
    """Req's stand-in: the per-request spec counters, no grammar, running."""

    def __init__(self) -> None:
        super().__init__(is_retracted=False, grammar=None, kv_committed_len=0, spec_verify_ct=0,
                         kv=SimpleNamespace(kv_committed_len=0),  # 0.5.23 keeps the lengths there
                         spec_num_correct_drafts=0, spec_num_proposed_drafts=0, spec_num_block_accept_tokens=0,
                         spec_num_cap_tokens=0, histogram=[])  # fmt: skip

    def finished(self) -> bool:
        return False

    def update_spec_correct_drafts_histogram(self, n: int) -> None:
        self.histogram.append(n)


def verify(tree_name: str, trees: Any, reqs: list[Req], k: int, accept_lens: list[int]) -> None:
    """One verify result of ``reqs`` run at ``k`` draft tokens, through the tree's result processor."""
    # 0.5.23 reads the row stride through a helper: the output stride, else the draft count
    extra = {"_get_speculative_output_stride": lambda r: r.speculative_output_stride or r.speculative_num_draft_tokens}
    fn = tree_defs(trees.get(tree_name), RESULTS, [RESOLVE], extra=extra)[RESOLVE]
    processor = SimpleNamespace(model_worker=SimpleNamespace(on_verify_complete_cpu=lambda *a, **kw: None),
                                advance_grammar_fsm=lambda result, batch: None,
                                metrics_reporter=SimpleNamespace(snapshot_spec_decode_metrics=lambda b, r: None))
    result = SimpleNamespace(next_token_ids=torch.arange(len(reqs) * k), accept_lens=torch.tensor(accept_lens),
                             block_accept_lens=None, cap_lens=None, speculative_num_draft_tokens=k,
                             speculative_output_stride=None, num_non_draft_tokens_per_req=1)  # fmt: skip
    fn(processor, result, SimpleNamespace(reqs=reqs))


@pytest.mark.parametrize("tree_name", PATCHED_AND_PRISTINE)
def test_each_verify_adds_its_own_draft_count(trees, tree_name: str) -> None:
    reqs = [Req(), Req()]
    verify(tree_name, trees, reqs, k=4, accept_lens=[4, 2])  # 3 drafts each
    verify(tree_name, trees, reqs, k=2, accept_lens=[2, 1])  # 1 draft each
    verify(tree_name, trees, reqs, k=1, accept_lens=[1, 1])  # steps 0: none
    assert [r.spec_verify_ct for r in reqs] == [3, 3]
    assert [r.spec_num_correct_drafts for r in reqs] == [4, 1]
    assert [r.spec_num_proposed_drafts for r in reqs] == [4, 4]


@pytest.mark.parametrize("tree_name", PATCHED_AND_PRISTINE)
def test_the_rate_divides_by_the_requests_own_drafts(trees, tree_name: str) -> None:
    # 10 verifies at K 4 and 10 at K 2 under a start-up K of 4: 40 drafts, 30 right.
    info = meta(tree_name, trees, completion=1 + 50, verifies=20, correct=30, proposed=40)
    assert info["spec_accept_rate"] == pytest.approx(30 / 40)  # the release: 30 / 60
    assert info["spec_num_proposed_drafts"] == 40


def test_without_the_count_the_start_up_k_stands_in(trees) -> None:
    # An output batch that does not carry it (another sender): as the release computes it.
    info = meta("patched", trees, completion=1 + 50, verifies=20, correct=30)
    assert info["spec_accept_rate"] == pytest.approx(30 / 60)


def test_no_verify_with_drafts_gives_no_rate(trees) -> None:
    # Every verify at steps 0 (one bonus token each): no drafts proposed, so no spec figures at all.
    assert "spec_accept_rate" not in meta("patched", trees, completion=1 + 20, verifies=20, correct=0, proposed=0)


def field_names(text: str) -> Counter:
    """How often each name stands in ``text`` as a keyword argument, an annotated field or an attribute."""
    names: Counter = Counter()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.keyword):
            names[node.arg] += 1
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] += 1
        elif isinstance(node, ast.Attribute):
            names[node.attr] += 1
    return names


@pytest.mark.parametrize("tree_name", PATCHED_AND_PRISTINE)
def test_every_hand_on_of_the_correct_drafts_carries_the_proposed_ones(trees, tree_name: str) -> None:
    """Output streamer, both output batch types, the detokenizer and the multi-tokenizer split: wherever
    ``spec_num_correct_drafts`` is a keyword, field or attribute, ``spec_num_proposed_drafts`` is too."""
    missing = []
    for module in PIPELINE:
        names = field_names(source(trees.get(tree_name), module).read_text())
        correct, proposed = names["spec_num_correct_drafts"], names["spec_num_proposed_drafts"]
        assert correct > 0, module
        if proposed != correct:
            missing.append(f"{module}: {correct} correct, {proposed} proposed")
    assert missing == []
