"""Bad input for a soak: requests a server must answer with a client error, never a crash.

Each ``BadInput`` is one raw request body for one path. ``must_reject`` says
that a 2xx answer is wrong too (the input cannot be served); without it
either a 2xx or a 4xx is fine (an unknown top-level field may be ignored,
``max_new_tokens`` 0 may return nothing). ``mentions`` are words the error
message must hold to name the problem (compared without case). A 5xx, a hang
or a dropped connection is always an unexpected error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from benchmark.soak.http_client import Reply
from benchmark.soak.workload import failure_class


@dataclass(frozen=True)
class BadInput:
    name: str
    path: str
    body: bytes
    must_reject: bool = True
    mentions: tuple[str, ...] = ()
    content_type: str = "application/json"


@dataclass
class BadInputResult:
    name: str
    status: int | None
    verdict: str  # rejected_4xx | rejected_in_stream | accepted | unexpected
    message: str
    names_problem: bool
    must_reject: bool


def _j(payload: Any) -> bytes:
    return json.dumps(payload).encode()


def bad_inputs(vocab_size: int, context_len: int, model: str) -> list[BadInput]:
    """The catalogue, for a server with this vocabulary and context length (67 cases)."""
    oov, long_ids = vocab_size + 10, [1] * (context_len + 8)
    gen = "/generate"
    cmp = "/v1/completions"
    chat = "/v1/chat/completions"

    def g(name: str, sp: dict[str, Any] | None = None, must: bool = True, mentions: tuple[str, ...] = (), **top: Any):
        body = {"text": "Hello", **top}
        if sp is not None:
            body["sampling_params"] = sp
        return BadInput(f"generate_{name}", gen, _j(body), must, mentions)

    def c(name: str, must: bool = True, mentions: tuple[str, ...] = (), **fields: Any) -> BadInput:
        return BadInput(f"completions_{name}", cmp, _j({"model": model, "prompt": "Hello", **fields}), must, mentions)

    def ch(name: str, must: bool = True, mentions: tuple[str, ...] = (), **fields: Any) -> BadInput:
        body = {"model": model, "messages": [{"role": "user", "content": "Hello"}], **fields}
        return BadInput(f"chat_{name}", chat, _j(body), must, mentions)

    return [
        BadInput("generate_invalid_json", gen, b'{"text": "Hello", "sampling_params": {', mentions=("json",)),
        BadInput("completions_invalid_json", cmp, b'{"model": "x", "prompt": ', mentions=("json",)),
        BadInput("chat_invalid_json", chat, b"[1, 2", mentions=("json",)),
        BadInput("generate_non_utf8", gen, b'{"text": "\xff\xfe\xfd"}'),
        BadInput("completions_non_utf8", cmp, b'{"model": "x", "prompt": "\xc3\x28"}'),
        BadInput("chat_non_utf8", chat, b'{"messages": [{"role": "user", "content": "\xed\xa0\x80"}]}'),
        g("prompt_over_context", {"max_new_tokens": 4}, mentions=("context",), input_ids=long_ids, text=None),
        c("prompt_over_context", mentions=("context",), prompt=long_ids),
        c("max_tokens_0", mentions=("max_tokens",), max_tokens=0),
        c("max_tokens_negative", mentions=("max_tokens",), max_tokens=-5),
        c("max_tokens_huge", mentions=("context",), max_tokens=10**9),
        g("max_new_tokens_0", {"max_new_tokens": 0}, must=False),
        g("max_new_tokens_negative", {"max_new_tokens": -1}, mentions=("max_new_tokens",)),
        g("max_new_tokens_huge", {"max_new_tokens": 10**9}, mentions=("context",)),
        g("max_new_tokens_string", {"max_new_tokens": "abc"}, mentions=("max_new_tokens",)),
        g("temperature_string", {"temperature": "x"}, mentions=("temperature",)),
        g("unknown_sampling_field", {"no_such_field": 1}, mentions=("no_such_field",)),
        g("unknown_top_field", {"max_new_tokens": 2}, must=False, no_such_field=1),
        c("unknown_field", must=False, no_such_field=1, max_tokens=2),
        g("top_p_above_1", {"top_p": 1.5}, mentions=("top_p",)),
        c("top_p_above_1", mentions=("top_p",), top_p=1.5),
        g("temperature_negative", {"temperature": -1.0}, mentions=("temperature",)),
        ch("temperature_negative", mentions=("temperature",), temperature=-1.0),
        c("n_0", mentions=("n",), n=0),
        g("n_0", {"n": 0}, mentions=("n",)),
        c("empty_prompt", mentions=("empty",), prompt=""),
        ch("empty_messages", mentions=("messages",), messages=[]),
        g("empty_text", {"max_new_tokens": 2}, must=False, text=""),
        g("empty_input_ids", {"max_new_tokens": 2}, mentions=("input_ids",), input_ids=[], text=None),
        g("oov_input_id", {"max_new_tokens": 2}, mentions=(str(oov), str(vocab_size)), input_ids=[1, oov], text=None),
        g("negative_input_id", {"max_new_tokens": 2}, mentions=("-1",), input_ids=[-1, 2], text=None),
        g("oov_input_id_batch", {"max_new_tokens": 2}, mentions=(str(vocab_size),), input_ids=[[1, 2], [vocab_size]],
          text=None),  # fmt: skip
        g("oov_input_id_stream", {"max_new_tokens": 2}, mentions=(str(oov),), input_ids=[oov], text=None, stream=True),
        c("oov_prompt_id", mentions=(str(oov),), prompt=[1, 2, oov]),
        g("oov_stop_token_id", {"max_new_tokens": 4, "min_new_tokens": 2, "stop_token_ids": [oov]}, mentions=(str(oov),)),
        g("oov_token_ids_logprob", {"max_new_tokens": 2}, mentions=(str(oov),), return_logprob=True,
          token_ids_logprob=[oov]),  # fmt: skip
        g("oov_logit_bias", {"max_new_tokens": 2, "logit_bias": {str(oov): 1.0}}, mentions=("logit_bias",)),
        g("top_logprobs_past_vocab", {"max_new_tokens": 2}, mentions=("logprobs", str(vocab_size)), return_logprob=True,
          top_logprobs_num=10**6),  # fmt: skip
        c("logprobs_past_vocab", mentions=("logprobs",), logprobs=10**6, max_tokens=2),
        ch("top_logprobs_past_vocab", mentions=("logprobs",), logprobs=True, top_logprobs=10**6, max_tokens=2),
        g("logprob_start_len_past_input", {"max_new_tokens": 2}, must=False, return_logprob=True,
          logprob_start_len=10**6),  # fmt: skip
        g("sampling_seed_negative", {"max_new_tokens": 2, "sampling_seed": -1}, must=False),
        g("unknown_lora", {"max_new_tokens": 2}, mentions=("lora",), lora_path="no-such-adapter"),
        ch("bad_role", mentions=("role",), messages=[{"role": "wizard", "content": "Hello"}]),
        # SamplingParams.verify's ranges
        g("top_k_zero", {"max_new_tokens": 2, "top_k": 0}, mentions=("top_k",)),
        g("min_p_above_1", {"max_new_tokens": 2, "min_p": 1.5}, mentions=("min_p",)),
        g("frequency_penalty_out_of_range", {"max_new_tokens": 2, "frequency_penalty": 5.0},
          mentions=("frequency_penalty",)),  # fmt: skip
        g("repetition_penalty_zero", {"max_new_tokens": 2, "repetition_penalty": 0.0},
          mentions=("repetition_penalty",)),  # fmt: skip
        # features the server was not started with
        g("return_hidden_states_not_enabled", {"max_new_tokens": 2}, mentions=("hidden",),
          return_hidden_states=True),  # fmt: skip
        g("custom_logit_processor_not_enabled", {"max_new_tokens": 2}, mentions=("logit",),
          custom_logit_processor="not-a-processor"),  # fmt: skip
        g("regex_without_grammar_backend", {"max_new_tokens": 2, "regex": "a+"}, must=False),
        g("invalid_regex", {"max_new_tokens": 2, "regex": "(unclosed"}, must=False),
        g("image_data_on_text_model", {"max_new_tokens": 2}, must=False, image_data="data:image/png;base64,AAAA"),
        g("unknown_session", {"max_new_tokens": 2}, must=False, session_params={"id": "no-such-session"}),
        # fields 0.5.17 hands to the scheduler unchecked (patch 0015): a crash there, or a 500 on the way
        g("logprob_start_len_below_minus_one", {"max_new_tokens": 2}, mentions=("logprob_start_len",),
          input_ids=list(range(1, 9)), text=None, return_logprob=True, logprob_start_len=-2),  # fmt: skip
        g("input_embeds_empty", {"max_new_tokens": 2}, mentions=("input_embeds",), input_embeds=[], text=None),
        g("input_embeds_wrong_width", {"max_new_tokens": 2}, mentions=("input_embeds",),
          input_embeds=[[0.0] * 3, [0.0] * 5], text=None),  # fmt: skip
        g("session_params_unknown_field", {"max_new_tokens": 2}, mentions=("session_params", "no_such_field"),
          session_params={"id": "no-such-session", "no_such_field": 1}),  # fmt: skip
        g("session_id_not_a_string", {"max_new_tokens": 2}, mentions=("session_params.id",),
          session_params={"id": ["no-such-session"]}),  # fmt: skip
        g("session_offset_not_an_integer", {"max_new_tokens": 2}, mentions=("session_params.offset",),
          session_params={"id": "no-such-session", "offset": "x"}),  # fmt: skip
        g("logit_bias_value_string", {"max_new_tokens": 2, "logit_bias": {"5": "x"}}, mentions=("logit_bias",)),
        g("stop_token_ids_nested", {"max_new_tokens": 2, "stop_token_ids": [[1]]}, mentions=("stop_token_ids",)),
        g("token_ids_logprob_past_vocab_size", {"max_new_tokens": 2}, mentions=("token_ids_logprob", str(vocab_size)),
          return_logprob=True, token_ids_logprob=[1] * (vocab_size + 1)),  # fmt: skip
        # sizes that cost the server for everyone if it takes them
        g("n_4096", {"max_new_tokens": 1, "n": 4096}, must=False),
        g("stop_strings_10000", {"max_new_tokens": 4, "stop": ["x" * 64] * 10000}, must=False),
        ch("tool_choice_unknown_function", must=False, max_tokens=2,
           tool_choice={"type": "function", "function": {"name": "no_such_tool"}}),  # fmt: skip
        BadInput("generate_text_plain", gen, b"Hello", content_type="text/plain"),
    ]


def verdict(case: BadInput, reply: Reply) -> BadInputResult:
    """How the server answered one bad input."""
    failure = failure_class(reply)
    message = reply.error or reply.message()
    if failure == "stream_error":
        verdict_ = "rejected_in_stream"
        message = str(next(d for _, d in reply.events if isinstance(d, dict) and "error" in d)["error"])
    elif failure is None:
        verdict_ = "accepted"
    elif failure.startswith("http_4"):
        verdict_ = "rejected_4xx"
    else:
        verdict_ = "unexpected"
    names = verdict_.startswith("rejected") and all(w.lower() in message.lower() for w in case.mentions)
    return BadInputResult(case.name, reply.status, verdict_, message[:300], names, case.must_reject)
