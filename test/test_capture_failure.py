"""Patch 0010: a failed CUDA graph capture leaves that path eager and the server up.

Runs the patched trees' code (0.5.17, and the upstream port: 0.5.23 + patches/upstream/v0.5.23)
on CPU with stand-in runners whose capture raises
inside the CUDA graph flag scopes of patch 0001, the way a capture OOM does: the
target decode/verify capture (``capture_decode_graph``) and the EAGLE draft and
draft-extend captures (``EagleDraftWorker._capture_cuda_graphs``) must leave the
runner None (the eager path serves, 0008 then says ``capture_failed`` with the error), no graph
flag set, one warning naming the runner, the exception and the eager path, and
the failed runner collected before the allocator cache is emptied. Pristine
0.5.17 and 0.5.23 let the capture error end the start-up: those tests fail there.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import logging
import types
import weakref
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import pytest
import torch

from sglang_trees import PATCHED, PATCHED_AND_PRISTINE, TreeImporter, load_defs, source, trees  # noqa: F401

FALLBACK = "sglang.srt.model_executor.runner.graph_fallback"
SETUP = "sglang.srt.model_executor.model_runner_components.cuda_graph_setup"
WORKER = "sglang.srt.speculative.eagle_worker_v2"
RUNNER = "sglang.srt.model_executor.runner.decode_cuda_graph_runner"
TC = "sglang.srt.model_executor.runner_backend_utils.tc_piecewise_cuda_graph.context_manager"
BCG = "sglang.srt.model_executor.runner_backend_utils.breakable_cuda_graph.context"
GUARD = "sglang.srt.model_executor.runner_backend_utils.eager_forward_guard"
PLATFORMS = "sglang.srt.platforms"
RUNNER_FILES = [
    RUNNER,
    "sglang.srt.speculative.eagle_draft_cuda_graph_runner",
    "sglang.srt.speculative.eagle_draft_extend_cuda_graph_runner",
]
TREES = PATCHED_AND_PRISTINE


def load_fallback(tree: Path) -> types.ModuleType | None:
    """The tree's graph_fallback module, loaded on its own (its package imports GPU-only code)."""
    path = source(tree, FALLBACK)
    if not path.exists():
        return None
    TreeImporter.use(tree)  # for its lazy imports of sglang.srt.environ and sglang.srt.platforms
    spec = importlib.util.spec_from_file_location("capture_failure_graph_fallback", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Capture:
    """Stand-in runner classes for one tree, and what happened to their instances."""

    def __init__(self, tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tree = tree
        self.tc = TreeImporter.module(tree, TC)
        self.bcg = TreeImporter.module(tree, BCG)
        self.gf = load_fallback(tree)
        self.runners: dict[str, weakref.ref] = {}
        self.alive_at_empty_cache: list[list[str]] = []
        platform = TreeImporter.module(tree, PLATFORMS).current_platform
        monkeypatch.setattr(platform, "empty_cache", self._empty_cache, raising=False)

    def _empty_cache(self) -> None:
        self.alive_at_empty_cache.append(sorted(r for r, ref in self.runners.items() if ref() is not None))

    def runner_cls(self, role: str, fails: bool) -> type:
        """A runner whose __init__ captures like the tree's runners: inside both graph flags, an error
        raised there wrapped the way that tree's runners wrap a RuntimeError."""
        capture = self

        class StandInRunner:
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                capture.runners[role] = weakref.ref(self)
                self.graphs = {8: torch.zeros(256)}  # what the capture held when it failed
                self.role, self.max_bs, self.capture_bs = role, 8, [8]
                try:
                    with capture.tc.enable_tc_piecewise_cuda_graph(), capture.bcg.enable_breakable_cuda_graph():
                        if fails:
                            raise capture.injected(role)
                except RuntimeError as e:
                    raise capture.wrapped(e) from e

        return StandInRunner

    def injected(self, role: str) -> RuntimeError:
        cls = getattr(self.gf, "InjectedCaptureFailure", RuntimeError)
        return cls(f"SGLANG_TEST_FAIL_CUDA_GRAPH_CAPTURE={role}, after capturing bs 8")

    def wrapped(self, e: BaseException) -> Exception:
        """0.5.17's runners raise a bare Exception; the patched ones CudaGraphCaptureError."""
        cls = getattr(self.gf, "CudaGraphCaptureError", Exception)
        return cls(f"Capture cuda graph failed: {e}\n(hints)")

    def flags_set(self) -> list[str]:
        """Patch 0001's getter of the CUDA graph flags that are set."""
        return TreeImporter.module(self.tree, GUARD).graph_flags_set()


def capture_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.endswith("graph_fallback") and r.levelno == logging.WARNING]


def no_graph_backend(*args: Any) -> bool:
    return False


def target_model_runner(runner_cls: type) -> SimpleNamespace:
    return SimpleNamespace(
        is_draft_worker=False, is_generation=True, device="cuda", gpu_id=0,
        spec_algorithm=SimpleNamespace(is_speculative=lambda: True),
        decode_num_tokens_per_req=lambda: 4,
        server_args=SimpleNamespace(model_impl="auto", cuda_graph_config=SimpleNamespace(
            decode=SimpleNamespace(backend="full"))),
        _decode_cuda_graph_runner_cls=lambda: runner_cls,
    )


def capture_decode_graph(tree: Path, gf: types.ModuleType | None) -> Callable[..., Any]:
    """The tree's capture_decode_graph, with the platform and config lookups stubbed."""
    extra = {
        "GraphCapture": lambda **kw: SimpleNamespace(**kw),
        "ModelImpl": SimpleNamespace(MINDSPORE="mindspore"),
        "check_cuda_graph_backend": no_graph_backend,
        "Phase": SimpleNamespace(DECODE="decode"),
        "Backend": SimpleNamespace(DISABLED="disabled"),
        "get_flags": lambda: SimpleNamespace(capture=SimpleNamespace(enable_torch_compile=False)),
        "get_available_gpu_memory": lambda *a, **k: 10.0,
        "get_batch_sizes_to_capture": lambda mr, width=1: ([1, 2, 4, 8], []),
        "current_platform": SimpleNamespace(is_out_of_tree=lambda: False, device_name="cuda",
                                            get_graph_runner_cls=lambda: None),
        "CPUGraphRunner": object, "NPUGraphRunner": object, "XPUGraphRunner": object,
        "logger": logging.getLogger("test_capture_failure"),
        "graph_fallback": gf,
        # 0.5.23 reads these too (all of one import statement, or its import would rebind the others)
        "get_disagg": lambda: SimpleNamespace(disaggregation_mode="null"),
        "get_model": lambda: SimpleNamespace(model_impl="auto"),
        "get_exec": lambda: SimpleNamespace(graph=SimpleNamespace(cuda_graph_config=SimpleNamespace(
            decode=SimpleNamespace(backend="full")))),
        "require_out_of_tree_impl": lambda *a, **k: None,
    }
    TreeImporter.use(tree)
    return load_defs(source(tree, SETUP), ["capture_decode_graph"], extra=extra)["capture_decode_graph"]


@pytest.mark.parametrize("tree_name", TREES)
def test_failed_target_capture_runs_eager(trees, tree_name: str, monkeypatch, caplog) -> None:
    cap = Capture(trees.get(tree_name), monkeypatch)
    model_runner = target_model_runner(cap.runner_cls("target", fails=True))
    with caplog.at_level(logging.WARNING):
        try:
            result = capture_decode_graph(cap.tree, cap.gf)(model_runner=model_runner)
        except Exception as e:  # 0.5.17: the capture error ends the start-up
            pytest.fail(f"the capture failure propagated: {type(e).__name__}: {e}")
    assert result.runner is None and result.memory_usage_gb == 0
    assert cap.flags_set() == []
    assert cap.alive_at_empty_cache == [[]]  # runner collected, then the cache emptied, once
    (line,) = capture_warnings(caplog)
    assert line.startswith("target CUDA graph capture failed (InjectedCaptureFailure: SGLANG_TEST_FAIL_CUDA_GRAPH_CAPTURE=target")
    assert "target steps run eager from now on" in line


@pytest.mark.parametrize("tree_name", PATCHED)
def test_successful_target_capture_is_unchanged(trees, tree_name: str, monkeypatch, caplog) -> None:
    cap = Capture(trees.get(tree_name), monkeypatch)
    model_runner = target_model_runner(cap.runner_cls("target", fails=False))
    with caplog.at_level(logging.WARNING):
        result = capture_decode_graph(cap.tree, cap.gf)(model_runner=model_runner)
    assert result.runner.role == "target" and result.memory_phase == "target_verify"
    assert cap.alive_at_empty_cache == [] and capture_warnings(caplog) == []


def draft_worker_capture(tree: Path, gf: types.ModuleType | None, draft_cls: type, extend_cls: type) -> SimpleNamespace:
    """Run the tree's EagleDraftWorker._capture_cuda_graphs on a stand-in worker (an XPU-like device:
    both draft graphs captured, no CUDA-only backend imports)."""
    no = SimpleNamespace(get=lambda: False)
    extra = {
        "_is_cpu": False, "_is_hip": False, "_is_cuda": False, "_is_musa": False, "_is_npu": False, "_is_xpu": True,
        "check_cuda_graph_backend": no_graph_backend,
        "Phase": SimpleNamespace(DECODE="decode"), "Backend": SimpleNamespace(DISABLED="disabled"),
        "get_model": lambda: SimpleNamespace(model_impl="auto"),
        "get_exec": lambda: SimpleNamespace(graph=SimpleNamespace(cuda_graph_config=SimpleNamespace(
            decode=SimpleNamespace(backend="full")))),
        "get_batch_sizes_to_capture": lambda mr, width=1: ([1, 2, 4, 8], []),
        "get_available_gpu_memory": lambda *a, **k: 10.0,
        "log_info_on_rank0": lambda logger, msg: None,
        "logger": logging.getLogger("test_capture_failure"),
        "EAGLEDraftCudaGraphRunner": draft_cls, "EAGLEDraftNpuGraphRunner": draft_cls,
        "EAGLEDraftExtendCudaGraphRunner": extend_cls, "EAGLEDraftExtendNpuGraphRunner": extend_cls,
        **{name: type(name, (), {}) for name in (
            "TritonAttnBackend", "TRTLLMMLABackend", "TRTLLMHAAttnBackend", "TokenspeedMLABackend",
            "FlashInferAttnBackend", "QwenSparseAttnBackend")},
        # 0.5.23: the runner classes go through this module-level helper (in-tree platform: the builtin ones)
        "_select_spec_graph_runner_cls": lambda *, builtin_runner_cls, oot_runner_cls: builtin_runner_cls(),
        "envs": SimpleNamespace(SGLANG_DISABLE_DRAFT_EXTEND_CUDA_GRAPH=no),
        "graph_fallback": gf,
    }
    TreeImporter.use(tree)
    method = load_defs(source(tree, WORKER), ["EagleDraftWorker._capture_cuda_graphs"], extra=extra)[
        "EagleDraftWorker._capture_cuda_graphs"]
    worker = SimpleNamespace(
        speculative_num_steps=3, topk=1, speculative_num_draft_tokens=4, device="xpu", gpu_id=0,
        draft_runner=SimpleNamespace(), target_worker=SimpleNamespace(device="xpu"),
        draft_extend_attn_backend=object(), _specialized_graph_memory_usage={}, _specialized_graph_time_usage={},
    )
    method(worker)
    return worker


@pytest.mark.parametrize("tree_name", TREES)
@pytest.mark.parametrize("failing", ["draft", "draft_extend"])
def test_failed_draft_capture_runs_that_path_eager(trees, tree_name: str, failing: str, monkeypatch, caplog) -> None:
    cap = Capture(trees.get(tree_name), monkeypatch)
    draft_cls = cap.runner_cls("draft", fails=failing == "draft")
    extend_cls = cap.runner_cls("draft_extend", fails=failing == "draft_extend")
    with caplog.at_level(logging.WARNING):
        try:
            worker = draft_worker_capture(cap.tree, cap.gf, draft_cls, extend_cls)
        except Exception as e:
            pytest.fail(f"the capture failure propagated: {type(e).__name__}: {e}")
    runners = {"draft": worker.cuda_graph_runner, "draft_extend": worker.cuda_graph_runner_for_draft_extend}
    assert runners[failing] is None
    (other,) = {"draft", "draft_extend"} - {failing}
    assert runners[other].role == other  # the other graph is captured as before
    assert cap.flags_set() == []
    # One release, with the failed runner already collected (the draft graph, captured first, lives on).
    assert cap.alive_at_empty_cache == [[] if failing == "draft" else ["draft"]]
    (line,) = capture_warnings(caplog)
    assert line.startswith(f"{failing} CUDA graph capture failed (InjectedCaptureFailure: ")
    assert f"{failing} steps run eager from now on" in line


@pytest.mark.parametrize("tree_name", TREES)
def test_runners_raise_the_capture_error_with_its_cause(trees, tree_name: str) -> None:
    """Every runner's handler of a RuntimeError during capture raises CudaGraphCaptureError from it."""
    for module in RUNNER_FILES:
        handlers = [h for h in ast.walk(ast.parse(source(trees.get(tree_name), module).read_text()))
                    if isinstance(h, ast.ExceptHandler) and ast.unparse(h.type) == "RuntimeError"
                    and any("Capture cuda graph failed" in ast.unparse(n) for n in h.body)]
        assert len(handlers) == 1, module
        (raise_,) = [n for n in ast.walk(handlers[0]) if isinstance(n, ast.Raise)]
        assert ast.unparse(raise_.exc.func) == "CudaGraphCaptureError" and ast.unparse(raise_.cause) == "e", module


def fallback(tree: Path) -> types.ModuleType:
    gf = load_fallback(tree)
    assert gf is not None
    return gf


@pytest.mark.parametrize("tree_name", PATCHED)
def test_only_capture_errors_are_absorbed(trees, tree_name: str, monkeypatch) -> None:
    gf = fallback(trees.get(tree_name))
    monkeypatch.setattr(gf, "release_capture_memory", lambda: None)

    def raising(error: BaseException) -> Callable[[], Any]:
        def capture() -> Any:
            raise error
        return capture

    with pytest.raises(TypeError):  # a bug in our own code is not a failed capture
        gf.capture_or_run_eager("target", raising(TypeError("bad argument")))
    with pytest.raises(AssertionError):
        gf.capture_or_run_eager("draft", raising(AssertionError("bad shape")))
    oom = gf.CudaGraphCaptureError("Capture cuda graph failed: CUDA out of memory")
    oom.__cause__ = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    assert gf.capture_or_run_eager("target", raising(oom)) is None


def failing_capture(gf: types.ModuleType, cause: BaseException) -> Callable[[], Any]:
    """A capture that fails the way the patched runners do: CudaGraphCaptureError from ``cause``."""
    def capture() -> Any:
        raise gf.CudaGraphCaptureError(f"Capture cuda graph failed: {cause}") from cause
    return capture


@pytest.mark.parametrize("tree_name", PATCHED)
def test_in_ci_only_the_injected_failure_is_absorbed(trees, tree_name: str, monkeypatch) -> None:
    gf = fallback(trees.get(tree_name))
    monkeypatch.setattr(gf, "release_capture_memory", lambda: None)
    monkeypatch.setenv("SGLANG_IS_IN_CI", "1")
    with pytest.raises(gf.CudaGraphCaptureError):
        gf.capture_or_run_eager("target", failing_capture(
            gf, RuntimeError("operation not permitted when stream is capturing")))
    assert gf.capture_or_run_eager("target", failing_capture(gf, gf.InjectedCaptureFailure("switch"))) is None


@pytest.mark.parametrize("tree_name", PATCHED)
def test_with_several_ranks_only_the_injected_failure_is_absorbed(trees, tree_name: str, monkeypatch) -> None:
    """A real failure may hit one rank alone while the others wait in the capture: start-up must still fail."""
    import torch.distributed as dist

    gf = fallback(trees.get(tree_name))
    monkeypatch.setattr(gf, "release_capture_memory", lambda: None)
    monkeypatch.delenv("SGLANG_IS_IN_CI", raising=False)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 2)
    with pytest.raises(gf.CudaGraphCaptureError):
        gf.capture_or_run_eager("target", failing_capture(gf, RuntimeError("CUDA error: out of memory")))
    assert gf.capture_or_run_eager("draft", failing_capture(gf, gf.InjectedCaptureFailure("switch"))) is None


@pytest.mark.parametrize("tree_name", PATCHED)
def test_warning_is_logged_on_rank_zero_only(trees, tree_name: str, monkeypatch, caplog) -> None:
    gf = fallback(trees.get(tree_name))
    monkeypatch.setattr(gf, "release_capture_memory", lambda: None)

    def capture() -> Any:
        raise gf.CudaGraphCaptureError("Capture cuda graph failed") from RuntimeError("CUDA error: out of memory")

    with caplog.at_level(logging.WARNING):
        gf.configure(tp_rank=1)
        assert gf.capture_or_run_eager("draft", capture) is None
        gf.configure(tp_rank=0)
        assert gf.capture_or_run_eager("draft", capture) is None
    assert len(capture_warnings(caplog)) == 1


def switch_runner(tree: Path, gf: types.ModuleType, is_draft: bool, extend: bool) -> Any:
    """The tree's DecodeCudaGraphRunner._capture_one_stream and capture_role on a stand-in runner."""
    calls: list[int] = []

    @contextlib.contextmanager
    def patch_model(model: Any, compile: bool, num_tokens: int, tp_group: Any):
        yield lambda *a: None

    @contextlib.contextmanager
    def lora_variant(variant: Any):  # 0.5.23
        yield

    extra = {
        "get_available_gpu_memory": lambda *a, **k: 10.0,
        "get_parallel": lambda: SimpleNamespace(tp_rank=1, tp_group=None),
        "_set_capture_lora_variant": lambda variant: None,
        "torch_compile_decoration": SimpleNamespace(patch_model=patch_model),
        "InjectedCaptureFailure": gf.InjectedCaptureFailure,
        "capture_lora_variant": lora_variant, "_set_capture_attention_variant": lambda variant: None,
    }
    TreeImporter.use(tree)
    defs = load_defs(source(tree, RUNNER), ["DecodeCudaGraphRunner._capture_one_stream",
                                            "DecodeCudaGraphRunner.capture_role"], extra=extra)
    cls = type("Runner", (), {"_capture_one_stream": defs["DecodeCudaGraphRunner._capture_one_stream"],
                              "capture_role": defs["DecodeCudaGraphRunner.capture_role"]})
    runner = cls()
    runner.capture_bs, runner.compile_bs, runner.captured_req_width = [1, 2, 4], [], 4
    runner.model_runner = SimpleNamespace(device="cuda", gpu_id=0, model=None, tp_group=None, is_draft_worker=is_draft)
    runner.capture_forward_mode = SimpleNamespace(is_draft_extend_v2=lambda: extend)
    runner.capture_one_shape = lambda bs, forward, stream_idx, variant_label, *attention_variant: calls.append(bs)
    runner.record_nolora_graph, runner.attention_graph_variants = False, None  # 0.5.23
    runner._set_profile_trace_tag = lambda *args: None
    runner.calls = calls
    return runner


@pytest.mark.parametrize("tree_name", PATCHED)
@pytest.mark.parametrize("role,is_draft,extend", [("target", False, False), ("draft", True, False),
                                                  ("draft_extend", True, True)])
def test_switch_fails_the_named_capture_after_its_largest_batch(trees, tree_name, monkeypatch, role, is_draft,
                                                                extend) -> None:
    gf = fallback(trees.get(tree_name))
    runner = switch_runner(trees.get(tree_name), gf, is_draft, extend)
    assert runner.capture_role == role
    monkeypatch.setenv("SGLANG_TEST_FAIL_CUDA_GRAPH_CAPTURE", "target" if role != "target" else "draft")
    runner._capture_one_stream()
    assert runner.calls == [4, 2, 1]  # another role named: captured in full
    runner.calls.clear()
    monkeypatch.setenv("SGLANG_TEST_FAIL_CUDA_GRAPH_CAPTURE", role)
    with pytest.raises(gf.InjectedCaptureFailure, match=f"={role}, after capturing bs 4"):
        runner._capture_one_stream()
    assert runner.calls == [4]


@pytest.mark.parametrize("tree_name", PATCHED)
@pytest.mark.parametrize("failing", ["draft", "draft_extend"])
def test_the_eager_steps_after_a_failed_capture_say_capture_failed(trees, tree_name: str, failing: str,
                                                                   monkeypatch, caplog) -> None:
    cap = Capture(trees.get(tree_name), monkeypatch)
    draft_cls = cap.runner_cls("draft", fails=failing == "draft")
    extend_cls = cap.runner_cls("draft_extend", fails=failing == "draft_extend")
    draft_worker_capture(cap.tree, cap.gf, draft_cls, extend_cls)
    gf = cap.gf
    gf.configure(tp_rank=0)
    with caplog.at_level(logging.WARNING):
        gf.note_runner("draft", failing, None, 1, 4, "no draft-extend CUDA graph for this attention backend")
    (row,) = [r for r in gf.snapshot() if r["mode"] == failing]
    assert (row["role"], row["reason"], row["count"]) == ("draft", "capture_failed", 1)
    (line,) = [r.getMessage() for r in caplog.records if "runs without its CUDA graph" in r.getMessage()]
    assert f"draft {failing} runs without its CUDA graph (tokens per request 4): capture_failed (InjectedCaptureFailure: " in line
    # the path whose capture succeeded, or the target that never failed, keeps the plain reason
    (other,) = {"draft", "draft_extend"} - {failing}
    assert gf.missing_runner_reason(other, "why") == ("no_graph_runner", "why")
    assert gf.missing_runner_reason("target", "decode CUDA graph disabled") == (
        "no_graph_runner", "decode CUDA graph disabled")
    gf.reset()
    assert gf.missing_runner_reason(failing, "why") == ("no_graph_runner", "why")


@pytest.mark.parametrize("tree_name", PATCHED)
def test_a_failed_target_capture_is_the_reason_of_its_eager_steps(trees, tree_name: str, monkeypatch) -> None:
    cap = Capture(trees.get(tree_name), monkeypatch)
    capture_decode_graph(cap.tree, cap.gf)(model_runner=target_model_runner(cap.runner_cls("target", fails=True)))
    reason, detail = cap.gf.missing_runner_reason("target", "decode CUDA graph disabled")
    assert reason == "capture_failed" and detail.startswith("InjectedCaptureFailure: SGLANG_TEST_FAIL_CUDA_GRAPH_CAPTURE=target")
