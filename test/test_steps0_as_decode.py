"""Patch 0037 (0.5.17 only): speculation at steps 0 runs the target as a plain DECODE step, when asked.

With ``SGLANG_SPEC_STEPS0_AS_DECODE`` on, the steps-0 state of ``--speculative-adaptive`` also captures the
target's DECODE graphs (``DecodeCudaGraphRunner(spec_target_decode=True)``, sharing the steps-0 verify runner's
Triton backend), and a steps-0 batch runs the previous bonus token through them and the ordinary sampler instead
of a one-token target verify: no trivial verify input, no verify staging, decode's attention kernel. The result
has the one-token verify's shape (accept length 1, stride 1), so the scheduler, the adaptive policy and the
draft extend (0034's KV-only write or the full one) take it as before. Batches it cannot serve keep the verify.
All on CPU with stand-ins around the patched tree's methods; the release has none of it (its tests xfail).
"""

from __future__ import annotations

import sys
from contextlib import nullcontext
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from sglang_trees import SHOWS_THE_BUG, assert_switch_default, source, tree_defs
from sglang_trees import env_flag as flag
from sglang_trees import trees  # noqa: F401 (a fixture)

SWITCH = "SGLANG_SPEC_STEPS0_AS_DECODE"
KV_ONLY = "SGLANG_SPEC_KV_ONLY_ZERO_STEP_DRAFT_EXTEND"
SKIP = "SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND"
WORKER = "sglang.srt.speculative.eagle_worker_v2"
RUNNER = "sglang.srt.model_executor.runner.decode_cuda_graph_runner"
CACHE_LOCS = "sglang.kernels.ops.speculative.cache_locs"
TREES = ["patched", pytest.param("pristine", marks=SHOWS_THE_BUG)]
BS, H_AUX, CONTEXT = 3, 48, 64
FULL = 2


class Result(SimpleNamespace):
    """GenerationBatchResult's stand-in: the fields it was built with."""


class DraftInput(SimpleNamespace):
    """EagleDraftInput's stand-in."""


@pytest.mark.parametrize("tree_name", TREES)
def test_the_switch_exists_and_defaults_off(trees, monkeypatch, tree_name: str) -> None:
    assert_switch_default(trees.get(tree_name), SWITCH, monkeypatch)


# --- the spec worker's steps-0 branch ----------------------------------------------------------------


class ForwardBatchRecorder:
    """ForwardBatch.init_new's stand-in: records the ScheduleBatch fields it saw."""

    seen: list[dict] = []

    @classmethod
    def init_new(cls, batch: Any, model_runner: Any, capture_hidden_mode: Any = None,
                 return_hidden_states_before_norm: bool = False) -> SimpleNamespace:
        cls.seen.append(dict(seq_lens=batch.seq_lens.clone(), seq_lens_cpu=batch.seq_lens_cpu.clone(),
                             seq_lens_sum=batch.seq_lens_sum, spec_info=batch.spec_info, input_ids=batch.input_ids,
                             out_cache_loc=batch.out_cache_loc, capture_hidden_mode=capture_hidden_mode))
        return SimpleNamespace(tag="decode forward batch")


def worker_defs(tree: Path, monkeypatch: pytest.MonkeyPatch, kv_only: bool = True) -> dict[str, Any]:
    """The worker's methods from ``tree``, with ``CACHE_LOCS`` replaced by ``Locs`` (installed after
    ``TreeImporter.use`` swaps the sglang modules, so the method's import finds it)."""
    extra = {
        "CaptureHiddenMode": SimpleNamespace(NULL=0, LAST=1, FULL=FULL), "EagleDraftInput": DraftInput,
        "ForwardBatch": ForwardBatchRecorder, "GenerationBatchResult": Result, "torch": torch,
        "upcast_verify_logits": lambda logits_output: setattr(logits_output, "upcast", True),
        "logits_read_by_argmax_only": lambda sampling_info: sampling_info.argmax_only,
        "get_draft_recurrent_hidden_state_spec": lambda runner: (16, torch.bfloat16),
        "envs": SimpleNamespace(**{SKIP: flag(False), KV_ONLY: flag(kv_only)},
                                SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN=flag(False)),
        "spec_stage_span": lambda name: nullcontext(), "spec_cycle_stats": SimpleNamespace(ENABLED=False),
        "speculative_moe_backend_context": nullcontext, "speculative_moe_a2a_backend_context": nullcontext,
    }
    names = ["EAGLEWorkerV2.forward_batch_generation", "EAGLEWorkerV2._steps0_decode_ok",
             "EAGLEWorkerV2._forward_steps0_decode", "EAGLEWorkerV2._stub_skipped_draft_extend",
             "EAGLEWorkerV2.activate_step_by_batch", "EAGLEWorkerV2._kv_only_extend_wanted",
             "EAGLEWorkerV2._steps0_lean_relay", "EAGLEWorkerV2._steps0_accept_lens_host"]
    if "def _target_decode_step" in source(tree, WORKER).read_text():
        names += ["EAGLEWorkerV2._target_decode_step", "EAGLEWorkerV2._decode_graphs_serve"]  # 0045: shared
    defs = tree_defs(tree, WORKER, names, extra=extra)
    Locs.calls = []
    monkeypatch.setitem(sys.modules, CACHE_LOCS, SimpleNamespace(assign_extend_cache_locs_uniform_func=Locs.assign))
    return defs


class Locs:
    """assign_extend_cache_locs_uniform_func's stand-in: the slot req_to_token holds at start_offset."""

    calls: list[dict] = []

    @classmethod
    def assign(cls, req_pool_indices: torch.Tensor, req_to_token: torch.Tensor, start_offset: torch.Tensor,
               batch_size: int, draft_token_num: int, device: str) -> torch.Tensor:
        cls.calls.append(dict(start_offset=start_offset.clone(), batch_size=batch_size, width=draft_token_num))
        return req_to_token[req_pool_indices, start_offset].to(torch.int64)


class Target:
    """The target worker and its model runner: records which graph runner a forward met; samples 20, 21, ..."""

    def __init__(self, fail: bool = False) -> None:
        self.verify_runner = SimpleNamespace(name="verify graphs")
        self.model_runner = SimpleNamespace(decode_cuda_graph_runner=self.verify_runner, sample=self.sample)
        self.fail, self.forwards, self.sampled = fail, [], None

    def forward_batch_generation(self, batch: Any, forward_batch: Any = None, is_verify: bool = False) -> Any:
        self.forwards.append(dict(runner=self.model_runner.decode_cuda_graph_runner, forward_batch=forward_batch,
                                  is_verify=is_verify, batch=batch))
        if self.fail:
            raise RuntimeError("forward failed")
        return SimpleNamespace(logits_output=SimpleNamespace(hidden_states=torch.randn(BS, H_AUX)),
                               can_run_cuda_graph=True, routed_experts_output="experts", indexer_topk_output=None)

    def sample(self, logits_output: Any, forward_batch: Any) -> torch.Tensor:
        assert getattr(logits_output, "upcast", False), "sampled before the logits were upcast"
        self.sampled = torch.arange(20, 20 + BS, dtype=torch.int64)
        return self.sampled


def spec_worker(defs: dict[str, Any], steps: int = 0, decode_runner: Any = "graphs", target: Target | None = None) -> Any:
    class SpecWorker:
        _draft_kv_only_last = False
        _steps0_decode_runner = None
        _steps0_lean, _steps0_host_ones = False, None  # patch 0043's switch (test_steps0_lean_cycle.py)

        def __init__(self) -> None:
            self.speculative_num_steps, self.adaptive_controller = steps, None
            self.topk, self.device, self.ran = 1, "cpu", []
            self.target_worker = self._target_worker = target or Target()
            self.req_to_token_pool = SimpleNamespace(
                req_to_token=torch.arange(8 * CONTEXT, dtype=torch.int32).view(8, CONTEXT))
            if decode_runner == "graphs":
                self._steps0_decode_runner = SimpleNamespace(max_bs=8, name="decode graphs")
            self.draft_worker = SimpleNamespace(
                draft_tp_context=lambda group: nullcontext(), draft_runner=SimpleNamespace(tp_group=None),
                draft=self.draft, _draft_extend_for_decode=self.full, _draft_extend_kv_only=self.kv_only)

        def draft(self, batch: Any) -> Any:
            self.ran.append("draft")
            return SimpleNamespace(is_verify_input=lambda: True)

        def _build_trivial_verify_input(self, batch: Any) -> Any:
            self.ran.append("trivial verify input")
            return SimpleNamespace(is_verify_input=lambda: True)

        def verify(self, batch: Any, grammar_barrier: Any = None) -> Any:
            self.ran.append("verify")
            bs = batch.seq_lens.shape[0]
            return SimpleNamespace(new_seq_lens=batch.seq_lens + 1, speculative_num_draft_tokens=1,
                                   next_draft_input=SimpleNamespace(), next_token_ids=torch.arange(bs),
                                   logits_output=SimpleNamespace(hidden_states=torch.randn(bs, H_AUX)))

        def full(self, batch: Any, batch_output: Any) -> None:
            self.ran.append("full extend")

        def kv_only(self, batch: Any, batch_output: Any) -> bool:
            self.ran.append("kv-only extend")
            self.kv_only_saw = dict(positions=batch.seq_lens.clone(), out_cache_loc=batch.out_cache_loc,
                                    next_token_ids=batch_output.next_token_ids)
            return True

    for name, fn in defs.items():
        setattr(SpecWorker, name.rpartition(".")[2], fn)
    return SpecWorker()


def decode_batch(bs: int = BS, **changes: Any) -> SimpleNamespace:
    mode = changes.pop("mode", "decode")
    batch = SimpleNamespace(
        seq_lens=torch.arange(10, 10 + bs, dtype=torch.int64), seq_lens_cpu=torch.arange(10, 10 + bs),
        seq_lens_sum=sum(range(10, 10 + bs)), req_pool_indices=torch.arange(bs, dtype=torch.int64),
        out_cache_loc=None, input_ids=None, is_extend_in_batch=False, has_grammar=False, return_logprob=False,
        return_hidden_states=False,
        forward_mode=SimpleNamespace(is_idle=lambda: mode == "idle", is_extend=lambda: False,
                                     is_decode=lambda: mode == "decode"),
        spec_info=DraftInput(bonus_tokens=torch.arange(7, 7 + bs, dtype=torch.int32), future_indices=None))
    for key, value in changes.items():
        setattr(batch, key, value)
    return batch


@pytest.mark.parametrize("tree_name", TREES)
def test_a_steps0_batch_runs_the_target_decode_graphs(trees, monkeypatch, tree_name: str) -> None:
    ForwardBatchRecorder.seen = []
    worker = spec_worker(worker_defs(trees.get(tree_name), monkeypatch))
    target = worker.target_worker
    batch = decode_batch()
    old_lens, old_cpu, old_sum, draft_input = batch.seq_lens, batch.seq_lens_cpu, batch.seq_lens_sum, batch.spec_info
    published = []
    out = worker.forward_batch_generation(batch, on_publish=published.append)

    # no trivial verify input, no verify: a decode forward, then 0034's KV-only draft write
    assert worker.ran == ["kv-only extend"]
    (fwd,) = target.forwards
    assert fwd["runner"] is worker._steps0_decode_runner and fwd["is_verify"] and fwd["batch"] is None
    # what the decode forward saw: decode's seq_lens (the token counted), no spec info, the bonus token in
    (seen,) = ForwardBatchRecorder.seen
    assert torch.equal(seen["seq_lens"], old_lens + 1) and torch.equal(seen["seq_lens_cpu"], old_cpu + 1)
    assert seen["seq_lens_sum"] == old_sum + BS and seen["spec_info"] is None
    assert seen["input_ids"] is draft_input.bonus_tokens and seen["capture_hidden_mode"] == FULL
    # the slot the spec reservation holds at the old length, as a one-token verify takes it
    (locs,) = Locs.calls
    assert torch.equal(locs["start_offset"], old_lens) and locs["width"] == 1 and locs["batch_size"] == BS
    expected_loc = worker.req_to_token_pool.req_to_token[torch.arange(BS), old_lens].to(torch.int64)
    assert torch.equal(seen["out_cache_loc"], expected_loc) and torch.equal(batch.out_cache_loc, expected_loc)
    # afterwards: the verify graphs back, the spec convention of seq_lens back for the draft extend
    assert target.model_runner.decode_cuda_graph_runner is target.verify_runner
    assert batch.seq_lens is old_lens and batch.seq_lens_cpu is old_cpu and batch.seq_lens_sum == old_sum
    assert batch.spec_info is draft_input
    assert torch.equal(worker.kv_only_saw["positions"], old_lens)
    assert torch.equal(worker.kv_only_saw["out_cache_loc"], expected_loc)
    # the result, shaped as the one-token verify's
    assert out.next_token_ids is target.sampled and worker.kv_only_saw["next_token_ids"] is target.sampled
    assert out.accept_lens.dtype == torch.int32 and out.accept_lens.tolist() == [1] * BS
    assert out.speculative_num_draft_tokens == 1 and torch.equal(out.new_seq_lens, old_lens + 1)
    assert out.next_draft_input.bonus_tokens.dtype == torch.int32
    assert out.next_draft_input.bonus_tokens.tolist() == target.sampled.tolist()
    assert out.next_draft_input.topk_index.shape == (BS, 1)  # the KV-only write's stubs
    assert out.can_run_cuda_graph is True and out.routed_experts_output == "experts"
    assert out.extra_keep_alive_refs == [fwd["forward_batch"]]
    assert len(published) == 1 and torch.equal(published[0], old_lens + 1)


@pytest.mark.parametrize("tree_name", TREES)
def test_the_full_draft_extend_follows_a_decode_step_when_kv_only_is_off(trees, monkeypatch, tree_name: str) -> None:
    worker = spec_worker(worker_defs(trees.get(tree_name), monkeypatch, kv_only=False))
    worker.forward_batch_generation(decode_batch())
    assert worker.ran == ["full extend"] and len(worker.target_worker.forwards) == 1


@pytest.mark.parametrize("tree_name", TREES)
def test_a_failed_decode_forward_puts_the_verify_graphs_and_the_batch_back(trees, monkeypatch, tree_name: str) -> None:
    target = Target(fail=True)
    worker = spec_worker(worker_defs(trees.get(tree_name), monkeypatch), target=target)
    batch = decode_batch()
    old_lens, old_sum, draft_input = batch.seq_lens, batch.seq_lens_sum, batch.spec_info
    with pytest.raises(RuntimeError, match="forward failed"):
        worker.forward_batch_generation(batch)
    assert target.model_runner.decode_cuda_graph_runner is target.verify_runner
    assert batch.seq_lens is old_lens and batch.seq_lens_sum == old_sum and batch.spec_info is draft_input


@pytest.mark.parametrize("tree_name", TREES)
@pytest.mark.parametrize("case", ["no-decode-graphs", "grammar", "logprobs", "hidden-states", "above-max-bs",
                                  "not-decode", "steps3"])
def test_batches_it_cannot_serve_keep_the_verify(trees, monkeypatch, tree_name: str, case: str) -> None:
    worker = spec_worker(worker_defs(trees.get(tree_name), monkeypatch), steps=3 if case == "steps3" else 0,
                         decode_runner=None if case == "no-decode-graphs" else "graphs")
    changes = {"grammar": {"has_grammar": True}, "logprobs": {"return_logprob": True},
               "hidden-states": {"return_hidden_states": True}, "not-decode": {"mode": "target_verify"}}
    bs = 9 if case == "above-max-bs" else BS
    worker.forward_batch_generation(decode_batch(bs, **changes.get(case, {})))
    first = "draft" if case == "steps3" else "trivial verify input"
    assert worker.ran[:2] == [first, "verify"]
    assert worker.target_worker.forwards == [] and Locs.calls == []


# --- which states capture DECODE graphs, and the switch of states ---------------------------------------


class FakeRunner:
    """DecodeCudaGraphRunner's stand-in for isinstance."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update({"require_mlp_sync": False, "ragged_verify_mode": False, **fields})


class FakeTriton:
    """TritonAttnBackend's stand-in for isinstance."""


def supported_defs(tree: Path, switch: bool, npu: bool = False) -> dict[str, Any]:
    extra = {"envs": SimpleNamespace(**{SWITCH: flag(switch)}), "_is_npu": npu,
             "DecodeCudaGraphRunner": FakeRunner, "TritonAttnBackend": FakeTriton}
    return tree_defs(tree, WORKER, ["EAGLEWorkerV2._steps0_decode_supported"], extra=extra)


@pytest.mark.parametrize("tree_name", TREES)
@pytest.mark.parametrize("case", ["supported", "switch-off", "npu", "other-backend", "no-verify-graphs", "topk2",
                                  "dp-attention", "ragged-verify", "pipeline", "lora"])
def test_only_a_supported_steps0_state_captures_decode_graphs(trees, tree_name: str, case: str) -> None:
    fn = supported_defs(trees.get(tree_name), switch=case != "switch-off", npu=case == "npu")[
        "EAGLEWorkerV2._steps0_decode_supported"]
    worker = SimpleNamespace(topk=2 if case == "topk2" else 1, server_args=SimpleNamespace(
        pp_size=2 if case == "pipeline" else 1, enable_lora=case == "lora"))
    backend = object() if case == "other-backend" else FakeTriton()
    runner = None if case == "no-verify-graphs" else FakeRunner(require_mlp_sync=case == "dp-attention",
                                                                 ragged_verify_mode=case == "ragged-verify")
    assert fn(worker, backend, runner) is (case == "supported")


def apply_defs(tree: Path) -> dict[str, Any]:
    extra = {"log_info_on_rank0": lambda logger, msg: None, "logger": None,
             "get_context": lambda: SimpleNamespace(override=lambda *a, **k: None)}
    return tree_defs(tree, WORKER, ["EAGLEWorkerV2.apply_runtime_state"], extra=extra)


@pytest.mark.parametrize("tree_name", TREES)
def test_switching_states_installs_the_states_decode_graphs(trees, tree_name: str) -> None:
    apply = apply_defs(trees.get(tree_name))["EAGLEWorkerV2.apply_runtime_state"]
    dw = SimpleNamespace(draft_runner=SimpleNamespace(), _rebuild_topk1_chain_buffers=lambda: None)
    worker = SimpleNamespace(speculative_num_steps=3, speculative_num_draft_tokens=4, _draft_worker=dw,
                             _target_worker=SimpleNamespace(model_runner=SimpleNamespace()))

    def state(steps: int, decode: Any) -> SimpleNamespace:
        return SimpleNamespace(
            speculative_num_steps=steps, speculative_num_draft_tokens=steps + 1, draft_attn_backend=None,
            cuda_graph_runner=None, draft_extend_attn_backend=None, cuda_graph_runner_for_draft_extend=None,
            cuda_graph_runner_for_draft_extend_kv_only=None, target_attn_backend=f"backend {steps}",
            target_graph_runner=f"verify {steps}", target_decode_graph_runner=decode)

    apply(worker, state(0, "decode graphs"))
    assert getattr(worker, "_steps0_decode_runner", None) == "decode graphs"
    assert worker._target_worker.model_runner.decode_cuda_graph_runner == "verify 0"
    apply(worker, state(3, None))
    assert worker._steps0_decode_runner is None


# --- the runner: DECODE graphs of a speculative target get no spec info ----------------------------------


@pytest.mark.parametrize("tree_name", TREES)
def test_a_spec_target_decode_runner_captures_without_spec_info(trees, tree_name: str) -> None:
    tree = trees.get(tree_name)
    assert "if self.spec_target_decode:" in source(tree, RUNNER).read_text()
    extra = {"CaptureHiddenMode": SimpleNamespace(NULL=0, FULL=FULL), "torch": torch}
    fn = tree_defs(tree, RUNNER, ["DecodeCudaGraphRunner.get_spec_info"], extra=extra)[
        "DecodeCudaGraphRunner.get_spec_info"]
    eagle = SimpleNamespace(is_eagle=lambda: True, is_standalone=lambda: False)
    runner = SimpleNamespace(spec_target_decode=True,
                             model_runner=SimpleNamespace(spec_algorithm=eagle, is_draft_worker=False))
    assert fn(runner, 4) is None


@pytest.mark.parametrize("tree_name", TREES)
@pytest.mark.parametrize("decode_flag", [True, False])
def test_spec_target_decode_graphs_share_the_verify_logits_dtype(trees, tree_name: str, decode_flag: bool) -> None:
    """With 0030's bf16 verify logits, DECODE graphs of a spec target take the same (shared) buffer dtype, not a
    float32 buffer of their own; a plain decode runner keeps float32."""
    fn = tree_defs(trees.get(tree_name), RUNNER, ["DecodeCudaGraphRunner._logits_buffer_dtype"], extra={
        "eagle_logits_dtype": lambda model_runner: torch.bfloat16,
        "ForwardMode": SimpleNamespace(TARGET_VERIFY="target_verify")})["DecodeCudaGraphRunner._logits_buffer_dtype"]
    runner = SimpleNamespace(capture_forward_mode="decode", spec_target_decode=decode_flag,
                             model_runner=SimpleNamespace(is_draft_worker=False))
    assert fn(runner) == (torch.bfloat16 if decode_flag else torch.float32)


@pytest.mark.parametrize("tree_name", TREES)
def test_the_runner_keeps_decode_and_full_hidden_states_and_shares_the_backend(trees, tree_name: str) -> None:
    """``__init__`` is too entangled to run on a CPU: its source must set DECODE and FULL under the flag, after the
    TARGET_VERIFY override, and skip the backend's graph-state init (the steps-0 verify runner's, same bs list)."""
    text = source(trees.get(tree_name), RUNNER).read_text()
    init = text[text.index("class DecodeCudaGraphRunner"):]
    init = init[init.index("def __init__"):init.index("def maybe_init_pdmux")]
    assert "spec_target_decode: bool = False" in init
    override = init.index("self.capture_forward_mode = ForwardMode.TARGET_VERIFY")
    block = init[init.index("if spec_target_decode:"):]
    assert init.index("if spec_target_decode:") > override
    assert block.index("self.capture_forward_mode = ForwardMode.DECODE") < block.index("self.capture_bs")
    assert "self.capture_hidden_mode = CaptureHiddenMode.FULL" in block[:block.index("self.capture_bs")]
    assert "if not spec_target_decode:\n            self.attn_backend.init_cuda_graph_state(" in init
