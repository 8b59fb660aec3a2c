"""Request fields the scheduler cannot take, rejected on the CPU side (patch 0015).

Each test sends one request through the tree's own tokenizer-manager code, the
two steps every generate request takes before it is handed to the scheduler
(the end of ``_tokenize_one_request``): ``_validate_one_request`` then
``_create_tokenized_object``, both executed from the tree's source with
``load_defs``, with the tree's real ``SamplingParams`` and ``SessionParams``.
The patched trees (0.5.17, and its 0.5.23 port) must answer a bad field with a
ValueError (HTTP 400) whose message names it; pristine 0.5.17 and 0.5.23 must
fail the same test (xfail strict): they hand the field to the scheduler, where
it raises and stops the server (``logprob_start_len`` below -1,
``input_embeds`` of the wrong width, ``logit_bias`` values that are not
numbers, ``session_params`` ids that are not strings), or raise a TypeError
that the HTTP layer answers with 500, or keep an unbounded
``token_ids_logprob`` list.
"""

from __future__ import annotations

import logging
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
from test_request_validation import (  # the 0004/0005 tests' request stand-ins and verdicts
    IO_STRUCT,
    SAMPLING_PARAMS,
    TOKENIZER_MANAGER,
    VOCAB,
    FakeEmbeddingReq,
    TokenizerManagerStub,
    _assert_rejected,
    _outcome,
    _sampling_validator,
)
from test_request_validation import FakeGenerateReq as ValidatedReq

LOGPROB_RESULTS = "sglang.srt.managers.scheduler_components.logprob_result_processor"
EXPECTED_INPUT_LOGPROBS = "SchedulerLogprobResultProcessor._calculate_relevant_tokens_len"
SCHEDULE_BATCH = "sglang.srt.managers.schedule_batch"
HIDDEN = 16
PROMPT = [5, 6, 7, 8, 9, 10, 11, 12]


class FakeGenerateReq(ValidatedReq):
    """One normalized single GenerateReqInput: the given fields, None for any other it is asked for.
    A subclass of the 0004/0005 stand-in, the ``GenerateReqInput`` of the validation it runs."""

    def __init__(self, **fields: Any) -> None:
        defaults = dict(
            rid="r1", input_ids=list(PROMPT), input_embeds=None, sampling_params={}, return_logprob=False,
            logprob_start_len=-1, top_logprobs_num=0, token_ids_logprob=None, session_params=None,
            return_hidden_states=False, custom_logit_processor=None, stream=False, has_mm=False,
        )  # fmt: skip
        self.__dict__.update({**defaults, **fields})

    def __getattr__(self, name: str) -> None:
        return None


def _tokenized(**fields: Any) -> SimpleNamespace:
    return SimpleNamespace(**fields)


class TokenizerPath(TokenizerManagerStub):
    """The 0004/0005 stand-in's validation, then the tree's step that builds the scheduler's object."""

    def __init__(self, tree: Path) -> None:
        super().__init__(tree)
        extra = {
            "GenerateReqInput": FakeGenerateReq,
            "EmbeddingReqInput": FakeEmbeddingReq,
            "TokenizedGenerateReqInput": _tokenized,  # 0.5.17; 0.5.23 reads tokenized_generate_req_type
            "TokenizedEmbeddingReqInput": _tokenized,  # named in the embedding branch
            "logger": logging.getLogger(__name__),
            "_validate_watermark_request": lambda sampling_params: None,  # 0.5.23: no watermark asked for
            "get_disagg": lambda: SimpleNamespace(disaggregation_transfer_backend=None),  # 0.5.23
            **_sampling_validator(tree),  # patch 0005
            **load_defs(source(tree, IO_STRUCT), ["SessionParams"]),
        }
        for name in ["_validate_scheduler_fields", "_create_tokenized_object"]:  # the first: patch 0015
            try:
                defs = load_defs(source(tree, TOKENIZER_MANAGER), [f"TokenizerManager.{name}"], extra)
            except LookupError:
                continue
            self._methods[name] = defs[f"TokenizerManager.{name}"]
        self.sampling_params_class = TreeImporter.module(tree, SAMPLING_PARAMS).SamplingParams
        self.tokenized_generate_req_type = _tokenized
        self.preferred_sampling_params = None
        self.tokenizer = None
        self.model_config = SimpleNamespace(vocab_size=VOCAB, hidden_size=HIDDEN)
        self.server_args = SimpleNamespace(enable_custom_logit_processor=False, disaggregation_transfer_backend=None)
        self.rid_to_state: dict[str, Any] = {}

    def submit(self, req: FakeGenerateReq) -> BaseException | None:
        """What ``_tokenize_one_request`` does last: validate, then build the scheduler's object.
        Returns the exception raised, or None when the request would go to the scheduler."""
        time_stats = SimpleNamespace(set_tokenize_finish_time=lambda: None)
        self.rid_to_state[req.rid] = SimpleNamespace(time_stats=time_stats)

        def validate_and_build() -> None:
            self._validate_one_request(req, req.input_ids)
            self._create_tokenized_object(req, None, req.input_ids, req.input_embeds)

        return _outcome(validate_and_build)


@pytest.fixture(params=PATCHED_AND_PRISTINE)
def path(request, trees) -> TokenizerPath:
    return TokenizerPath(trees.get(request.param))


@pytest.fixture(params=PATCHED)
def patched_path(request, trees) -> TokenizerPath:
    return TokenizerPath(trees.get(request.param))


# -- logprob_start_len -------------------------------------------------------


@pytest.mark.parametrize("start, shown", [(-2, "-2"), (-100, "-100"), ("3", "'3'"), (2.5, "2.5")])
def test_logprob_start_len_below_minus_one_is_rejected(path: TokenizerPath, start: Any, shown: str) -> None:
    # Below -1 the scheduler slices origin_input_ids[start:] from the end, counts fewer input
    # logprobs than it computed, and its length assertion stops the scheduler.
    req = FakeGenerateReq(return_logprob=True, logprob_start_len=start)
    _assert_rejected(path.submit(req), "logprob_start_len", shown)


@pytest.mark.parametrize("start, return_logprob", [(-1, True), (0, True), (len(PROMPT), True), (-7, False)])
def test_logprob_start_len_the_scheduler_takes_passes(
    patched_path: TokenizerPath, start: int, return_logprob: bool
) -> None:
    # Without return_logprob the scheduler resets logprob_start_len to -1.
    req = FakeGenerateReq(return_logprob=return_logprob, logprob_start_len=start)
    assert patched_path.submit(req) is None


@pytest.mark.parametrize("tree_name", ["pristine", "upstream_pristine"])
def test_pristine_scheduler_counts_fewer_input_logprobs_below_minus_one(trees, tree_name: str) -> None:
    """The bug the check guards against, in the release's own scheduler code: with logprob_start_len
    -2 the logprobs computed (from position 0) outnumber the ones it expects, and the
    scheduler asserts they are equal."""
    tree = trees.get(tree_name)
    TreeImporter.use(tree)
    start_of_extend = load_defs(source(tree, SCHEDULE_BATCH), ["compute_extend_logprob_start_len"])
    expected = load_defs(source(tree, LOGPROB_RESULTS), [EXPECTED_INPUT_LOGPROBS])
    req = SimpleNamespace(origin_input_ids=list(PROMPT), logprob_start_len=-2)
    # No multi-item scoring (0.5.17 asks _is_multi_item_scoring, 0.5.23 _scoring_positions).
    processor = SimpleNamespace(_is_multi_item_scoring=lambda req: False, _scoring_positions=lambda req: None)
    start = start_of_extend["compute_extend_logprob_start_len"](
        logprob_start_len=-2, prefix_len=0, extend_len=len(PROMPT), full_untruncated_fill_len=len(PROMPT)
    )
    computed = len(PROMPT) - start
    assert computed == len(PROMPT)
    assert expected[EXPECTED_INPUT_LOGPROBS](processor, req) == 2 != computed


# -- input_embeds ------------------------------------------------------------


@pytest.mark.parametrize(
    "embeds, words",
    [
        ([[0.0] * (HIDDEN - 1)] * 3, ["input_embeds[0]", str(HIDDEN), str(HIDDEN - 1)]),
        ([[0.0] * HIDDEN, [0.0] * (HIDDEN + 2)], ["input_embeds[1]", str(HIDDEN + 2)]),
        ([[0.0] * HIDDEN, 0.5], ["input_embeds[1]", "float"]),
    ],
)
def test_input_embeds_of_another_width_are_rejected(path: TokenizerPath, embeds: list[Any], words: list[str]) -> None:
    # The scheduler builds torch.tensor(input_embeds) (ragged rows raise there) and the first
    # layer multiplies rows of hidden_size numbers.
    req = FakeGenerateReq(input_ids=None, input_embeds=embeds)
    _assert_rejected(path.submit(req), *words)


def test_input_embeds_of_the_hidden_size_pass(patched_path: TokenizerPath) -> None:
    assert patched_path.submit(FakeGenerateReq(input_ids=None, input_embeds=[[0.5] * HIDDEN] * 4)) is None


def _determine_batch_size(tree: Path, input_embeds: Any) -> BaseException | None:
    TreeImporter.use(tree)
    fn = load_defs(source(tree, IO_STRUCT), ["GenerateReqInput._determine_batch_size"])[
        "GenerateReqInput._determine_batch_size"
    ]
    return _outcome(fn, SimpleNamespace(text=None, input_ids=None, input_embeds=input_embeds))


@pytest.mark.parametrize("tree_name", PATCHED_AND_PRISTINE)
@pytest.mark.parametrize("embeds", [[], [[]]])
def test_empty_input_embeds_is_a_400(trees, tree_name: str, embeds: list[Any]) -> None:
    # 0.5.17 and 0.5.23 read input_embeds[0][0] first: an IndexError, answered with 500.
    _assert_rejected(_determine_batch_size(trees.get(tree_name), embeds), "input_embeds", "empty")


# -- session_params ----------------------------------------------------------


@pytest.mark.parametrize(
    "params, words",
    [
        ({"id": "s", "no_such_field": 1}, ["session_params", "no_such_field"]),  # pristine: TypeError, a 500
        ({"id": ["s"]}, ["session_params.id", "str"]),  # the scheduler looks it up in a dict: unhashable
        ({"id": "s", "rid": {"a": 1}}, ["session_params.rid"]),
        ({"id": "s", "offset": "x"}, ["session_params.offset", "int"]),  # sliced into the session's context
        ({"id": "s", "replace": "yes"}, ["session_params.replace", "bool"]),
        ("s", ["session_params", "object"]),
    ],
)
def test_malformed_session_params_are_rejected(path: TokenizerPath, params: Any, words: list[str]) -> None:
    _assert_rejected(path.submit(FakeGenerateReq(session_params=params)), *words)


def test_well_formed_session_params_pass(patched_path: TokenizerPath) -> None:
    params = {"id": "s", "rid": None, "offset": 3, "replace": False, "drop_previous_output": None}
    assert patched_path.submit(FakeGenerateReq(session_params=params)) is None


# -- sampling params: logit_bias values, stop_token_ids entries ---------------


@pytest.mark.parametrize("bias", ["x", None, [1.0], True, float("nan"), float("inf")])
def test_logit_bias_value_that_is_not_a_finite_number_is_rejected(path: TokenizerPath, bias: Any) -> None:
    # The scheduler writes each value into a float tensor when it builds the batch's sampling info.
    req = FakeGenerateReq(sampling_params={"max_new_tokens": 2, "logit_bias": {"5": bias}})
    _assert_rejected(path.submit(req), "logit_bias", "'5'")


def test_numeric_logit_bias_passes(patched_path: TokenizerPath) -> None:
    req = FakeGenerateReq(sampling_params={"max_new_tokens": 2, "logit_bias": {"5": -100, "6": 2.5}})
    assert patched_path.submit(req) is None


@pytest.mark.parametrize("ids", [[[1]], ["7"], [1.5], [{"id": 1}]])
def test_stop_token_ids_entry_that_is_not_an_integer_is_rejected(path: TokenizerPath, ids: list[Any]) -> None:
    # The pristine releases run int() on each entry: a TypeError (500) for a list or dict, "7" and 1.5 silently
    # become other ids.
    req = FakeGenerateReq(sampling_params={"max_new_tokens": 2, "stop_token_ids": ids})
    _assert_rejected(path.submit(req), "stop_token_ids")


def test_integer_stop_token_ids_pass(patched_path: TokenizerPath) -> None:
    req = FakeGenerateReq(sampling_params={"max_new_tokens": 2, "stop_token_ids": [3, 4]})
    assert patched_path.submit(req) is None


# -- token_ids_logprob size --------------------------------------------------


def test_token_ids_logprob_longer_than_the_vocab_is_rejected(path: TokenizerPath) -> None:
    # Each entry is one logprob per position and generated token, kept by the scheduler.
    req = FakeGenerateReq(return_logprob=True, token_ids_logprob=[1] * (VOCAB + 1))
    _assert_rejected(path.submit(req), "token_ids_logprob", str(VOCAB + 1), str(VOCAB))


def test_token_ids_logprob_of_the_whole_vocab_passes(patched_path: TokenizerPath) -> None:
    req = FakeGenerateReq(return_logprob=True, token_ids_logprob=list(range(VOCAB)))
    assert patched_path.submit(req) is None
