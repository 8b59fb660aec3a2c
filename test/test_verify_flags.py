"""The CUDA-graph flags of the patched SGLang trees (patch 0001), on CPU.

Each test runs on the 0.5.17 series' tree and on the upstream port's (0.5.23),
with the tree's own code: the flag modules and parallel_state are imported from
it, EagerRunner.execute is executed from its source file. Tests over the
``tree`` fixture also run against the unpatched releases, where they must fail
(xfail strict): they show that the bug the patch fixes is there.
"""

from __future__ import annotations

import contextlib
import sys
import types
from types import SimpleNamespace

import pytest
import torch

from sglang_trees import (  # noqa: F401 (trees: a module-scoped fixture)
    PATCHED,
    PATCHED_AND_PRISTINE,
    TreeImporter,
    load_defs,
    source,
    trees,
)

TC = "sglang.srt.model_executor.runner_backend_utils.tc_piecewise_cuda_graph.context_manager"
BCG = "sglang.srt.model_executor.runner_backend_utils.breakable_cuda_graph.context"
PARALLEL_STATE = "sglang.srt.distributed.parallel_state"
EAGER_RUNNER = "sglang.srt.model_executor.runner.eager_runner"
FORWARD_BATCH_INFO = "sglang.srt.model_executor.forward_batch_info"
LAYER_SETUP = "sglang.srt.model_executor.model_runner_components.layer_setup"
CUDA_GRAPH_SETUP = "sglang.srt.model_executor.model_runner_components.cuda_graph_setup"


class Tree:
    """The modules and definitions of one tree that these tests use."""

    def __init__(self, path) -> None:
        self.path = path
        self.tc = TreeImporter.module(path, TC)
        self.bcg = TreeImporter.module(path, BCG)
        self.ps = TreeImporter.module(path, PARALLEL_STATE)
        self.ForwardMode = load_defs(source(path, FORWARD_BATCH_INFO), ["ForwardMode"])["ForwardMode"]

    def flags(self) -> tuple[bool, bool]:
        return self.tc.is_in_tc_piecewise_cuda_graph(), self.bcg.is_in_breakable_cuda_graph()

    def enable(self, which: str):
        return self.tc.enable_tc_piecewise_cuda_graph() if which == "tc" else self.bcg.enable_breakable_cuda_graph()

    def is_set(self, which: str) -> bool:
        return self.flags()[0 if which == "tc" else 1]

    def graph_context(self):
        return self.tc.set_tc_piecewise_forward_context(
            forward_batch=SimpleNamespace(), attention_layers=[], quant_config=None, moe_layers=[], moe_fusions=[]
        )


@pytest.fixture(params=PATCHED_AND_PRISTINE)
def tree(request, trees) -> Tree:
    return Tree(trees.get(request.param))


@pytest.fixture(params=PATCHED)
def patched(request, trees) -> Tree:
    return Tree(trees.get(request.param))


# -- the flag scopes ---------------------------------------------------------


@pytest.mark.parametrize("which", ["tc", "breakable"])
def test_flag_scope_exception_leaves_flag_off(patched: Tree, which: str) -> None:
    with pytest.raises(KeyError):
        with patched.enable(which):
            assert patched.is_set(which)
            raise KeyError("boom")
    assert not patched.is_set(which)


@pytest.mark.parametrize("which", ["tc", "breakable"])
def test_nested_flag_scope_restores_outer_value(tree: Tree, which: str) -> None:
    with tree.enable(which):
        with tree.enable(which):
            assert tree.is_set(which)
        assert tree.is_set(which), "the inner scope cleared the enclosing scope's flag"
    assert not tree.is_set(which)


@pytest.mark.parametrize("which", ["tc", "breakable"])
def test_nested_flag_scope_exception_restores_outer_value(tree: Tree, which: str) -> None:
    with tree.enable(which):
        with pytest.raises(RuntimeError):
            with tree.enable(which):
                raise RuntimeError("capture failed")
        assert tree.is_set(which)
    assert not tree.is_set(which)


def test_nested_forward_context_restores_outer(tree: Tree) -> None:
    with tree.graph_context():
        outer = tree.tc.get_tc_piecewise_forward_context()
        with tree.graph_context():
            assert tree.tc.get_tc_piecewise_forward_context() is not outer
        assert tree.tc.get_tc_piecewise_forward_context() is outer
    assert tree.tc.get_tc_piecewise_forward_context() is None


# -- EagerRunner.execute ------------------------------------------------------


class RecordingRunner:
    """Stands in for an EagerRunner instance: records the flags each forward sees."""

    def __init__(self, tree: Tree, fail: bool = False) -> None:
        self.tree, self.fail, self.seen = tree, fail, []
        # 0.5.23's execute also reads these; their modules pull in model and kernel packages.
        stand_ins = {"ForwardMode": tree.ForwardMode, "is_npu": lambda: False, "get_cp_strategy": lambda: None}
        execute = load_defs(source(tree.path, EAGER_RUNNER), ["EagerRunner.execute"], extra=stand_ins)
        self.execute = types.MethodType(execute["EagerRunner.execute"], self)

    def model_context(self):
        return contextlib.nullcontext()

    def _record(self, forward_batch, pp_proxy_tensors=None):
        self.seen.append((forward_batch.forward_mode.name, self.tree.flags()))
        if self.fail:
            raise RuntimeError("forward failed")
        return "logits"

    _execute_decode = _execute_extend = _execute_idle = _record


MODES = ["DECODE", "TARGET_VERIFY", "EXTEND", "IDLE", "DRAFT_EXTEND_V2"]


@pytest.mark.parametrize("mode", MODES)
def test_eager_forward_runs_with_both_flags_off(tree: Tree, mode: str) -> None:
    runner = RecordingRunner(tree)
    batch = SimpleNamespace(forward_mode=tree.ForwardMode[mode])
    with tree.enable("tc"), tree.enable("breakable"):  # a caller that leaked both flags
        assert runner.execute(batch) == "logits"
        assert tree.flags() == (True, True), "the caller's flags are restored after the forward"
    assert runner.seen == [(mode, (False, False))]


def test_eager_forward_restores_flags_on_exception(patched: Tree) -> None:
    runner = RecordingRunner(patched, fail=True)
    batch = SimpleNamespace(forward_mode=patched.ForwardMode.TARGET_VERIFY)
    with patched.enable("tc"):
        with pytest.raises(RuntimeError, match="forward failed"):
            runner.execute(batch)
        assert patched.flags() == (True, False)
    assert runner.seen == [("TARGET_VERIFY", (False, False))]


def test_check_fails_loudly_on_leaked_flag(tree: Tree, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_CHECK_EAGER_GRAPH_FLAGS", "1")
    runner = RecordingRunner(tree)
    batch = SimpleNamespace(forward_mode=tree.ForwardMode.TARGET_VERIFY)
    with tree.enable("breakable"):
        with pytest.raises(RuntimeError, match=r"Eager TARGET_VERIFY forward .*breakable"):
            runner.execute(batch)
    assert runner.seen == [], "the forward must not run"


def test_check_passes_clean_forward(patched: Tree, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_CHECK_EAGER_GRAPH_FLAGS", "1")
    runner = RecordingRunner(patched)
    assert runner.execute(SimpleNamespace(forward_mode=patched.ForwardMode.TARGET_VERIFY)) == "logits"


def test_check_is_off_by_default(patched: Tree, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SGLANG_CHECK_EAGER_GRAPH_FLAGS", raising=False)
    runner = RecordingRunner(patched)
    with patched.enable("tc"):
        assert runner.execute(SimpleNamespace(forward_mode=patched.ForwardMode.DECODE)) == "logits"


def test_invalid_mode_still_raises_value_error(patched: Tree) -> None:
    runner = RecordingRunner(patched)
    with pytest.raises(ValueError, match="Invalid forward mode"):
        runner.execute(SimpleNamespace(forward_mode=patched.ForwardMode.PREBUILT))


# -- all-reduce method resolution --------------------------------------------


class FakeCustomAllReduce:
    disabled = False

    def __init__(self, accepts: bool) -> None:
        self.accepts = accepts

    def should_custom_ar(self, inp: torch.Tensor) -> bool:
        return self.accepts


def coordinator(tree: Tree, ca=None, pynccl=True):
    """A GroupCoordinator with only the communicators the resolution reads."""
    group = object.__new__(tree.ps.GroupCoordinator)
    group.ca_comm = ca
    group.qr_comm = group.pymscclpp_comm = group.torch_symm_mem_comm = group.pcie_ipc_comm = None
    group.pynccl_comm = object() if pynccl else None
    return group


def resolve(group) -> str | None:
    return group._resolve_outplace_all_reduce_method(torch.zeros(8))


def test_outside_any_graph_all_reduce_is_in_place(patched: Tree) -> None:
    assert resolve(coordinator(patched)) is None


def test_bare_flag_does_not_select_pynccl(tree: Tree) -> None:
    with tree.enable("tc"):  # the flag alone, as a leaked global would leave it
        assert resolve(coordinator(tree)) is None


def test_active_graph_context_selects_pynccl(patched: Tree) -> None:
    with patched.enable("tc"), patched.graph_context():
        assert resolve(coordinator(patched)) == "pynccl"
        assert resolve(coordinator(patched, pynccl=False)) is None


def test_graph_context_without_flag_is_in_place(patched: Tree) -> None:
    with patched.graph_context():
        assert resolve(coordinator(patched)) is None


def test_custom_all_reduce_wins_when_it_accepts_the_size(patched: Tree) -> None:
    assert resolve(coordinator(patched, ca=FakeCustomAllReduce(True))) == "ca"
    assert resolve(coordinator(patched, ca=FakeCustomAllReduce(False))) is None
    with patched.enable("tc"), patched.graph_context():
        assert resolve(coordinator(patched, ca=FakeCustomAllReduce(False))) == "pynccl"


def test_eager_forward_inside_graph_scope_is_in_place(patched: Tree) -> None:
    guard = TreeImporter.module(patched.path, "sglang.srt.model_executor.runner_backend_utils.eager_forward_guard")
    with patched.enable("tc"), patched.graph_context():
        with guard.eager_forward_guard(patched.ForwardMode.TARGET_VERIFY):
            assert resolve(coordinator(patched)) is None
        assert resolve(coordinator(patched)) == "pynccl"


# -- the test switch on a model without a prefill graph (patch 0003) --------


def graph_setup_stub(tree: Tree) -> types.ModuleType | None:
    """0.5.23's switch imports the layer indexing of cuda_graph_setup when it runs; that
    module pulls in every graph runner, so a stand-in carries the tree's own two functions."""
    path = source(tree.path, CUDA_GRAPH_SETUP)
    if "def index_attention_layers_by_global_id" not in path.read_text():
        return None
    stub = types.ModuleType(CUDA_GRAPH_SETUP)
    vars(stub).update(load_defs(path, ["index_attention_layers_by_global_id", "_align_pipeline_layers"]))
    return stub


def test_forced_switch_collects_layers_of_a_model_without_prefill_graph(
    patched: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MLA models run with the prefill graph off, so nothing collected the layer
    lists the forced verify's forward context needs; the switch collects them."""
    layer_setup = load_defs(
        source(patched.path, LAYER_SETUP), ["AttentionAndMoeLayers", "compute_attention_and_moe_layers"]
    )
    collect = load_defs(source(patched.path, EAGER_RUNNER), ["collect_pcg_layers"], extra=layer_setup)[
        "collect_pcg_layers"
    ]
    stub = graph_setup_stub(patched)
    if stub is not None:
        monkeypatch.setitem(sys.modules, CUDA_GRAPH_SETUP, stub)

    def deepseek_layer(layer_id: int, moe: bool) -> torch.nn.Module:
        layer = torch.nn.Module()
        layer.self_attn = torch.nn.Module()
        layer.self_attn.attn_mqa, layer.self_attn.attn_mha = torch.nn.Identity(), torch.nn.Identity()
        layer.self_attn.attn_mqa.layer_id = layer.self_attn.attn_mha.layer_id = layer_id
        layer.mlp = torch.nn.Module()
        if moe:
            layer.mlp.experts = torch.nn.Identity()
        return layer

    causal_lm = torch.nn.Module()
    causal_lm.model = torch.nn.Module()
    causal_lm.model.layers = torch.nn.ModuleList([deepseek_layer(0, False), deepseek_layer(1, True)])
    # 0.5.23 collects through ModelRunner.get_cuda_graph_layers, which is this function there.
    runner = SimpleNamespace(model=causal_lm, get_cuda_graph_layers=layer_setup["compute_attention_and_moe_layers"])
    collect(runner)
    layers = causal_lm.model.layers
    assert runner.attention_layers == [layers[0].self_attn.attn_mqa, layers[1].self_attn.attn_mqa]
    assert runner.mha_companion_layers == [layers[0].self_attn.attn_mha, layers[1].self_attn.attn_mha]
    assert runner.moe_layers == [None, layers[1].mlp.experts]
    assert runner.moe_fusions == [None, layers[1].mlp]
    assert runner.dsa_indexers == [None, None]
