"""The 0.5.9 backport (patches/backport/v0.5.9): verify is never replayed through
the piecewise CUDA graph, a verify that runs eager says why once, and the
piecewise flags are restored in ``finally``.

Runs the tree's own code: ``piecewise_context_manager.py`` is imported from its
file (it needs only torch), ``ModelRunner.forward_extend``,
``PiecewiseCudaGraphRunner.can_run`` and ``ForwardMode`` are executed from
their source. Every test also runs against pristine 0.5.9, where the ones
marked with the bug must fail (xfail strict).
"""

from __future__ import annotations

import functools
import importlib.util
import types
from types import SimpleNamespace

import pytest
import torch

from sglang_trees import load_defs, source, trees  # noqa: F401 (trees: a module-scoped fixture)

SHOWS_THE_BUG = pytest.mark.xfail(
    strict=True, raises=(AssertionError, pytest.fail.Exception), reason="pristine 0.5.9 has the bug"
)
BACKPORT_AND_PRISTINE = ["backport", pytest.param("backport_pristine", marks=SHOWS_THE_BUG)]
# Pristine 0.5.9 asks the piecewise runner about a verify with logprobs and its can_run zips
# extend_logprob_start_lens_cpu, which a TARGET_VERIFY batch does not have (None): TypeError.
CRASHES_ON_PRISTINE = pytest.mark.xfail(strict=True, raises=TypeError, reason="pristine 0.5.9 raises")


class Calls:
    def __init__(self) -> None:
        self.names: list[str] = []

    def __call__(self, name: str, result=None):
        def record(*args, **kwargs):
            self.names.append(name)
            return result

        return record


class Backport:
    """ModelRunner.forward_extend of one 0.5.9 tree, with a real PCG can_run."""

    def __init__(
        self, tree, max_num_tokens: int = 2048, graph_runner: object = None, tp_rank: int = 0
    ) -> None:
        defs = load_defs(source(tree, "sglang.srt.model_executor.forward_batch_info"), ["ForwardMode"])
        self.ForwardMode = defs["ForwardMode"]
        can_run = load_defs(
            source(tree, "sglang.srt.model_executor.piecewise_cuda_graph_runner"), ["PiecewiseCudaGraphRunner.can_run"]
        )["PiecewiseCudaGraphRunner.can_run"]
        forward_extend = load_defs(
            source(tree, "sglang.srt.model_executor.model_runner"), ["ModelRunner.forward_extend"]
        )["ModelRunner.forward_extend"]
        self.calls = Calls()
        pcg = SimpleNamespace(max_num_tokens=max_num_tokens, replay=self.calls("pcg_replay", "graph"))
        pcg.can_run = types.MethodType(can_run, pcg)
        self.pcg = pcg
        self.runner = SimpleNamespace(
            support_pp=False,
            is_generation=True,
            tp_rank=tp_rank,
            graph_runner=graph_runner,
            piecewise_cuda_graph_runner=pcg,
            attn_backend=SimpleNamespace(init_forward_metadata=self.calls("init_metadata")),
            model=SimpleNamespace(forward=self.calls("eager_forward", "eager")),
        )
        # print_warning_once is an lru_cache over the message: one line per distinct text.
        self.warnings: list[str] = []
        self.bind_eager_verify_log(tree)
        self.forward_extend = types.MethodType(forward_extend, self.runner)

    def bind_eager_verify_log(self, tree) -> None:
        """The backport's ModelRunner._log_eager_verify_once; pristine 0.5.9 has none."""
        try:
            log_once = load_defs(
                source(tree, "sglang.srt.model_executor.model_runner"),
                ["ModelRunner._log_eager_verify_once"],
                extra={"print_warning_once": functools.lru_cache(None)(self.warnings.append)},
            )["ModelRunner._log_eager_verify_once"]
        except LookupError:
            return
        self.runner._log_eager_verify_once = types.MethodType(log_once, self.runner)

    def batch(self, mode: str, num_tokens: int = 16, return_logprob: bool = False, bs: int | None = None):
        return SimpleNamespace(
            forward_mode=self.ForwardMode[mode],
            batch_size=bs if bs is not None else max(1, num_tokens // 4),
            input_ids=torch.zeros(num_tokens, dtype=torch.int64),
            positions=torch.arange(num_tokens),
            input_embeds=None,
            return_logprob=return_logprob,
            extend_logprob_start_lens_cpu=None if mode == "TARGET_VERIFY" else [0],
            extend_seq_lens_cpu=None if mode == "TARGET_VERIFY" else [num_tokens],
        )


@pytest.mark.parametrize("tree_name", BACKPORT_AND_PRISTINE)
@pytest.mark.parametrize("num_tokens", [4, 16, 192])
def test_target_verify_is_not_replayed_through_pcg(trees, tree_name: str, num_tokens: int) -> None:
    model = Backport(trees.get(tree_name))
    batch = model.batch("TARGET_VERIFY", num_tokens)
    assert model.ForwardMode.TARGET_VERIFY.is_extend(), "why verify reaches forward_extend at all"
    assert model.forward_extend(batch) == ("eager", False)
    assert model.calls.names == ["init_metadata", "eager_forward"]
    assert model.pcg.can_run(batch) is False


@pytest.mark.parametrize("tree_name", ["backport", "backport_pristine"])
@pytest.mark.parametrize("mode", ["EXTEND", "MIXED"])
def test_extend_still_replays_pcg(trees, tree_name: str, mode: str) -> None:
    model = Backport(trees.get(tree_name))
    assert model.forward_extend(model.batch(mode, 16)) == ("graph", True)
    assert model.calls.names == ["pcg_replay"]


@pytest.mark.parametrize("tree_name", ["backport", "backport_pristine"])
def test_extend_above_pcg_size_runs_eager(trees, tree_name: str) -> None:
    model = Backport(trees.get(tree_name), max_num_tokens=8)
    assert model.forward_extend(model.batch("EXTEND", 16)) == ("eager", False)


@pytest.mark.parametrize("tree_name", ["backport", pytest.param("backport_pristine", marks=CRASHES_ON_PRISTINE)])
def test_verify_with_logprobs_misses_pcg_without_raising(trees, tree_name: str) -> None:
    model = Backport(trees.get(tree_name))
    batch = model.batch("TARGET_VERIFY", 16, return_logprob=True)
    assert model.forward_extend(batch) == ("eager", False)


CAPTURED_MAX_BS = SimpleNamespace(max_bs=48)


@pytest.mark.parametrize("tree_name", BACKPORT_AND_PRISTINE)
def test_eager_verify_above_captured_bs_says_so_once(trees, tree_name: str) -> None:
    model = Backport(trees.get(tree_name), graph_runner=CAPTURED_MAX_BS)
    for bs in (49, 64, 49):
        assert model.forward_extend(model.batch("TARGET_VERIFY", bs * 4, bs=bs)) == ("eager", False)
    assert len(model.warnings) == 1, model.warnings
    assert "TARGET_VERIFY runs eagerly" in model.warnings[0]
    assert "largest captured, 48" in model.warnings[0]
    assert "--cuda-graph-max-bs to at least --max-running-requests" in model.warnings[0]


@pytest.mark.parametrize("tree_name", BACKPORT_AND_PRISTINE)
def test_eager_verify_names_each_cause_once(trees, tree_name: str) -> None:
    no_runner = Backport(trees.get(tree_name), graph_runner=None)
    declined = Backport(trees.get(tree_name), graph_runner=CAPTURED_MAX_BS)
    for _ in range(2):
        no_runner.forward_extend(no_runner.batch("TARGET_VERIFY", 16, bs=4))
        declined.forward_extend(declined.batch("TARGET_VERIFY", 16, bs=4))
    assert len(no_runner.warnings) == 1 and "--disable-cuda-graph" in no_runner.warnings[0]
    assert len(declined.warnings) == 1 and "declined the batch" in declined.warnings[0]


@pytest.mark.parametrize("tree_name", ["backport", "backport_pristine"])
def test_eager_verify_log_only_on_rank0_and_only_for_verify(trees, tree_name: str) -> None:
    rank1 = Backport(trees.get(tree_name), graph_runner=None, tp_rank=1)
    rank1.forward_extend(rank1.batch("TARGET_VERIFY", 16, bs=4))
    extend = Backport(trees.get(tree_name), max_num_tokens=8, graph_runner=None)
    extend.forward_extend(extend.batch("EXTEND", 16))
    assert rank1.warnings == [] and extend.warnings == []


def context_manager(tree) -> types.ModuleType:
    path = source(tree, "sglang.srt.compilation.piecewise_context_manager")
    spec = importlib.util.spec_from_file_location(f"pcm_{tree.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCOPES = {
    "enable_piecewise_cuda_graph": ("is_in_piecewise_cuda_graph", (), True),
    "enable_piecewise_cuda_graph_compile": ("is_in_pcg_torch_compile", (), True),
    "set_pcg_capture_stream": ("get_pcg_capture_stream", ("stream",), "stream"),
}


@pytest.mark.parametrize("tree_name", BACKPORT_AND_PRISTINE)
@pytest.mark.parametrize("scope", sorted(SCOPES))
def test_flag_restored_when_replay_raises(trees, tree_name: str, scope: str) -> None:
    pcm = context_manager(trees.get(tree_name))
    getter, args, on = SCOPES[scope]
    with pytest.raises(RuntimeError):
        with getattr(pcm, scope)(*args):
            assert getattr(pcm, getter)() == on
            raise RuntimeError("replay failed")
    assert not getattr(pcm, getter)(), "an exception left the process-global flag set"


@pytest.mark.parametrize("tree_name", BACKPORT_AND_PRISTINE)
def test_nested_piecewise_scope_restores_outer(trees, tree_name: str) -> None:
    pcm = context_manager(trees.get(tree_name))
    with pcm.enable_piecewise_cuda_graph():
        with pcm.enable_piecewise_cuda_graph():
            pass
        assert pcm.is_in_piecewise_cuda_graph()
    assert not pcm.is_in_piecewise_cuda_graph()
