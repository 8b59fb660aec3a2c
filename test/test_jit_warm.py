"""``sglang-fastpath warm-jit``: builds SGLang's Marlin MoE JIT kernel ahead of the first server start."""

from __future__ import annotations

import ast
import sys
import types

import pytest
import torch

from sglang_fastpath.host import jit_warm
from sglang_fastpath.cli import main
from sglang_fastpath.errors import FastpathError
from sglang_trees import source, trees  # noqa: F401 (trees: a module-scoped fixture)

MODULE, BUILDER, _ = jit_warm.KERNELS["marlin-moe"]


def _fake_sglang(monkeypatch: pytest.MonkeyPatch, builder) -> list[tuple]:
    """Make ``MODULE`` importable with ``BUILDER`` = builder; return the calls it gets."""
    parts = MODULE.split(".")
    for i in range(1, len(parts)):
        monkeypatch.setitem(sys.modules, ".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
    module = types.ModuleType(MODULE)
    calls: list[tuple] = []

    def record(*args):
        calls.append(args)
        return builder(*args)

    setattr(module, BUILDER, record)
    monkeypatch.setitem(sys.modules, MODULE, module)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    return calls


def test_builds_the_marlin_module_with_the_server_dtype(monkeypatch, capsys):
    calls = _fake_sglang(monkeypatch, lambda *a: object())
    assert main(["warm-jit", "--dtype", "float16"]) == 0
    assert calls == [(torch.float16, False, False)]
    out = capsys.readouterr().out
    assert "marlin-moe: ready in" in out and "cache:" in out


def test_a_failed_build_names_the_kernel(monkeypatch):
    def fail(*args):
        raise RuntimeError("nvcc not found")

    _fake_sglang(monkeypatch, fail)
    with pytest.raises(FastpathError, match="marlin-moe: the JIT build failed: RuntimeError: nvcc not found"):
        jit_warm.warm(["marlin-moe"])


def test_an_sglang_without_the_builder_is_refused(monkeypatch):
    _fake_sglang(monkeypatch, lambda *a: None)
    delattr(sys.modules[MODULE], BUILDER)
    with pytest.raises(FastpathError, match="not the 0.5.17 layout"):
        jit_warm.warm(["marlin-moe"])


def test_bad_input_is_one_line_and_exit_2(monkeypatch, capsys):
    assert main(["warm-jit", "--kernels", "flash"]) == 2
    assert "unknown kernel flash: choose from marlin-moe" in capsys.readouterr().err
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["warm-jit"]) == 2
    assert "no CUDA GPU visible" in capsys.readouterr().err


def test_the_pinned_sglang_has_the_builder_warm_jit_calls(trees):  # noqa: F811
    tree = ast.parse(source(trees.patched, MODULE).read_text())
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert BUILDER in defs, f"SGLang 0.5.17 no longer defines {MODULE}.{BUILDER}"
    assert [a.arg for a in defs[BUILDER].args.args] == ["dtype", "is_ep", "has_bias"]
