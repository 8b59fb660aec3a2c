"""Patch 0030: an EAGLE engine's CUDA graphs keep their logits in the model dtype when asked, on CPU.

Every CUDA-graph runner writes its logits into one shared float32 ``[max_rows, vocab]`` buffer; with the adaptive
K set the target's is sized for K 8 at the largest bs (512 rows x 128256 x 4 B = 263 MB on dense-8, the largest
piece left of its graph memory, ``docs/graph-memory-k-set.md`` step E). With ``SGLANG_CUDA_GRAPH_BF16_VERIFY_LOGITS``
an EAGLE engine's target-verify and prefill runners take that buffer in the model dtype, the lm_head's own;
``run_eagle_verify`` hands eager sampling and logprobs a float32 copy, and the prefill runner upcasts the rows it
returns. ``GraphSharedOutput``, ``eagle_logits_dtype``, ``LogitsProcessor._copy_logits_to_buffer``,
``DecodeCudaGraphRunner._logits_buffer_dtype``, ``PrefillCudaGraphRunner._trim_logits_output`` and
``upcast_verify_logits`` run here from the patched 0.5.17 tree on CPU tensors; the release has no dtype to ask
for, so its checks fail there.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from sglang_trees import SHOWS_THE_BUG, load_defs, source
from sglang_trees import trees  # noqa: F401 (a fixture)

SHARED = "sglang.srt.model_executor.graph_shared_output"
LOGITS = "sglang.srt.layers.logits_processor"
RUNNER = "sglang.srt.model_executor.runner.decode_cuda_graph_runner"
PREFILL_RUNNER = "sglang.srt.model_executor.runner.prefill_cuda_graph_runner"
COMMON = "sglang.srt.speculative.eagle_worker_common"
PATCHED_0517 = ["patched", pytest.param("pristine", marks=SHOWS_THE_BUG)]
VOCAB = 64


class Switch:
    def __init__(self, on: bool) -> None:
        self.on = on

    def get(self) -> bool:
        return self.on


def shared_output(tree: Path, max_rows: int = 8) -> Any:
    cls = load_defs(source(tree, SHARED), ["GraphSharedOutput"], extra={"Backend": None})["GraphSharedOutput"]
    return cls(device="cpu", max_rows=max_rows)


def copy_fn(tree: Path, softcapping: float | None = None, input_logprobs: bool = False):
    """``_copy_logits_to_buffer`` of the tree, as a function of (logits, buffer)."""
    method = load_defs(source(tree, LOGITS), ["LogitsProcessor._copy_logits_to_buffer"])[
        "LogitsProcessor._copy_logits_to_buffer"]
    processor = SimpleNamespace(vocab_size=VOCAB, final_logit_softcapping=softcapping)
    metadata = lambda buffer: SimpleNamespace(next_token_logits_buffer=buffer, extend_return_logprob=input_logprobs)
    return lambda logits, buffer: method(processor, logits, metadata(buffer))


def logits(rows: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, VOCAB, generator=g) * 8).to(dtype)


def storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


@pytest.mark.parametrize("tree_name", PATCHED_0517)
def test_shared_buffers_are_kept_per_vocab_and_dtype(trees, tree_name: str) -> None:
    out = shared_output(trees.get(tree_name))
    assert "dtype" in inspect.signature(out.get_logits_buffer).parameters
    verify = out.get_logits_buffer(VOCAB, rows=8, dtype=torch.bfloat16)
    draft = out.get_logits_buffer(VOCAB, rows=4)  # a draft of the same vocabulary keeps float32
    assert verify.dtype == torch.bfloat16 and draft.dtype == torch.float32
    assert storage(verify) != storage(draft)
    assert storage(out.get_logits_buffer(VOCAB, rows=2, dtype=torch.bfloat16)) == storage(verify)
    assert storage(out.get_logits_buffer(VOCAB, rows=2)) == storage(draft)


def test_release_buffers_stay_float32_per_vocab(trees) -> None:
    out = shared_output(trees.get("patched"))
    a, b = out.get_logits_buffer(VOCAB, rows=8), out.get_logits_buffer(2 * VOCAB, rows=8)
    assert a.dtype == b.dtype == torch.float32 and storage(a) != storage(b)


@pytest.mark.parametrize("tree_name", PATCHED_0517)
def test_a_model_dtype_buffer_holds_the_logits_bit_for_bit(trees, tree_name: str) -> None:
    copy = copy_fn(trees.get(tree_name))
    buffer = torch.zeros(4, VOCAB, dtype=torch.bfloat16)
    lm_head_out = logits(4, torch.bfloat16)
    got = copy(lm_head_out, buffer)
    assert got.data_ptr() == buffer.data_ptr() and torch.equal(buffer, lm_head_out)
    # The in-graph greedy accept's argmax: the same over bf16 as over the float32 buffer it replaces.
    assert torch.equal(got.argmax(-1), lm_head_out.float().argmax(-1))


@pytest.mark.parametrize("tree_name", ["patched", "pristine"])
def test_a_float32_buffer_takes_the_upcast_as_before(trees, tree_name: str) -> None:
    copy = copy_fn(trees.get(tree_name))
    buffer = torch.zeros(4, VOCAB)
    lm_head_out = logits(4, torch.bfloat16)
    got = copy(lm_head_out, buffer)
    assert got.data_ptr() == buffer.data_ptr() and torch.equal(got, lm_head_out.float())


@pytest.mark.parametrize("softcapping,lm_dtype,input_logprobs",
                         [(30.0, torch.bfloat16, False), (None, torch.float32, False), (None, torch.bfloat16, True)],
                         ids=["softcapped", "float32-lm-head", "prefill-input-logprobs"])
def test_logits_the_buffer_cannot_hold_exactly_bypass_it(trees, softcapping, lm_dtype, input_logprobs) -> None:
    """Softcapping is applied in place after the copy, and a prefill's input logprobs are computed from the
    returned logits right here: both must see float32, as in the release."""
    copy = copy_fn(trees.get("patched"), softcapping, input_logprobs)
    buffer = torch.zeros(4, VOCAB, dtype=torch.bfloat16)
    lm_head_out = logits(4, lm_dtype)
    got = copy(lm_head_out, buffer)
    assert got.dtype == torch.float32 and torch.equal(got, lm_head_out.float())
    assert not buffer.any()


def dtype_rule(tree: Path, on: bool = True) -> Any:
    return load_defs(source(tree, SHARED), ["eagle_logits_dtype"], extra={
        "envs": SimpleNamespace(SGLANG_CUDA_GRAPH_BF16_VERIFY_LOGITS=Switch(on))})["eagle_logits_dtype"]


def model_runner(algorithm: str | None, draft: bool = False, fp32_lm_head: bool = False,
                 softcapping: float | None = None) -> SimpleNamespace:
    return SimpleNamespace(
        is_draft_worker=draft,
        server_args=SimpleNamespace(speculative_algorithm=algorithm, enable_fp32_lm_head=fp32_lm_head),
        model_config=SimpleNamespace(dtype=torch.bfloat16,
                                     hf_config=SimpleNamespace(final_logit_softcapping=softcapping)))


def runner_buffer_dtype(tree: Path, on: bool, mode: str, draft: bool, algorithm: str) -> torch.dtype:
    method = load_defs(source(tree, RUNNER), ["DecodeCudaGraphRunner._logits_buffer_dtype"], extra={
        "eagle_logits_dtype": dtype_rule(tree, on), "ForwardMode": SimpleNamespace(TARGET_VERIFY="target_verify"),
    })["DecodeCudaGraphRunner._logits_buffer_dtype"]
    return method(SimpleNamespace(capture_forward_mode=mode, model_runner=model_runner(algorithm, draft)))


@pytest.mark.parametrize("algorithm", ["EAGLE", "EAGLE3"])
def test_only_an_eagle_target_verify_runner_asks_for_the_model_dtype(trees, algorithm: str) -> None:
    tree = trees.get("patched")
    assert runner_buffer_dtype(tree, True, "target_verify", False, algorithm) == torch.bfloat16
    assert runner_buffer_dtype(tree, False, "target_verify", False, algorithm) == torch.float32  # switch off
    assert runner_buffer_dtype(tree, True, "target_verify", True, algorithm) == torch.float32  # a draft's
    assert runner_buffer_dtype(tree, True, "decode", False, algorithm) == torch.float32  # plain decode


@pytest.mark.parametrize("algorithm", ["NGRAM", "STANDALONE", "DFLASH", None])
def test_other_engines_keep_float32(trees, algorithm) -> None:
    """Their verify does not go through run_eagle_verify's upcast (None: no speculation)."""
    assert runner_buffer_dtype(trees.get("patched"), True, "target_verify", False, algorithm) == torch.float32
    assert dtype_rule(trees.get("patched"))(model_runner(algorithm)) == torch.float32


@pytest.mark.parametrize("engine", [model_runner("EAGLE3", fp32_lm_head=True), model_runner("EAGLE", softcapping=30.0)],
                         ids=["fp32-lm-head", "softcapped"])
def test_logits_that_would_not_fit_the_buffer_exactly_keep_float32(trees, engine) -> None:
    """Each graph would otherwise keep a float32 copy of its own in the pool (the copy bypasses the buffer)."""
    assert dtype_rule(trees.get("patched"))(engine) == torch.float32
    assert dtype_rule(trees.get("patched"))(model_runner("EAGLE", softcapping=-1.0)) == torch.bfloat16  # off


def test_the_draft_extend_shares_the_buffer_and_its_eager_selection_reads_float32(trees) -> None:
    """A draft with the target's vocabulary (MTP/NEXTN, EAGLE without a reduced vocabulary) shares the buffer:
    asking for float32 after the target's bf16 one would add a float32 buffer instead of saving one."""
    tree = trees.get("patched")
    runner = source(tree, "sglang.srt.speculative.eagle_draft_extend_cuda_graph_runner").read_text()
    call = runner[runner.index("graph_shared_output.get_logits_buffer("):]
    assert "dtype=eagle_logits_dtype(self.model_runner)" in call[:call.index(")\n")]
    worker = source(tree, "sglang.srt.speculative.eagle_worker_v2").read_text()
    body = worker[worker.index("def _draft_extend_for_decode("):]
    gather = body.index("draft_logits_output.next_token_logits = draft_logits_output.next_token_logits[")
    upcast = body.index("].float()", gather)  # the gathered rows, upcast in the same statement
    sampling = body.index("sample_draft_proposal(")
    assert gather < upcast < sampling and "\n\n" not in body[gather:upcast]


def test_prefill_runners_of_an_eagle_engine_share_the_model_dtype_buffer(trees) -> None:
    tree = trees.get("patched")
    out = shared_output(tree, max_rows=8)
    method = load_defs(source(tree, PREFILL_RUNNER), ["PrefillCudaGraphRunner._next_token_logits_buffer"], extra={
        "eagle_logits_dtype": dtype_rule(tree)})["PrefillCudaGraphRunner._next_token_logits_buffer"]
    engine = model_runner("EAGLE3")
    engine.model_config.vocab_size = VOCAB
    engine.pp_group, engine.graph_shared_output = SimpleNamespace(is_last_rank=True), out
    runner = SimpleNamespace(model_runner=engine)
    prefill = method(runner, 2)
    verify = out.get_logits_buffer(VOCAB, rows=8, dtype=torch.bfloat16)
    assert prefill.dtype == torch.bfloat16 and storage(prefill) == storage(verify)
    assert prefill.untyped_storage().nbytes() == 8 * VOCAB * 2


@pytest.mark.parametrize("full_backend", [False, True])
def test_the_prefill_runner_returns_float32_rows_of_its_own(trees, full_backend: bool) -> None:
    tree = trees.get("patched")

    class Output(SimpleNamespace):
        pass

    method = load_defs(source(tree, PREFILL_RUNNER), ["PrefillCudaGraphRunner._trim_logits_output"], extra={
        "LogitsProcessorOutput": Output})["PrefillCudaGraphRunner._trim_logits_output"]
    runner = SimpleNamespace(model_runner=SimpleNamespace(spec_algorithm=SimpleNamespace(is_speculative=lambda: True)),
                             raw_bs=2, raw_num_tokens=3, _is_full_backend=full_backend)
    shared = logits(8, torch.bfloat16)
    fields = dict(next_token_logits=shared, hidden_states=None, mm_input_embeds=None, input_token_logprobs=None,
                  input_top_logprobs_val=None, input_top_logprobs_idx=None, input_token_ids_logprobs_val=None,
                  input_token_ids_logprobs_idx=None)
    got = method(runner, Output(**fields)).next_token_logits
    rows = 2 if full_backend else 3
    assert got.dtype == torch.float32 and torch.equal(got, shared[:rows].float()) and storage(got) != storage(shared)
    fp32 = torch.ones(8, VOCAB)
    assert storage(method(runner, Output(**{**fields, "next_token_logits": fp32})).next_token_logits) == storage(fp32)


def test_eager_sampling_gets_an_exact_float32_copy_of_its_own(trees) -> None:
    upcast = load_defs(source(trees.get("patched"), COMMON), ["upcast_verify_logits"])["upcast_verify_logits"]
    shared = logits(8, torch.bfloat16)
    out = SimpleNamespace(next_token_logits=shared[:6])
    upcast(out)
    mine = out.next_token_logits
    assert mine.dtype == torch.float32 and torch.equal(mine, shared[:6].float())
    mine.add_(1.0)  # penalties and grammar masks edit in place
    assert torch.equal(shared[:6].float() + 1.0, mine)
    fp32 = SimpleNamespace(next_token_logits=torch.ones(2, VOCAB))
    before = fp32.next_token_logits
    upcast(fp32)  # eager verify's float32 logits: untouched
    assert fp32.next_token_logits is before
    upcast(SimpleNamespace(next_token_logits=None))  # an idle batch


def test_run_eagle_verify_upcasts_whenever_the_in_graph_accept_did_not_serve_the_batch(trees) -> None:
    text = source(trees.get("patched"), COMMON).read_text()
    body = text[text.index("def run_eagle_verify("):]
    epilogue = body.index("verify_epilogue.read(")
    call = body.index("upcast_verify_logits(logits_output)")
    sample = body.index("eagle_sample(")
    assert epilogue < call < sample
    assert "if greedy_accept is None or batch.return_logprob:" in body[epilogue:call]
