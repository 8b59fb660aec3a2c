"""Patch 0034 (0.5.17 only): at speculation steps 0 the draft extend writes only the draft's KV, when asked.

With ``SGLANG_SPEC_KV_ONLY_ZERO_STEP_DRAFT_EXTEND`` on, a steps-0 cycle of ``--speculative-adaptive`` runs
``LlamaForCausalLMEagle3.forward_draft_kv_only`` (embedding, fc over the target's aux hidden states, the two
norms, the K/V rows of ``qkv_proj``, rotary on k, the KV write) instead of the full EAGLE-3 extend, in a
width-1 CUDA graph of its own (``EAGLEDraftExtendCudaGraphRunner(kv_only=True)``) or eagerly, and stubs the
next draft input as the skip switch does. When the slot goes back to drafting, the worker holds steps 0 for
one more cycle with the full extend (``AdaptiveController.hold``), unless the steps-0 state has no graph for
the batch size. All on CPU with stand-ins from the patched tree; the release has none of it (its tests xfail).
"""

from __future__ import annotations

import json
import logging
import sys
import types
from contextlib import nullcontext
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from eagle3_reference import rms_norm, rope
from sglang_trees import SHOWS_THE_BUG, TreeImporter, assert_switch_default, source
from sglang_trees import env_flag as flag
from sglang_trees import tree_defs as patched_defs
from sglang_trees import trees  # noqa: F401 (a fixture)

SWITCH = "SGLANG_SPEC_KV_ONLY_ZERO_STEP_DRAFT_EXTEND"
SKIP = "SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND"
MODEL = "sglang.srt.models.llama_eagle3"
RUNNER = "sglang.srt.speculative.eagle_draft_extend_cuda_graph_runner"
RUNNER_CLASS = "EAGLEDraftExtendCudaGraphRunner"
WORKER = "sglang.srt.speculative.eagle_worker_v2"
CONTROLLER = "sglang.srt.speculative.adaptive_runtime_state"
TREES = ["patched", pytest.param("pristine", marks=SHOWS_THE_BUG)]

# A tiny EAGLE-3 draft: hidden 16, 4 query heads and 2 KV heads of 8, 3 aux states, vocab 50.
H, HEADS, KV_HEADS, HD, AUX, VOCAB, THETA, EPS = 16, 4, 2, 8, 3, 50, 10000.0, 1e-6
BS = 3


# --- the switch -------------------------------------------------------------------------------------


@pytest.mark.parametrize("tree_name", TREES)
def test_the_switch_exists_and_defaults_off(trees, monkeypatch, tree_name: str) -> None:
    assert_switch_default(trees.get(tree_name), SWITCH, monkeypatch)


# --- the model: forward_kv_only writes the reference K and V -----------------------------------------


class Forbidden:
    """A module the KV-only forward must not run."""

    def __init__(self, name: str, calls: list[str]) -> None:
        self.name, self.calls = name, calls

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(self.name)
        raise AssertionError(f"forward_kv_only ran {self.name}")


class Rotary:
    """Neox rotary on flat [T, heads * HD] q and k, as ``get_rope``'s module (eagle3_reference's rope)."""

    def __call__(self, positions: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, ...]:
        def apply(x: torch.Tensor) -> torch.Tensor:
            t = x.shape[0]
            heads = x.view(t, -1, HD).transpose(0, 1)
            return rope(heads, positions, THETA).transpose(0, 1).reshape(t, -1)

        return apply(q), apply(k)


class Pool:
    def __init__(self) -> None:
        self.writes: list[tuple[Any, torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def set_kv_buffer(self, layer: Any, loc: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *args: Any) -> None:
        assert not args  # no scales: the gate refuses a layer with k_scale
        self.writes.append((layer, loc, k, v))


def tiny_draft(seed: int) -> tuple[SimpleNamespace, dict[str, torch.Tensor], list[str]]:
    gen = torch.Generator().manual_seed(seed)
    w = {
        "embed": torch.randn(VOCAB, H, generator=gen),
        "fc": torch.randn(H, AUX * H, generator=gen) / (AUX * H) ** 0.5,
        "q": torch.randn(HEADS * HD, 2 * H, generator=gen) / (2 * H) ** 0.5,
        "k": torch.randn(KV_HEADS * HD, 2 * H, generator=gen) / (2 * H) ** 0.5,
        "v": torch.randn(KV_HEADS * HD, 2 * H, generator=gen) / (2 * H) ** 0.5,
        "input_layernorm": 1 + 0.1 * torch.randn(H, generator=gen),
        "hidden_norm": 1 + 0.1 * torch.randn(H, generator=gen),
    }
    calls: list[str] = []
    fc = torch.nn.Linear(AUX * H, H, bias=False)
    fc.weight.data.copy_(w["fc"])
    attn = SimpleNamespace(
        qkv_proj=SimpleNamespace(weight=torch.cat([w["q"], w["k"], w["v"]])),
        q_size=HEADS * HD, kv_size=KV_HEADS * HD, head_dim=HD, num_kv_heads=KV_HEADS,
        rotary_emb=Rotary(), attn=SimpleNamespace(layer_id=0), o_proj=Forbidden("o_proj", calls))
    layer = SimpleNamespace(
        self_attn=attn,
        input_layernorm=lambda x: rms_norm(x, w["input_layernorm"], EPS),
        hidden_norm=lambda x: rms_norm(x, w["hidden_norm"], EPS),
        post_attention_layernorm=Forbidden("post_attention_layernorm", calls), mlp=Forbidden("mlp", calls))
    model = SimpleNamespace(
        embed_tokens=lambda ids: w["embed"][ids], fc=fc, input_norm=None, fc_norm=None,
        num_aux_hidden_states=AUX, layers=[layer], norm=Forbidden("norm", calls),
        lm_head=Forbidden("lm_head", calls))
    return model, w, calls


def reference_kv(w: dict[str, torch.Tensor], ids: torch.Tensor, features: torch.Tensor,
                 positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """eagle3_reference's step, up to its attention's K and V ([T, KV_HEADS, HD], k with rope)."""
    hidden = features @ w["fc"].T
    x = torch.cat([rms_norm(w["embed"][ids], w["input_layernorm"], EPS),
                   rms_norm(hidden, w["hidden_norm"], EPS)], dim=-1)
    t = x.shape[0]
    k = (x @ w["k"].T).view(t, KV_HEADS, HD).transpose(0, 1)
    v = (x @ w["v"].T).view(t, KV_HEADS, HD)
    return rope(k, positions, THETA).transpose(0, 1), v, hidden


@pytest.mark.parametrize("tree_name", TREES)
def test_forward_kv_only_writes_the_reference_kv_and_nothing_else(trees, tree_name: str) -> None:
    names = ["LlamaModel._target_features", "LlamaModel.forward_kv_only"]
    defs = patched_defs(trees.get(tree_name), MODEL, names, extra={})
    model, w, calls = tiny_draft(seed=3)
    model._target_features = lambda h, width: defs[names[0]](model, h, width)
    gen = torch.Generator().manual_seed(4)
    ids = torch.randint(0, VOCAB, (BS,), generator=gen)
    features = torch.randn(BS, AUX * H, generator=gen)
    positions = torch.tensor([5, 17, 130])
    loc = torch.tensor([41, 7, 99])
    pool = Pool()
    with torch.no_grad():
        out = defs[names[1]](model, ids, positions, features, loc, pool)
    (layer, written_loc, k, v), = pool.writes
    ref_k, ref_v, ref_hidden = reference_kv(w, ids, features, positions)
    assert layer is model.layers[0].self_attn.attn and written_loc is loc
    assert k.shape == v.shape == (BS, KV_HEADS, HD)
    torch.testing.assert_close(k, ref_k, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(v, ref_v, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out, ref_hidden, rtol=1e-5, atol=1e-5)  # the fc output
    assert calls == []  # no o_proj, MLP, final norm or head


def eagle3_gate(tree: Path, **changes: Any) -> bool:
    name = "LlamaForCausalLMEagle3.supports_draft_kv_only"
    fn = patched_defs(tree, MODEL, [name], extra={})[name]
    c = dict(layers=1, quant=None, mrope=False, window=None, k_scale=None, bias=None)
    c.update(changes)
    layer = SimpleNamespace(self_attn=SimpleNamespace(attn=SimpleNamespace(k_scale=c["k_scale"]),
                                                      qkv_proj=SimpleNamespace(bias=c["bias"])))
    model = SimpleNamespace(
        model=SimpleNamespace(layers=[layer] * c["layers"], is_mrope_enabled=c["mrope"]),
        quant_config=c["quant"], _draft_window_size=c["window"])
    return fn(model)


@pytest.mark.parametrize("tree_name", TREES)
def test_the_model_supports_only_one_plain_layer(trees, tree_name: str) -> None:
    tree = trees.get(tree_name)
    assert eagle3_gate(tree) is True
    for change in ({"layers": 2}, {"quant": object()}, {"mrope": True}, {"window": 512}, {"k_scale": 0.5},
                   {"bias": object()}):
        assert eagle3_gate(tree, **change) is False, change


# --- the runner built kv_only -----------------------------------------------------------------------


class Buffers:
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)
        self.shared = False

    def share_buffers(self) -> None:
        self.shared = True


def build_runner(tree: Path, kv_only: bool) -> tuple[Any, list[str]]:
    """Run the tree's runner ``__init__`` with stand-ins; returns the runner and the calls it made."""
    calls: list[str] = []
    name = f"{RUNNER_CLASS}.__init__"
    extra = {
        "ForwardMode": SimpleNamespace(DRAFT_EXTEND_V2="draft_extend_v2"),
        "CaptureHiddenMode": SimpleNamespace(LAST="last"),
        "get_flags": lambda: SimpleNamespace(capture=SimpleNamespace(enable_torch_compile=False)),
        "get_spec": lambda: SimpleNamespace(speculative_num_steps=0),
        **{f: (lambda server_args: False) for f in ("require_gathered_buffer", "require_mlp_tp_gather",
                                                    "require_mlp_sync", "require_attn_tp_gather")},
        "DeepEPCudaGraphRunnerAdapter": lambda: None,
        "get_batch_sizes_to_capture": lambda mr: ([1, 2, 4], []),
        "resolve_num_tokens_per_req": lambda phase, server_args: 1,
        "get_draft_input_from_target_hidden_dim": lambda mr: AUX * H,
        "eagle_logits_dtype": lambda mr: torch.float32,
        "EagleDraftExtendInputBuffers": Buffers,
        "resolve_decode_backend": lambda runner: "full-backend",
        "model_capture_mode": nullcontext, "set_torch_compile_config": None,
        "CudaGraphCaptureError": RuntimeError, "CUDA_GRAPH_CAPTURE_FAILED_MSG": "",
    }
    init = patched_defs(tree, RUNNER, [name], extra=extra)[name]

    def logits_buffer(vocab: int, rows: int, dtype: torch.dtype) -> torch.Tensor:
        calls.append("get_logits_buffer")
        return torch.zeros(rows, vocab, dtype=dtype)

    backend = SimpleNamespace(init_cuda_graph_state=lambda *a: calls.append("init_cuda_graph_state"),
                              get_cuda_graph_seq_len_fill_value=lambda: 1)
    mr = SimpleNamespace(
        device="cpu", ps=SimpleNamespace(tp_size=1, attn_dp_size=1),
        server_args=SimpleNamespace(pp_size=1, disable_cuda_graph_padding=False, enable_profile_cuda_graph=False),
        model_config=SimpleNamespace(dtype=torch.float32, hf_config=SimpleNamespace(draft_vocab_size=VOCAB)),
        graph_shared_output=SimpleNamespace(get_logits_buffer=logits_buffer))
    worker = SimpleNamespace(draft_runner=mr, draft_extend_attn_backend=backend, hot_token_id=None,
                             speculative_algorithm=SimpleNamespace(is_standalone=lambda: False),
                             seed_dsa_topk_from_draft_extend=False)

    class Runner:
        def capture(self) -> None:
            calls.append("capture")

        def _fill_own_width(self) -> None:
            pass

        def _can_select_in_graph(self) -> bool:
            calls.append("_can_select_in_graph")
            return True

        def _cache_loc_dtype(self) -> torch.dtype:
            return torch.int64

    runner = Runner()
    init(runner, worker, **({"kv_only": True} if kv_only else {}))
    return runner, calls


@pytest.mark.parametrize("tree_name", TREES)
def test_a_kv_only_runner_leaves_the_backend_state_logits_and_selection_alone(trees, tree_name: str) -> None:
    tree = trees.get(tree_name)
    assert "kv_only" in source(tree, RUNNER).read_text()
    full, full_calls = build_runner(tree, kv_only=False)
    assert full_calls == ["init_cuda_graph_state", "_can_select_in_graph", "get_logits_buffer", "capture"]
    kv, kv_calls = build_runner(tree, kv_only=True)
    assert kv_calls == ["capture"]
    assert kv.kv_only is True and kv.select_in_graph is False
    assert kv.buffers.next_token_logits_buffer is None and kv.buffers.shared
    assert kv.buffers.hidden_states.shape == (4, AUX * H) and kv.captured_req_width == 1 and kv.max_bs == 4


class GraphBackend:
    """The full CUDA-graph backend as the runner sees it: capture runs the body once, replay returns its output."""

    def __init__(self) -> None:
        self.captured: dict[int, Any] = {}
        self.replayed: list[int] = []

    def capture_one(self, shape_key: int, run_once: Any, capture_inputs: Any = None,
                    post_warmup_hook: Any = None) -> None:
        self.captured[shape_key] = run_once()


def kv_runner(tree: Path) -> tuple[Any, list[str]]:
    """A kv_only runner around the tree's capture_one_shape, _capture_one_kv_only and replay_kv_only."""
    names = [f"{RUNNER_CLASS}.{m}" for m in ("capture_one_shape", "_capture_one_kv_only", "replay_kv_only")]
    calls: list[str] = []
    extra = {
        "forward_context": lambda ctx: nullcontext(), "ForwardContext": lambda **kw: None,
        "all_reduce_stats": SimpleNamespace(graph_scope=lambda key: nullcontext()),
        "_grouped_foreach_copy_": lambda dsts, srcs: [d.copy_(s) for d, s in zip(dsts, srcs)],
        "device_timer_ctx": lambda timer, name: nullcontext(),
        # the full capture's names (its branch is never reached here)
        **{n: None for n in ("EagleDraftExtendInput", "ForwardBatch", "DpPaddingMode", "set_dp_buffer_len",
                             "set_is_extend_in_batch", "maybe_flashinfer_autotune_speculative_draft",
                             "CaptureHiddenMode")},
    }
    defs = patched_defs(tree, RUNNER, names, extra=extra)
    Runner = type("Runner", (), {n.rpartition(".")[2]: f for n, f in defs.items()})
    runner = Runner()
    max_bs = 4
    runner.kv_only, runner.captured_req_width, runner.capture_bs, runner.max_bs = True, 1, [1, 2, 4], max_bs
    runner.buffers = SimpleNamespace(
        input_ids=torch.zeros(max_bs, dtype=torch.int64), positions=torch.zeros(max_bs, dtype=torch.int64),
        out_cache_loc=torch.ones(max_bs, dtype=torch.int64), hidden_states=torch.zeros(max_bs, AUX * H))
    runner.backend = GraphBackend()

    def forward_draft_kv_only(input_ids, positions, hidden_states, out_cache_loc, pool) -> torch.Tensor:
        calls.append("forward_draft_kv_only")
        assert pool is runner.model_runner.token_to_kv_pool
        # What a replay would write: the buffers' rows as they are now.
        runner.snapshot = (input_ids.clone(), positions.clone(), out_cache_loc.clone(), hidden_states.clone())
        return hidden_states[:, :H] * 2

    events: list[Any] = []

    class Event:
        def __init__(self) -> None:
            events.append(self)
            self.recorded = False

        def record(self) -> None:
            self.recorded = True

    runner.events = events
    runner.device_module = SimpleNamespace(Event=Event)
    runner.model_runner = SimpleNamespace(
        model=SimpleNamespace(forward_draft_kv_only=forward_draft_kv_only, forward=Forbidden("model.forward", calls)),
        token_to_kv_pool=Pool(), device_timer=None, war_fastpath_read_done_event=None)
    runner.draft_extend_attn_backend = SimpleNamespace(
        init_forward_metadata_in_graph=Forbidden("init_forward_metadata_in_graph", calls),
        init_forward_metadata_out_graph=Forbidden("init_forward_metadata_out_graph", calls))
    runner._select_last_accepted = Forbidden("_select_last_accepted", calls)
    runner._make_graph_key = lambda bs: bs
    runner._pad_to_bucket = lambda raw, buckets: min(b for b in buckets if b >= raw)

    def replay(shape_key: int, forward_batch: Any) -> torch.Tensor:
        runner.backend.replayed.append(shape_key)
        b = runner.buffers
        runner.replayed_rows = (b.input_ids[:shape_key].clone(), b.positions[:shape_key].clone(),
                                b.out_cache_loc[:shape_key].clone(), b.hidden_states[:shape_key].clone())
        return b.hidden_states[:shape_key, :H] * 2

    runner._replay_graph = replay
    return runner, calls


@pytest.mark.parametrize("tree_name", TREES)
def test_the_kv_only_capture_records_only_the_kv_write(trees, tree_name: str) -> None:
    runner, calls = kv_runner(trees.get(tree_name))
    for bs in (4, 2, 1):
        runner.capture_one_shape(bs, forward=None)
    assert sorted(runner.backend.captured) == [1, 2, 4]
    assert calls == ["forward_draft_kv_only"] * 3  # no model.forward, metadata or selection


@pytest.mark.parametrize("tree_name", TREES)
def test_a_replay_pads_to_slot_zero_and_publishes_the_read_done_event(trees, tree_name: str) -> None:
    runner, calls = kv_runner(trees.get(tree_name))
    runner.buffers.out_cache_loc.fill_(77)  # a previous batch's slots
    runner.buffers.positions.fill_(55)
    ids, positions, loc = torch.tensor([3, 9, 4]), torch.tensor([10, 20, 30]), torch.tensor([101, 102, 103])
    hidden = torch.randn(BS, AUX * H, generator=torch.Generator().manual_seed(8))
    out = runner.replay_kv_only(ids, positions, loc, hidden)
    assert runner.backend.replayed == [4]  # padded up to the captured bs 4
    got_ids, got_pos, got_loc, got_hidden = runner.replayed_rows
    assert got_ids[:BS].tolist() == ids.tolist() and got_pos.tolist() == [10, 20, 30, 0]
    assert got_loc.tolist() == [101, 102, 103, 0]  # the padded row writes reserved slot 0
    assert torch.equal(got_hidden[:BS], hidden)
    assert torch.equal(out, hidden[:, :H] * 2)  # the real rows of the fc output
    (event,) = runner.events
    assert event.recorded and runner.model_runner.war_fastpath_read_done_event is event
    assert runner.last_selection is None and calls == []


# --- the draft worker -------------------------------------------------------------------------------


class MHAPool:
    pass


def draft_worker_defs(tree: Path, **c: Any) -> dict[str, Any]:
    names = ["EagleDraftWorker._draft_kv_only_supported", "EagleDraftWorker._draft_extend_kv_only",
             "EagleDraftWorker._write_draft_kv"]
    if "def keep_draft_kv_rows" in source(tree, WORKER).read_text():
        names.append("EagleDraftWorker.keep_draft_kv_rows")  # 0045: 0038's keep, shared with the off path
    extra = {
        "get_spec": lambda: SimpleNamespace(speculative_use_rejection_sampling=c.get("rejection", False)),
        "require_gathered_buffer": lambda server_args: c.get("gathered", False),
        "MHATokenToKVPool": MHAPool,
    }
    return patched_defs(tree, WORKER, names, extra=extra)


class DraftWorker:
    def __init__(self, defs: dict[str, Any], runner: Any = None, **c: Any) -> None:
        self.defs, self.calls = defs, []
        self.topk = c.get("topk", 1)
        self.seed_dsa_topk_from_draft_extend = c.get("dsa", False)
        self.draft_extend_attn_backend = SimpleNamespace(dcp_size=c.get("dcp", 1))
        self.cuda_graph_runner_for_draft_extend_kv_only = runner
        self.deferred_kv = None  # patch 0038's deferral off (test_deferred_draft_kv.py)
        model = SimpleNamespace(
            supports_draft_kv_only=lambda: c.get("model", True),
            forward_draft_kv_only=lambda *args: self.calls.append(("eager", args)))
        if not c.get("has_kv_only", True):
            del model.supports_draft_kv_only
        self.draft_runner = SimpleNamespace(model=model, server_args=None,
                                            token_to_kv_pool=c.get("pool", MHAPool()))

    def _draft_kv_only_supported(self) -> bool:
        return self.defs["EagleDraftWorker._draft_kv_only_supported"](self)

    def _write_draft_kv(self, *rows: torch.Tensor) -> None:
        self.defs["EagleDraftWorker._write_draft_kv"](self, *rows)

    def keep_draft_kv_rows(self, *args: Any) -> None:
        self.defs["EagleDraftWorker.keep_draft_kv_rows"](self, *args)

    def extend(self, batch: Any, result: Any) -> bool:
        return self.defs["EagleDraftWorker._draft_extend_kv_only"](self, batch, result)


def steps0_batch(bs: int = BS, idle: bool = False) -> tuple[SimpleNamespace, SimpleNamespace]:
    batch = SimpleNamespace(seq_lens=torch.arange(10, 10 + bs, dtype=torch.int64),
                            out_cache_loc=torch.arange(200, 200 + bs, dtype=torch.int64),
                            forward_mode=SimpleNamespace(is_idle=lambda: idle, is_extend=lambda: False),
                            is_extend_in_batch=False, return_hidden_states=False,
                            spec_info=SimpleNamespace(is_verify_input=lambda: False))
    result = SimpleNamespace(next_token_ids=torch.arange(5, 5 + bs, dtype=torch.int32),
                             logits_output=SimpleNamespace(hidden_states=torch.randn(bs, AUX * H)))
    return batch, result


class ReplayRecorder:
    def __init__(self, max_bs: int) -> None:
        self.max_bs, self.calls = max_bs, []
        self.buffers = SimpleNamespace(hidden_states=torch.zeros(max_bs, AUX * H))

    def replay_kv_only(self, *args: torch.Tensor) -> None:
        self.calls.append(args)


@pytest.mark.parametrize("tree_name", TREES)
def test_the_draft_worker_replays_the_kv_only_graph_or_runs_it_eager(trees, tree_name: str) -> None:
    defs = draft_worker_defs(trees.get(tree_name))
    batch, result = steps0_batch()
    graph = ReplayRecorder(max_bs=4)
    worker = DraftWorker(defs, runner=graph)
    assert worker.extend(batch, result) is True
    ((ids, positions, loc, hidden),) = graph.calls
    assert ids.dtype == torch.int64 and ids.tolist() == [5, 6, 7]
    assert positions.tolist() == [10, 11, 12] and loc is batch.out_cache_loc
    assert hidden is result.logits_output.hidden_states and worker.calls == []

    for runner in (None, ReplayRecorder(max_bs=2)):  # no graph, or none that takes bs 3: eager
        worker = DraftWorker(defs, runner=runner)
        assert worker.extend(batch, result) is True
        ((kind, (ids, positions, hidden, loc, pool)),) = worker.calls
        assert kind == "eager" and ids.tolist() == [5, 6, 7] and positions.tolist() == [10, 11, 12]
        assert loc is batch.out_cache_loc and pool is worker.draft_runner.token_to_kv_pool
        assert runner is None or runner.calls == []


GATES = [({}, True), ({"has_kv_only": False}, False), ({"model": False}, False), ({"topk": 4}, False),
         ({"rejection": True}, False), ({"dsa": True}, False), ({"gathered": True}, False),
         ({"pool": object()}, False), ({"dcp": 2}, False)]


@pytest.mark.parametrize("tree_name", TREES)
@pytest.mark.parametrize("changes, expected", GATES, ids=lambda x: str(x))
def test_the_kv_only_extend_serves_only_where_it_writes_what_the_full_one_would(
        trees, tree_name: str, changes: dict[str, Any], expected: bool) -> None:
    defs = draft_worker_defs(trees.get(tree_name), **changes)
    graph = ReplayRecorder(max_bs=4)
    worker = DraftWorker(defs, runner=graph, **changes)
    assert worker.extend(*steps0_batch()) is expected
    assert len(graph.calls) == int(expected)
    if expected:  # an idle batch never
        assert DraftWorker(defs, runner=graph, **changes).extend(*steps0_batch(idle=True)) is False


# --- the spec worker: which extend a cycle runs, and the hold on an upshift ----------------------------


def spec_worker_defs(tree: Path, switch: bool, skip: bool = False) -> dict[str, Any]:
    extra = {
        "CaptureHiddenMode": SimpleNamespace(NULL=0, LAST=1, FULL=2), "EagleDraftInput": None,
        "get_draft_recurrent_hidden_state_spec": lambda runner: (H, torch.bfloat16),
        "envs": SimpleNamespace(**{SKIP: flag(skip), SWITCH: flag(switch)},
                                SGLANG_CUDA_GRAPH_SHARED_AUX_HIDDEN=flag(False)),
        "spec_stage_span": lambda name: nullcontext(), "spec_cycle_stats": SimpleNamespace(ENABLED=False),
        "speculative_moe_backend_context": nullcontext, "speculative_moe_a2a_backend_context": nullcontext,
    }
    names = ["EAGLEWorkerV2.forward_batch_generation", "EAGLEWorkerV2._stub_skipped_draft_extend",
             "EAGLEWorkerV2.activate_step_by_batch", "EAGLEWorkerV2._kv_only_extend_wanted"]
    return patched_defs(tree, WORKER, names, extra=extra)


def spec_worker(defs: dict[str, Any], steps: int, controller: Any = None, kv_only_serves: bool = True) -> Any:
    """An EAGLEWorkerV2 around the tree's methods, with a draft worker recording which extend ran."""

    class SpecWorker:
        _draft_kv_only_last = False

        def _steps0_decode_ok(self, batch: Any) -> bool:  # patch 0037's decode branch: no DECODE graphs here
            return False

        def __init__(self) -> None:
            self.speculative_num_steps, self.adaptive_controller = steps, controller
            self.topk, self.device, self.ran = 1, "cpu", []
            self.draft_worker = SimpleNamespace(
                draft_tp_context=lambda group: nullcontext(), draft_runner=SimpleNamespace(tp_group=None),
                draft=self.draft, _draft_extend_for_decode=self.full, _draft_extend_kv_only=self.kv_only)

        def draft(self, batch: Any) -> Any:
            return SimpleNamespace(is_verify_input=lambda: True)

        def _build_trivial_verify_input(self, batch: Any) -> Any:
            return SimpleNamespace(is_verify_input=lambda: True)

        def verify(self, batch: Any, grammar_barrier: Any = None) -> Any:
            bs = batch.seq_lens.shape[0]
            return SimpleNamespace(new_seq_lens=None, speculative_num_draft_tokens=self.speculative_num_steps + 1,
                                   next_draft_input=SimpleNamespace(), next_token_ids=torch.arange(bs),
                                   logits_output=SimpleNamespace(hidden_states=torch.randn(bs, AUX * H)))

        def full(self, batch: Any, batch_output: Any) -> None:
            self.ran.append((self.speculative_num_steps, "full"))

        def kv_only(self, batch: Any, batch_output: Any) -> bool:
            self.last_kv_only_args = (batch, batch_output)
            if kv_only_serves:
                self.ran.append((self.speculative_num_steps, "kv_only"))
            return kv_only_serves

    for name, fn in defs.items():
        setattr(SpecWorker, name.rpartition(".")[2], fn)
    return SpecWorker()


def forward(worker: Any, bs: int = BS) -> Any:
    batch, _ = steps0_batch(bs)
    return worker.forward_batch_generation(batch)


class SlotAt:
    """A controller whose slot wants ``steps`` (no states to switch)."""

    def __init__(self, steps: int) -> None:
        self.steps = steps

    def wants_steps(self, batch_size: int) -> int:
        return self.steps

    def activate_step_by_batch(self, batch_size: int) -> None:
        pass


@pytest.mark.parametrize("tree_name", TREES)
def test_a_steps0_cycle_writes_only_the_kv_and_stubs_the_draft_input(trees, tree_name: str) -> None:
    worker = spec_worker(spec_worker_defs(trees.get(tree_name), switch=True), steps=0, controller=SlotAt(0))
    out = forward(worker)
    assert worker.ran == [(0, "kv_only")] and worker._draft_kv_only_last is True
    batch, batch_output = worker.last_kv_only_args
    assert batch_output is out and batch.seq_lens.shape == (BS,)
    nd = out.next_draft_input
    assert nd.topk_p.shape == (BS, 1) and nd.topk_p.dtype == torch.float32
    assert nd.topk_index.shape == (BS, 1) and nd.topk_index.dtype == torch.int64
    assert nd.hidden_states.shape == (BS, H)


@pytest.mark.parametrize("tree_name", TREES)
@pytest.mark.parametrize("case", ["switch-off", "skip-wins", "gate-false", "steps3", "slot-wants-steps"])
def test_otherwise_the_cycle_runs_as_before(trees, tree_name: str, case: str) -> None:
    tree = trees.get(tree_name)
    defs = spec_worker_defs(tree, switch=case != "switch-off", skip=case == "skip-wins")
    steps = 3 if case == "steps3" else 0
    controller = SlotAt(2 if case == "slot-wants-steps" else steps)
    worker = spec_worker(defs, steps=steps, controller=controller, kv_only_serves=case != "gate-false")
    out = forward(worker)
    expected = {"switch-off": [(0, "full")], "skip-wins": [], "gate-false": [(0, "full")],
                "steps3": [(3, "full")], "slot-wants-steps": [(0, "full")]}[case]
    assert worker.ran == expected
    assert worker._draft_kv_only_last is False
    if case == "skip-wins":
        assert out.next_draft_input.topk_index.shape == (BS, 1)


class StateWorker:
    """What AdaptiveController needs of a worker: build and apply states (recorded)."""

    def __init__(self, steps0_max_bs: int) -> None:
        self.speculative_num_steps, self.applied, self.steps0_max_bs = 0, [], steps0_max_bs

    def build_adaptive_runtime_state(self, speculative_num_steps: int, speculative_num_draft_tokens: int,
                                     cuda_graph_bs: Any = None) -> Any:
        max_bs = self.steps0_max_bs if speculative_num_steps == 0 else 8
        runner = SimpleNamespace(max_bs=max_bs)
        return SimpleNamespace(speculative_num_steps=speculative_num_steps, target_graph_runner=runner,
                               cuda_graph_runner_for_draft_extend=runner)

    def apply_runtime_state(self, state: Any) -> None:
        self.applied.append(state.speculative_num_steps)
        self.speculative_num_steps = state.speculative_num_steps


def hold_scenario(tree: Path, tmp_path: Path, steps0_max_bs: int) -> tuple[Any, Any, Any]:
    """The patched AdaptiveController (one slot, steps 0 or 2) driving a spec worker at steps 0."""
    config = tmp_path / "adaptive.json"
    config.write_text(json.dumps({"1": {"candidate_steps": [0, 2]}}))
    module = TreeImporter.module(tree, CONTROLLER)
    states = StateWorker(steps0_max_bs)
    ctl = module.AdaptiveController(states, config_path=str(config))
    ctl.init_states(None)
    worker = spec_worker(spec_worker_defs(tree, switch=True), steps=0, controller=ctl)
    ctl.worker = worker_view(worker, states)
    return ctl, worker, states


def worker_view(worker: Any, states: StateWorker) -> Any:
    """The controller's worker from now on: applying a state sets the spec worker's steps."""

    class View:
        @property
        def speculative_num_steps(self) -> int:
            return worker.speculative_num_steps

        def apply_runtime_state(self, state: Any) -> None:
            states.apply_runtime_state(state)
            worker.speculative_num_steps = state.speculative_num_steps

    return View()


def move_slot(ctl: Any, steps: int) -> None:
    """A policy decision on a result: the slot moves and its state applies at once (as on_verify_complete)."""
    ctl.params._route(BS).current_steps = steps
    ctl._activate(steps)


@pytest.mark.parametrize("tree_name", TREES)
def test_an_upshift_holds_steps0_for_one_full_cycle(trees, tree_name: str, tmp_path: Path) -> None:
    tree = trees.get(tree_name)
    assert "def hold(" in source(tree, CONTROLLER).read_text()
    ctl, worker, states = hold_scenario(tree, tmp_path, steps0_max_bs=4)
    assert ctl.wants_steps(BS) == 0
    forward(worker)
    forward(worker)
    move_slot(ctl, 2)
    forward(worker)  # held: steps 0, the full extend
    forward(worker)  # then the slot's steps
    move_slot(ctl, 0)
    forward(worker)  # a downshift is KV-only at once
    assert worker.ran == [(0, "kv_only"), (0, "kv_only"), (0, "full"), (2, "full"), (0, "kv_only")]
    assert ctl.wants_steps(BS) == 0 and ctl.params._route(BS).current_steps == 0


@pytest.mark.parametrize("tree_name", TREES)
def test_without_a_steps0_graph_for_the_bs_the_upshift_drafts_cold(trees, tree_name: str, tmp_path: Path) -> None:
    tree = trees.get(tree_name)
    assert "def hold(" in source(tree, CONTROLLER).read_text()
    ctl, worker, _ = hold_scenario(tree, tmp_path, steps0_max_bs=2)  # the batch has 3 requests
    forward(worker)
    move_slot(ctl, 2)
    forward(worker)
    forward(worker)
    assert worker.ran == [(0, "kv_only"), (2, "full"), (2, "full")]
    assert worker._draft_kv_only_last is False


# --- where the KV-only graph is captured -------------------------------------------------------------


def capture_draft_graphs(tree: Path, monkeypatch, steps: int, switch: bool = True, skip: bool = False,
                         supported: bool = True) -> tuple[list[tuple[str, dict[str, Any]]], Any]:
    """The tree's ``EagleDraftWorker._capture_cuda_graphs`` on a CUDA-like stand-in worker (Triton draft backend)."""
    captured: list[tuple[str, dict[str, Any]]] = []

    def runner(role: str) -> type:
        class Runner:
            def __init__(self, worker: Any, **kw: Any) -> None:
                captured.append((role, kw))

        return Runner

    triton = type("TritonAttnBackend", (), {})
    extra = {
        "_is_cpu": False, "_is_hip": False, "_is_cuda": True, "_is_musa": False, "_is_npu": False, "_is_xpu": False,
        "check_cuda_graph_backend": lambda phase, backend: False,
        "Phase": SimpleNamespace(DECODE="decode"), "Backend": SimpleNamespace(DISABLED="disabled"),
        "get_model": lambda: SimpleNamespace(model_impl="auto"),
        "get_exec": lambda: SimpleNamespace(graph=SimpleNamespace(cuda_graph_config=SimpleNamespace(
            decode=SimpleNamespace(backend="full")))),
        "get_batch_sizes_to_capture": lambda mr, width=1: ([1, 2, 4], []),
        "get_available_gpu_memory": lambda *a, **k: 10.0,
        "log_info_on_rank0": lambda logger, msg: None, "logger": logging.getLogger("test_steps0_kv_only_extend"),
        "EAGLEDraftCudaGraphRunner": runner("draft"), "EAGLEDraftNpuGraphRunner": runner("draft"),
        "EAGLEDraftExtendCudaGraphRunner": runner("draft_extend"), "EAGLEDraftExtendNpuGraphRunner": None,
        "TritonAttnBackend": triton,
        **{name: type(name, (), {}) for name in ("TRTLLMMLABackend", "TRTLLMHAAttnBackend", "TokenspeedMLABackend",
                                                 "FlashInferAttnBackend")},
        "envs": SimpleNamespace(SGLANG_DISABLE_DRAFT_EXTEND_CUDA_GRAPH=flag(False), **{SWITCH: flag(switch)},
                                **{SKIP: flag(skip)}),
        "graph_fallback": SimpleNamespace(capture_or_run_eager=lambda role, capture: capture()),
    }
    assert "cuda_graph_runner_for_draft_extend_kv_only" in source(tree, WORKER).read_text()
    name = "EagleDraftWorker._capture_cuda_graphs"
    method = patched_defs(tree, WORKER, [name], extra=extra)[name]
    # The CUDA-only backends it imports lazily (after patched_defs: switching trees drops sglang modules).
    for module, name in (("dsa_backend", "DeepseekSparseAttnBackend"), ("deepseek_v4_backend", "DeepseekV4AttnBackend"),
                         ("flashmla_backend", "FlashMLABackend")):
        stub = types.ModuleType(f"sglang.srt.layers.attention.{module}")
        setattr(stub, name, type(name, (), {}))
        monkeypatch.setitem(sys.modules, stub.__name__, stub)
    worker = SimpleNamespace(
        speculative_num_steps=steps, topk=1, speculative_num_draft_tokens=steps + 1, device="cuda", gpu_id=0,
        draft_runner=SimpleNamespace(), target_worker=SimpleNamespace(device="cuda"), draft_attn_backend=None,
        draft_extend_attn_backend=triton(), _specialized_graph_memory_usage={}, _specialized_graph_time_usage={},
        _draft_kv_only_supported=lambda: supported)
    method(worker)
    return captured, worker


@pytest.mark.parametrize("tree_name", TREES)
def test_the_steps0_state_captures_the_kv_only_graph_after_the_full_one(trees, monkeypatch, tree_name: str) -> None:
    captured, worker = capture_draft_graphs(trees.get(tree_name), monkeypatch, steps=0)
    assert captured == [("draft_extend", {}), ("draft_extend", {"kv_only": True})]
    assert worker.cuda_graph_runner_for_draft_extend_kv_only is not None
    assert "draft_extend_kv_only" in worker._specialized_graph_memory_usage


@pytest.mark.parametrize("tree_name", TREES)
@pytest.mark.parametrize("case", ["steps3", "switch-off", "skip-on", "unsupported-draft"])
def test_no_kv_only_graph_elsewhere(trees, monkeypatch, tree_name: str, case: str) -> None:
    captured, worker = capture_draft_graphs(trees.get(tree_name), monkeypatch, steps=3 if case == "steps3" else 0,
                                            switch=case != "switch-off", skip=case == "skip-on",
                                            supported=case != "unsupported-draft")
    assert [kw for role, kw in captured if role == "draft_extend"] == [{}]
    assert worker.cuda_graph_runner_for_draft_extend_kv_only is None
