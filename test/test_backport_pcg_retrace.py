"""Why the 0.5.9 backport does not keep the piecewise route for verify, shown on CPU.

0.5.9's piecewise CUDA graph (PCG) is a Dynamo trace of the language model made
from EXTEND batches (``install_torch_compiled``, ``compilation/compile.py``).
DeepSeek-V2's model forward reads ``forward_batch.forward_mode`` inside that
trace, so a TARGET_VERIFY batch fails Dynamo's guard and is traced again; the
new trace has no captured graphs, and capturing one while serving fails an
assert in ``cuda_piecewise_backend.py``. This module runs 0.5.9's own
``install_torch_compiled`` trampoline and ``ForwardMode`` on a stand-in model that
reads the mode the way ``DeepseekV2Model.forward`` does, with the CPU torch here
(0.5.9 pins torch 2.9.1), and checks that the real model does read it.
"""

from __future__ import annotations

import ast
import contextvars
import sys
from types import ModuleType, SimpleNamespace

import pytest
import torch

from sglang_trees import load_defs, source, trees  # noqa: F401 (trees: a module-scoped fixture)

COMPILE_DEFS = [
    "set_compiled",
    "install_torch_compiled",
    "_mark_dynamic_on_value",
    "_normalize_dims",
    "_MaybeIntermediateTensors",
]


def model_forward_source(tree) -> str:
    """The source of ``DeepseekV2Model.forward`` in ``tree``."""
    path = source(tree, "sglang.srt.models.deepseek_v2")
    module = ast.parse(path.read_text())
    model = next(n for n in module.body if isinstance(n, ast.ClassDef) and n.name == "DeepseekV2Model")
    forward = next(n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "forward")
    return ast.get_source_segment(path.read_text(), forward)


class StandIn(torch.nn.Module):
    """Reads the forward mode as DeepseekV2Model.forward does before its final norm."""

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, forward_batch) -> torch.Tensor:
        hidden = input_ids.float() + positions.float()
        if not forward_batch.forward_mode.is_idle():
            hidden = hidden * 2
        return hidden


@pytest.mark.parametrize("tree_name", ["backport_pristine", "backport"])
def test_deepseek_model_forward_reads_the_forward_mode(trees, tree_name: str) -> None:
    assert "forward_batch.forward_mode" in model_forward_source(trees.get(tree_name))


def test_pcg_trace_of_extend_is_retraced_for_verify(trees, monkeypatch) -> None:
    tree = trees.backport_pristine  # the backport leaves compile.py and forward_batch_info.py as they are
    ForwardMode = load_defs(source(tree, "sglang.srt.model_executor.forward_batch_info"), ["ForwardMode"])[
        "ForwardMode"
    ]
    # Dynamo imports an enum's module to guard on its members.
    home = ModuleType(ForwardMode.__module__)
    home.ForwardMode = ForwardMode
    monkeypatch.setitem(sys.modules, ForwardMode.__module__, home)
    defs = load_defs(
        source(tree, "sglang.srt.compilation.compile"),
        COMPILE_DEFS,
        extra={
            "_COMPILE_ENABLED": contextvars.ContextVar("_COMPILE_ENABLED", default=False),
            "rank0_log": lambda msg: None,
        },
    )
    traces: list[str] = []

    def backend_factory(graph_module, example_inputs):
        traces.append(graph_module.code)
        return graph_module.forward

    model = defs["install_torch_compiled"](
        StandIn(), dynamic_arg_dims={"input_ids": 0, "positions": 0}, backend_factory=backend_factory
    )
    ids, pos = torch.zeros(8, dtype=torch.int64), torch.arange(8)
    torch._dynamo.reset()
    try:
        with defs["set_compiled"](True):
            for mode in ("EXTEND", "EXTEND", "TARGET_VERIFY"):
                out = model(ids, pos, SimpleNamespace(forward_mode=ForwardMode[mode]))
                assert torch.equal(out, (ids + pos).float() * 2)
    finally:
        torch._dynamo.reset()
    assert len(traces) == 2, "one trace for EXTEND, reused once, then a second one for TARGET_VERIFY"
