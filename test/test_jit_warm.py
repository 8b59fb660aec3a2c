"""``sglang-fastpath warm-jit``: builds SGLang's Marlin MoE JIT kernel ahead of the first server start."""

from __future__ import annotations

import ast
import json
import os
import sys
import types

import pytest
import torch

from sglang_fastpath.host import jit_warm
from sglang_fastpath.cli import main
from sglang_fastpath.errors import FastpathError
from sglang_trees import source, trees  # noqa: F401 (trees: a module-scoped fixture)

MODULE, BUILDER, _ = jit_warm.KERNELS["marlin-moe"]


def _stub_module(monkeypatch: pytest.MonkeyPatch, name: str) -> types.ModuleType:
    """An empty module importable as ``name`` (its missing parents stubbed too), for this test only."""
    parts = name.split(".")
    for i in range(1, len(parts)):
        if ".".join(parts[:i]) not in sys.modules:
            monkeypatch.setitem(sys.modules, ".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
    module = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, name, module)
    return module


def _fake_sglang(monkeypatch: pytest.MonkeyPatch, builder) -> list[tuple]:
    """Make ``MODULE`` importable with ``BUILDER`` = builder; return the calls it gets."""
    module = _stub_module(monkeypatch, MODULE)
    calls: list[tuple] = []

    def record(*args):
        calls.append(args)
        return builder(*args)

    setattr(module, BUILDER, record)
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
    module = _stub_module(monkeypatch, "sglang.kernels.jit.utils.arch")

    @contextlib.contextmanager
    def override_jit_cuda_arch(major: int, minor: int, suffix=None):
        events.append(f"enter {major}.{minor}")
        yield
        events.append("leave")

    module.override_jit_cuda_arch = override_jit_cuda_arch
    return events


def test_arch_builds_without_a_gpu_inside_sglangs_arch_override(monkeypatch, tmp_path, capsys):
    events = _fake_arch_override(monkeypatch)
    seen_cache: list[str] = []

    def build(*args):
        events.append("build")
        seen_cache.append(os.environ["TVM_FFI_CACHE_DIR"])

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


MARLIN_90 = "sgl_kernel_jit_moe_wna16_marlin_bf16_t_false_false_c52b0190dd8e317a__arch_9.0a__tvmffi_0.1.11"
KIMI_INT4 = {"model_type": "deepseek_v3", "n_routed_experts": 384, "moe_intermediate_size": 2048,
             "quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized"}}


def _built(cache, name: str = MARLIN_90, so: bool = True):
    (cache / name).mkdir(parents=True)
    if so:
        (cache / name / (name.split("__arch_")[0] + ".so")).write_bytes(b"\x7fELF")
    return cache / name


def test_built_for_finds_the_kernel_of_that_compute_capability_only(tmp_path):
    assert jit_warm.built_for("marlin-moe", (9, 0), tmp_path) == []
    _built(tmp_path, MARLIN_90.replace("9.0a", "12.0f"))
    _built(tmp_path, MARLIN_90.replace("c52b", "d000"), so=False)  # a build that never finished
    assert jit_warm.built_for("marlin-moe", (9, 0), tmp_path) == []
    assert jit_warm.built_for("marlin-moe", (12, 0), tmp_path) == [tmp_path / MARLIN_90.replace("9.0a", "12.0f")]
    assert jit_warm.built_for("marlin-moe", (9, 0), _built(tmp_path).parent) == [tmp_path / MARLIN_90]


@pytest.mark.parametrize("config, built, expect", [
    (KIMI_INT4, False, "WARNING: the Marlin MoE kernel this model's compressed-tensors experts run is not in the JIT"),
    (KIMI_INT4, True, "JIT cache: Marlin MoE kernel for compute capability 9.0 built"),
    ({**KIMI_INT4, "quantization_config": {"quant_method": "fp8"}}, False, None),  # fp8 experts: no Marlin
    ({"model_type": "llama", "quantization_config": {"quant_method": "gptq"}}, False, None),  # dense: no MoE
])
def test_doctor_says_whether_a_marlin_models_first_start_compiles_it(monkeypatch, tmp_path, config, built, expect):
    from sglang_fastpath.host import doctor

    cache, model = tmp_path / "tvm-ffi", tmp_path / "model"
    cache.mkdir()
    model.mkdir()
    (model / "config.json").write_text(json.dumps(config))
    if built:
        _built(cache)
    monkeypatch.setenv("TVM_FFI_CACHE_DIR", str(cache))
    monkeypatch.setattr(doctor, "gpus", lambda: [doctor.GpuInfo("NVIDIA H200", (9, 0))])
    text = doctor.diagnose(model, device_name="NVIDIA H200").render()
    if expect is None:
        assert "Marlin MoE kernel" not in text
    else:
        assert expect in text
