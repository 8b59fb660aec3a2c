"""Patch 0020: the EAGLE multi-step draft graph fills its own Triton metadata.

With ``SGLANG_ENABLE_TRITON_DRAFT_METADATA_IN_GRAPH`` on, ``TritonMultiStepDraftBackend``'s
``init_forward_metadata_in_graph`` (run inside the draft graph's capture) launches the draft
kv-indices kernel on the graph's own buffers and the kv splits on its ``seq_lens``; the replay
preparation (``init_forward_metadata_out_graph``) then launches nothing. With the switch off, or
with a step backend that cannot fill in the graph (DCP, translated kv locations, a sliding window),
every replay preparation fills as before.

The multi-step backend's methods run from the patched tree on a stand-in object whose kernels record
their launches. Every test runs on the patched 0.5.17 tree and on the patched 0.5.23 tree (upstream
port 0019), where the kv-indices kernel reads its rows through the KV index translator's
``read_source`` (a static pool's passthrough here) and the eligibility also excludes a sliding-window
KV pool.
"""

from __future__ import annotations

import sys
from types import MethodType, ModuleType, SimpleNamespace
from typing import Any

import pytest
import torch
from sglang_trees import PATCHED, TreeImporter, load_defs, source
from sglang_trees import trees  # noqa: F401 (a fixture)

BACKEND = "sglang.srt.layers.attention.triton_backend"
CLASS = "TritonMultiStepDraftBackend"
METHODS = ["common_template", "init_forward_metadata_out_graph", "_fill_cuda_graph_metadata",
           "init_forward_metadata_in_graph", "_can_fill_metadata_in_graph"]
STEPS, TOPK, MAX_BS = 3, 1, 4


@pytest.fixture(autouse=True)
def forward_batch_info_stub(monkeypatch) -> None:
    """``init_forward_metadata_out_graph`` imports ``build_inner_fb_view`` from SGLang when called;
    only its capture-time branch (not exercised here) uses it."""
    stub = ModuleType("sglang.srt.model_executor.forward_batch_info")
    stub.build_inner_fb_view = None
    monkeypatch.setitem(sys.modules, stub.__name__, stub)


class Launches:
    """Every kernel launch the methods make, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def kv_indices_kernel(self) -> Any:
        launches = self

        class Kernel:
            def __getitem__(self, grid: Any):
                # (0.5.23 passes the translator's row source first and keywords after the positionals)
                def launch(req_pool_indices, req_to_token, seq_lens, kv_indices, kv_indptr, positions, *rest, **kw):
                    launches.calls.append(("draft_kv_indices", (grid, seq_lens, positions)))
                return launch

        return Kernel()


class StepBackend:
    def __init__(self, launches: Launches, fillable: bool) -> None:
        self.launches = launches
        self.graph_metadata_fillable = fillable
        self.use_sliding_window_kv_pool = False  # (read by 0.5.23's fill)
        self.cuda_graph_num_kv_splits = torch.zeros(MAX_BS * TOPK, dtype=torch.int32)
        self.in_graph_calls = 0
        self.out_graph_calls = 0

    def get_num_kv_splits(self, out: torch.Tensor, seq_lens: torch.Tensor) -> None:
        self.launches.calls.append(("kv_splits", (out.shape[0], seq_lens)))

    def init_forward_metadata_in_graph(self, forward_batch: Any) -> None:
        self.in_graph_calls += 1

    def init_forward_metadata_out_graph(self, forward_batch: Any, in_capture: bool = False) -> None:
        self.out_graph_calls += 1


def static_translator(req_to_token: torch.Tensor) -> SimpleNamespace:
    """0.5.23's KVIndexTranslator on a static pool: read_source is the req_to_token passthrough."""
    def read_source(plan, *, req_pool_indices, bs, kind=None):
        return SimpleNamespace(row_ids=req_pool_indices, ids=req_to_token, row_stride=req_to_token.stride(0),
                               entry_page_size=1, v2p=None, is_translated=False)
    return SimpleNamespace(read_source=read_source)


def multi_step(trees, switch: bool, fillable: tuple[bool, ...] = (True, True),
               tree_name: str = "patched") -> tuple[SimpleNamespace, Launches]:
    launches = Launches()
    tree = trees.get(tree_name)
    names = [f"{CLASS}.{m}" for m in METHODS]
    envs = SimpleNamespace(SGLANG_ENABLE_TRITON_DRAFT_METADATA_IN_GRAPH=SimpleNamespace(get=lambda: switch))
    defs = load_defs(source(tree, BACKEND), names, extra={
        "envs": envs,
        "generate_draft_decode_kv_indices": launches.kv_indices_kernel(),
        "ForwardBatch": SimpleNamespace, "ForwardMode": SimpleNamespace,  # not reached here
        "next_power_of_2": lambda n: 1 << max(0, (int(n) - 1).bit_length()),
        "draft_kv_indices_used_len": lambda seq_lens_sum, topk, bs, steps: 0,
    })
    steps = [StepBackend(launches, f) for f in fillable]
    req_to_token = torch.zeros((MAX_BS, 64), dtype=torch.int32)
    b = SimpleNamespace(
        topk=TOPK, speculative_num_steps=STEPS, attn_backends=steps, max_context_len=64, pool_len=64, page_size=1,
        req_to_token_pool=SimpleNamespace(req_to_token=req_to_token),
        kv_indptr=torch.zeros((STEPS, MAX_BS + 1), dtype=torch.int32),
        cuda_graph_kv_indices=torch.zeros((STEPS, MAX_BS * 64), dtype=torch.int64),
        _filled_in_graph=False,
        # 0.5.23 only: the translator, no window rail, no draft window
        kv_index_translator=static_translator(req_to_token), window_rail=False, cuda_graph_window_kv_indices=None,
        draft_window_size=0, draft_sink_size=0)
    for m in METHODS:
        setattr(b, m, MethodType(defs[f"{CLASS}.{m}"], b))
    b.metadata_in_graph = b._can_fill_metadata_in_graph()  # as __init__ sets it
    return b, launches


def graph_batch() -> SimpleNamespace:
    """The draft graph's forward batch: its fields are the graph's input buffers."""
    return SimpleNamespace(batch_size=MAX_BS, seq_lens=torch.tensor([5, 9, 1, 13]), seq_lens_sum=None,
                           req_pool_indices=torch.arange(MAX_BS), positions=torch.tensor([4, 8, 0, 12]),
                           spec_info=SimpleNamespace(), kv_loc_plan=None)


def capture_then_replay(b: SimpleNamespace, launches: Launches, replays: int) -> tuple[list, list]:
    # (the capture's own preparation, init_forward_metadata_out_graph(in_capture=True), runs before
    # this; the patch leaves it as it was)
    b.init_forward_metadata_in_graph(graph_batch())  # run_once inside the capture
    in_graph = list(launches.calls)
    launches.calls.clear()
    for _ in range(replays):
        b.init_forward_metadata_out_graph(graph_batch())
    return in_graph, list(launches.calls)


@pytest.mark.parametrize("tree_name", PATCHED)
def test_the_draft_graph_fills_its_metadata_and_replays_launch_nothing(trees, tree_name: str) -> None:
    b, launches = multi_step(trees, switch=True, tree_name=tree_name)
    in_graph, replays = capture_then_replay(b, launches, replays=3)
    assert [name for name, _ in in_graph] == ["draft_kv_indices", "kv_splits"]
    grid, seq_lens, positions = in_graph[0][1]
    assert grid == (STEPS, MAX_BS, TOPK)
    assert seq_lens.tolist() == [5, 9, 1, 13] and positions.tolist() == [4, 8, 0, 12]
    assert in_graph[1][1][0] == MAX_BS * TOPK
    assert replays == []
    assert all(s.in_graph_calls == 1 for s in b.attn_backends)  # the step backends' hooks still run


@pytest.mark.parametrize("tree_name", PATCHED)
@pytest.mark.parametrize("switch, fillable", [(False, (True, True)), (True, (True, False))],
                         ids=["switch-off", "a-step-backend-not-eligible"])
def test_otherwise_every_replay_fills_as_before(trees, switch: bool, fillable: tuple[bool, ...],
                                                tree_name: str) -> None:
    b, launches = multi_step(trees, switch=switch, fillable=fillable, tree_name=tree_name)
    in_graph, replays = capture_then_replay(b, launches, replays=2)
    assert in_graph == []
    assert [name for name, _ in replays] == ["draft_kv_indices", "kv_splits"] * 2


@pytest.mark.parametrize("tree_name", PATCHED)
def test_the_switch_defaults_on_and_turns_off(trees, monkeypatch, tree_name: str) -> None:
    """On by default since its GPU parity and speed runs (benchmark/results/*-draft-side-in-graph)."""
    monkeypatch.delenv("SGLANG_ENABLE_TRITON_DRAFT_METADATA_IN_GRAPH", raising=False)
    envs = TreeImporter.module(trees.get(tree_name), "sglang.srt.environ").envs
    assert envs.SGLANG_ENABLE_TRITON_DRAFT_METADATA_IN_GRAPH.get() is True
    monkeypatch.setenv("SGLANG_ENABLE_TRITON_DRAFT_METADATA_IN_GRAPH", "false")
    assert envs.SGLANG_ENABLE_TRITON_DRAFT_METADATA_IN_GRAPH.get() is False
