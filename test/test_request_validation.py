"""Bad requests rejected on the CPU side of the patched SGLang (patches 0004, 0005).

Each test runs the tree's own validation code, executed from its source file
with ``load_defs``: ``TokenizerManager._validate_one_request`` (every generate
and embedding request passes it before the scheduler sees it: /generate, the
OpenAI endpoints, the Engine), ``GenerateReqInput._handle_parallel_sampling``
(the first reader of ``sampling_params``) and ``SamplingParams.verify``. The
request objects are small stand-ins with the fields that code reads. Tests
marked with the pristine trees must fail there (xfail strict): unpatched
0.5.17 and 0.5.23 let the bad input through to the GPU, or fail with a
TypeError that the HTTP layer answers with 500. Every test runs on the patched
0.5.17 tree and on the upstream port (0.5.23 + patches/upstream/v0.5.23).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import pytest

from sglang_trees import (  # noqa: F401 (trees: a module-scoped fixture)
    PATCHED,
    PATCHED_AND_PRISTINE,
    TreeImporter,
    load_defs,
    source,
    trees,
)

TOKENIZER_MANAGER = "sglang.srt.managers.tokenizer_manager"
IO_STRUCT = "sglang.srt.managers.io_struct"
SAMPLING_PARAMS = "sglang.srt.sampling.sampling_params"
VOCAB = 1000
CONTEXT = 64


@dataclass
class FakeGenerateReq:
    """The fields of one normalized GenerateReqInput that ``_validate_one_request`` reads."""

    input_ids: list[Any] | None
    sampling_params: dict[str, Any] = field(default_factory=dict)
    has_mm: bool = False
    return_hidden_states: bool = False
    custom_logit_processor: str | None = None
    token_ids_logprob: list[int] | None = None
    top_logprobs_num: Any = 0
    return_sampling_mask: bool = False  # read by 0.5.23
    sampling_logprobs_mode: str | None = None  # read by 0.5.23

    def contains_mm_input(self) -> bool:
        return self.has_mm


class FakeEmbeddingReq:
    """Only an ``isinstance`` target: these tests send generate requests."""


def _sampling_validator(tree: Path) -> dict[str, Callable[..., None]]:
    """``validate_sampling_params`` of the tree (patch 0005), or nothing where it is absent."""
    try:
        return load_defs(source(tree, SAMPLING_PARAMS), ["validate_sampling_params"])
    except LookupError:
        return {}


def _outcome(fn: Callable[..., Any], *args: Any) -> BaseException | None:
    """The exception ``fn(*args)`` raised, or None."""
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 (the test inspects which one)
        return e
    return None


def _assert_rejected(error: BaseException | None, *words: str) -> None:
    """A ValueError (answered with 400) whose message holds every word."""
    assert isinstance(error, ValueError), f"expected a ValueError, got {error!r}"
    for word in words:
        assert word in str(error), f"{word!r} not in {str(error)!r}"


class TokenizerManagerStub:
    """The tree's request validation methods on a stand-in TokenizerManager."""

    def __init__(self, tree: Path) -> None:
        TreeImporter.use(tree)
        names = ["_validate_one_request", "_validate_input_ids_in_vocab", "_validate_token_ids_logprob"]
        features = SimpleNamespace(
            enable_encoder_swa_bounded_replay=False, enable_custom_logit_processor=False, return_hidden_states_mode=None
        )  # 0.5.23's server-wide flags (get_exec().features)
        extra = {
            "GenerateReqInput": FakeGenerateReq,
            "EmbeddingReqInput": FakeEmbeddingReq,
            "logger": logging.getLogger(__name__),
            "get_request_return_hidden_states_mode": lambda requested: 0,
            "get_server_return_hidden_states_mode": lambda *server_args: 0,
            # Both: else the import of get_platform (the same statement) would bind the real get_exec.
            "get_exec": lambda: SimpleNamespace(features=features),
            "get_platform": lambda: SimpleNamespace(is_cuda=True),
            "supports_sampling_mask": lambda processor: True,  # 0.5.23; its module needs dill
            **_sampling_validator(tree),
        }
        self._methods = {}
        for name in names:  # pristine 0.5.23 has no _validate_input_ids_in_vocab
            try:
                defs = load_defs(source(tree, TOKENIZER_MANAGER), [f"TokenizerManager.{name}"], extra)
            except LookupError:
                continue
            self._methods[name] = defs[f"TokenizerManager.{name}"]
        self.context_len = CONTEXT
        self.num_reserved_tokens = 0
        self.allow_auto_truncate = False
        self.validate_total_tokens = True
        self.is_generation = True
        self.model_config = SimpleNamespace(vocab_size=VOCAB)
        self.server_args = SimpleNamespace(enable_custom_logit_processor=False)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        return self._methods[name].__get__(self)

    def _validate_joint_schema_request(self, obj: Any, input_ids: list[int]) -> None:
        """0.5.23: only checkpoints with a joint or pointer head check anything here."""

    def validate(self, req: FakeGenerateReq) -> BaseException | None:
        return _outcome(self._validate_one_request, req, req.input_ids)


@pytest.fixture(params=PATCHED_AND_PRISTINE)
def manager(request, trees) -> TokenizerManagerStub:
    return TokenizerManagerStub(trees.get(request.param))


@pytest.fixture(params=PATCHED)
def patched_manager(request, trees) -> TokenizerManagerStub:
    return TokenizerManagerStub(trees.get(request.param))


# -- patch 0004: token ids past the vocabulary -------------------------------


@pytest.mark.parametrize("bad_id, position", [(VOCAB, 2), (VOCAB + 4000, 0), (-1, 1), (2**40, 2)])
def test_out_of_vocab_input_id_is_rejected_naming_id_and_vocab(
    manager: TokenizerManagerStub, bad_id: int, position: int
) -> None:
    ids = [5, 6, 7]
    ids[position] = bad_id
    _assert_rejected(manager.validate(FakeGenerateReq(ids)), f"input_ids[{position}] = {bad_id}", str(VOCAB))


def test_first_bad_id_of_many_is_named(patched_manager: TokenizerManagerStub) -> None:
    ids = [1] * 40 + [VOCAB + 1, VOCAB + 2]
    _assert_rejected(patched_manager.validate(FakeGenerateReq(ids)), f"input_ids[40] = {VOCAB + 1}")


@pytest.mark.parametrize("ids", [[0], [VOCAB - 1], list(range(0, VOCAB, 25))])
def test_ids_inside_the_vocab_pass(patched_manager: TokenizerManagerStub, ids: list[int]) -> None:
    assert patched_manager.validate(FakeGenerateReq(ids)) is None


def test_non_integer_id_is_rejected(patched_manager: TokenizerManagerStub) -> None:
    _assert_rejected(patched_manager.validate(FakeGenerateReq([1, "2", 3])), "list of integers")


def test_multimodal_request_ids_are_left_to_its_processor(patched_manager: TokenizerManagerStub) -> None:
    # Multimodal processors put placeholder ids (outside the vocab) into input_ids.
    assert patched_manager.validate(FakeGenerateReq([1, VOCAB + 7], has_mm=True)) is None


def test_text_prompt_tokenized_by_the_server_is_not_rechecked(patched_manager: TokenizerManagerStub) -> None:
    req = FakeGenerateReq(None)
    assert _outcome(patched_manager._validate_one_request, req, [1, 2, 3]) is None


@pytest.mark.parametrize("count", [VOCAB + 1, 10**6, -1, "5"])
def test_top_logprobs_past_the_vocab_is_rejected(manager: TokenizerManagerStub, count: Any) -> None:
    # The scheduler takes topk(max(top_logprobs_nums)) over the vocabulary: k past it raises there.
    _assert_rejected(manager.validate(FakeGenerateReq([1, 2], top_logprobs_num=count)), "top_logprobs_num", str(VOCAB))


@pytest.mark.parametrize("count", [0, 5, VOCAB])
def test_top_logprobs_inside_the_vocab_pass(patched_manager: TokenizerManagerStub, count: int) -> None:
    assert patched_manager.validate(FakeGenerateReq([1, 2], top_logprobs_num=count)) is None


# -- patch 0005: malformed sampling params -----------------------------------


@pytest.mark.parametrize(
    "params, words",
    [
        ({"max_new_tokens": "abc"}, ["max_new_tokens", "integer", "'abc'"]),
        ({"max_new_tokens": 4, "temperature": "x"}, ["temperature", "number"]),
        ({"top_k": 2.5}, ["top_k", "integer"]),
        ({"stop": 7}, ["stop", "string"]),
        ({"ignore_eos": "yes"}, ["ignore_eos", "boolean"]),
        ({"no_such_field": 1}, ["unknown field", "no_such_field"]),
    ],
)
def test_sampling_param_type_error_is_a_400_naming_the_field(
    manager: TokenizerManagerStub, params: dict[str, Any], words: list[str]
) -> None:
    _assert_rejected(manager.validate(FakeGenerateReq([1, 2], sampling_params=params)), *words)


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"max_new_tokens": 8, "temperature": 0, "top_p": 0.9, "top_k": -1, "stop": ["\n"], "n": 1},
        {"max_new_tokens": None, "temperature": None, "stop_token_ids": [3, 4], "logit_bias": {"5": 1.0}},
    ],
)
def test_well_formed_sampling_params_pass(patched_manager: TokenizerManagerStub, params: dict[str, Any]) -> None:
    assert patched_manager.validate(FakeGenerateReq([1, 2], sampling_params=params)) is None


def _parallel_sampling(tree: Path, sampling_params: Any) -> BaseException | None:
    """Run the tree's ``GenerateReqInput._handle_parallel_sampling`` on a single text request."""
    TreeImporter.use(tree)
    fn = load_defs(source(tree, IO_STRUCT), ["GenerateReqInput._handle_parallel_sampling"], _sampling_validator(tree))[
        "GenerateReqInput._handle_parallel_sampling"
    ]
    req = SimpleNamespace(sampling_params=sampling_params, is_single=True, text="hi", input_ids=None, input_embeds=None)
    req._handle_beam_search_parallel_sampling = lambda: req.parallel_sample_num  # 0.5.23: no beam request here
    return _outcome(fn, req)


@pytest.mark.parametrize("tree_name", PATCHED_AND_PRISTINE)
@pytest.mark.parametrize(
    "params, words",
    [
        ({"n": 0}, ["sampling_params.n", "at least 1", "0"]),
        ({"n": "2"}, ["sampling_params.n", "integer"]),
        ([{"n": 1}, {"n": -3}], ["sampling_params.n", "-3"]),
        ({"max_new_tokens": "abc"}, ["max_new_tokens"]),
    ],
)
def test_n_and_types_checked_before_parallel_sampling_reads_them(
    trees, tree_name: str, params: Any, words: list[str]
) -> None:
    _assert_rejected(_parallel_sampling(trees.get(tree_name), params), *words)


@pytest.mark.parametrize("tree_name", PATCHED)
def test_parallel_sampling_leaves_unknown_names_to_multimodal_processors(trees, tree_name: str) -> None:
    # Whisper's processor pops its own keys ("language") out of sampling_params later.
    assert _parallel_sampling(trees.get(tree_name), {"language": "en", "n": 2}) is None


def _verify(tree: Path, **fields: Any) -> BaseException | None:
    """Run the tree's ``SamplingParams.verify`` on post-init field values."""
    TreeImporter.use(tree)
    no_reasoning_ids = {"get_request_reasoning_end_token_ids": lambda *args, **kwargs: None}  # 0.5.23
    verify = load_defs(source(tree, SAMPLING_PARAMS), ["SamplingParams.verify"], no_reasoning_ids)[
        "SamplingParams.verify"
    ]
    defaults = dict(
        temperature=1.0, top_p=1.0, min_p=0.0, top_k=1 << 30, frequency_penalty=0.0, presence_penalty=0.0,
        repetition_penalty=1.0, min_new_tokens=0, max_new_tokens=16, logit_bias=None, stop_token_ids=None,
        json_schema=None, regex=None, ebnf=None, structural_tag=None, beam_width=None, sampling_seed=None,
        custom_params=None,
    )  # fmt: skip
    return _outcome(verify, SimpleNamespace(**{**defaults, **fields}), VOCAB)


@pytest.mark.parametrize("tree_name", PATCHED_AND_PRISTINE)
def test_out_of_vocab_stop_token_id_is_rejected(trees, tree_name: str) -> None:
    # With min_new_tokens > 0 the penalizer scatters at these ids on the GPU.
    _assert_rejected(_verify(trees.get(tree_name), stop_token_ids={3, VOCAB + 9}, min_new_tokens=2), str(VOCAB + 9))


@pytest.mark.parametrize("tree_name", PATCHED)
def test_stop_token_ids_inside_the_vocab_pass_verify(trees, tree_name: str) -> None:
    assert _verify(trees.get(tree_name), stop_token_ids={0, VOCAB - 1}) is None
