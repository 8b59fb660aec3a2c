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


def _fake_arch_override(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``sglang.kernels.jit.utils.arch.override_jit_cuda_arch`` that logs when it is entered and left."""
    import contextlib

    events: list[str] = []
    name = "sglang.kernels.jit.utils.arch"
    parts = name.split(".")
    for i in range(1, len(parts)):
        if ".".join(parts[:i]) not in sys.modules:
            monkeypatch.setitem(sys.modules, ".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
    module = types.ModuleType(name)

    @contextlib.contextmanager
    def override_jit_cuda_arch(major: int, minor: int, suffix=None):
        events.append(f"enter {major}.{minor}")
        yield
        events.append("leave")

    module.override_jit_cuda_arch = override_jit_cuda_arch
    monkeypatch.setitem(sys.modules, name, module)
    return events


def test_arch_builds_without_a_gpu_inside_sglangs_arch_override(monkeypatch, tmp_path, capsys):
    events = _fake_arch_override(monkeypatch)
    seen_cache: list[str] = []

    def build(*args):
        events.append("build")
        seen_cache.append(jit_warm.os.environ["TVM_FFI_CACHE_DIR"])

    _fake_sglang(monkeypatch, build)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("TVM_FFI_CACHE_DIR", "/elsewhere")
    assert main(["warm-jit", "--arch", "9.0", "--cache-dir", str(tmp_path / "jit")]) == 0
    assert events == ["enter 9.0", "build", "leave"]
    assert seen_cache == [str(tmp_path / "jit")]
    assert f"cache: {tmp_path / 'jit'}" in capsys.readouterr().out


@pytest.mark.parametrize("arch", ["sm_90a", "9", "9.0a", ""])
def test_a_malformed_arch_is_one_line_and_exit_2(monkeypatch, capsys, arch):
    _fake_arch_override(monkeypatch)
    _fake_sglang(monkeypatch, lambda *a: None)
    assert main(["warm-jit", "--arch", arch]) == 2
    assert "write the compute capability as MAJOR.MINOR" in capsys.readouterr().err


def test_the_pinned_sglang_has_the_arch_override_warm_jit_uses(trees):  # noqa: F811
    tree = ast.parse(source(trees.patched, "sglang.kernels.jit.utils.arch").read_text())
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "override_jit_cuda_arch" in defs, "SGLang 0.5.17 no longer defines override_jit_cuda_arch"
    assert [a.arg for a in defs["override_jit_cuda_arch"].args.args][:2] == ["major", "minor"]
