"""Patch 0016: each adaptive speculation state captures its graphs only at the batch sizes routed to it.

``AdaptiveController.init_states`` asks for each candidate's graphs at the batch sizes whose
slot lists that candidate (``cuda_graph_bs_for_step``). On pristine 0.5.17 that pruning is inert
twice: ``init_states`` gets ``cuda_graph_bs_decode`` (None unless the user set it, so nothing is
pruned), and ``get_batch_sizes_to_capture`` reads the startup ``server_args`` instead of the bag
the pruned list is written to. On an H200 the steps-7 state captured all 27 batch sizes up to 64.
Pristine 0.5.23 has the same two faults (its capture list is the resolved
``cuda_graph_config.decode.bs`` of the exec bag); the tests run on its port (0015 there) too.
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sglang_trees import PATCHED, PATCHED_AND_PRISTINE, load_defs, source
from sglang_trees import trees  # noqa: F401 (a fixture)

RUNNER = "sglang.srt.model_executor.runner.base_cuda_graph_runner"
WORKER = "sglang.srt.speculative.eagle_worker_v2"
RESOLVED_BS = [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 24, 32, 48, 64]
ALL_TREES = ["patched", "pristine", "upstream", "upstream_pristine"]


def exec_bag(cuda_graph_bs_decode: list[int] | None) -> SimpleNamespace:
    graph = SimpleNamespace(cuda_graph_bs_decode=cuda_graph_bs_decode, torch_compile_max_bs=32,
                            cuda_graph_config=SimpleNamespace(decode=SimpleNamespace(bs=RESOLVED_BS)))
    return SimpleNamespace(graph=graph, overlap=SimpleNamespace(enable_two_batch_overlap=False))


def ceil_align(n: int, base: int) -> int:
    """0.5.23's helper: ``n`` rounded up to a multiple of ``base``."""
    return -(-n // base) * base


def capture_bs(tree: Path, bag_bs: list[int] | None, startup_bs: list[int] | None = None) -> list[int]:
    """``get_batch_sizes_to_capture``'s list while the exec bag holds ``bag_bs``."""
    fn = load_defs(source(tree, RUNNER), ["get_batch_sizes_to_capture"], extra={
        "get_exec": lambda: exec_bag(bag_bs),
        "get_flags": lambda: SimpleNamespace(capture=SimpleNamespace(enable_torch_compile=False)),
        # 0.5.17 passes server_args, 0.5.23 gathered_buffer_required=...
        "get_cuda_graph_batch_size_alignment": lambda *args, **kwargs: 1,
        "get_cuda_graph_max_batch_size": lambda server_args, n: n,
        # 0.5.23: no diffusion LM, and its alignment helper.
        "DllmConfig": SimpleNamespace(from_server_args=lambda server_args: None),
        "ceil_align": ceil_align,
    })["get_batch_sizes_to_capture"]
    server_args = SimpleNamespace(cuda_graph_config=SimpleNamespace(decode=SimpleNamespace(bs=RESOLVED_BS)),
                                  cuda_graph_bs_decode=startup_bs, enable_two_batch_overlap=False,
                                  torch_compile_max_bs=32)
    runner = SimpleNamespace(server_args=server_args, req_to_token_pool=SimpleNamespace(size=64))
    return fn(runner)[0]


@pytest.mark.parametrize("tree_name", PATCHED_AND_PRISTINE)
def test_a_state_captures_only_its_pruned_batch_sizes(trees, tree_name: str) -> None:
    # The steps-7 state of the default config: only the bs-1 slot (bs 1..7) reaches it.
    assert capture_bs(trees.get(tree_name), bag_bs=[1, 2, 3, 4, 5, 6, 7]) == [1, 2, 3, 4, 5, 6, 7]


@pytest.mark.parametrize("tree_name", ALL_TREES)
def test_without_an_override_every_batch_size_is_captured(trees, tree_name: str) -> None:
    assert capture_bs(trees.get(tree_name), bag_bs=None) == RESOLVED_BS
    # A user's --cuda-graph-bs-decode is the startup value on both sides: nothing more is cut.
    assert capture_bs(trees.get(tree_name), bag_bs=[1, 2, 4], startup_bs=[1, 2, 4]) == RESOLVED_BS


@pytest.mark.parametrize("tree_name", PATCHED)
def test_a_pruned_list_outside_the_resolved_one_keeps_the_full_list(trees, tree_name: str) -> None:
    assert capture_bs(trees.get(tree_name), bag_bs=[3000]) == RESOLVED_BS


class Recorder:
    """Stands in for the adaptive controller: keeps what ``init_states`` was given."""

    def __init__(self) -> None:
        self.cuda_graph_bs: Any = "not called"

    def register(self, state: Any) -> None:
        pass

    def init_states(self, cuda_graph_bs: Any = None) -> None:
        self.cuda_graph_bs = cuda_graph_bs


def init_states_list(tree: Path) -> Any:
    """What ``EAGLEWorkerV2.init_cuda_graphs`` hands ``init_states`` (graphs on, user list unset)."""
    base = SimpleNamespace(init_cuda_graphs=lambda: None)
    method = load_defs(source(tree, WORKER), ["EAGLEWorkerV2.init_cuda_graphs"], extra={
        "super": lambda: base,
        "speculative_moe_backend_context": nullcontext,
        "speculative_moe_a2a_backend_context": nullcontext,
        "draft_tp_context": lambda layout: nullcontext(),  # 0.5.23: a function of the draft's layout
        "SpecRuntimeState": lambda **kw: kw,
        "check_cuda_graph_backend": lambda phase, backend: False,
        "Phase": SimpleNamespace(DECODE="decode"), "Backend": SimpleNamespace(DISABLED="disabled"),
        "get_exec": lambda: exec_bag(None),
    })["EAGLEWorkerV2.init_cuda_graphs"]
    draft = SimpleNamespace(draft_tp_context=lambda group: nullcontext(), draft_runner=SimpleNamespace(tp_group=None),
                            parallel_layout=None,
                            draft_attn_backend=None, cuda_graph_runner=None, draft_extend_attn_backend=None,
                            cuda_graph_runner_for_draft_extend=None,
                            cuda_graph_runner_for_draft_extend_kv_only=None)  # 0034
    target = SimpleNamespace(model_runner=SimpleNamespace(attn_backend=None, decode_cuda_graph_runner=None))
    worker = SimpleNamespace(adaptive_controller=Recorder(), _draft_worker=draft, _target_worker=target,
                             speculative_num_steps=3, speculative_num_draft_tokens=4)
    method(worker)
    return worker.adaptive_controller.cuda_graph_bs


@pytest.mark.parametrize("tree_name", PATCHED_AND_PRISTINE)
def test_init_states_gets_the_resolved_batch_sizes_to_prune(trees, tree_name: str) -> None:
    assert init_states_list(trees.get(tree_name)) == RESOLVED_BS


def test_the_gpu_test_reads_the_capture_lines_sglang_logs(tmp_path: Path) -> None:
    """``test/gpu/test_adaptive_gpu.py`` checks 0016 from these log lines (copied from an H200 run)."""
    from test_adaptive_gpu import draft_extend_captures

    log = tmp_path / "engine.log"
    log.write_text(
        "[2026-12-01 03:52:26] Capture draft extend CUDA graph begin. backend=full, num_tokens_per_req=4, "
        "bs=[1, 2, 3, 4, 5, 6, 7, 8], avail mem=18.23 GB\n"
        "[2026-12-01 03:52:37] Capture draft extend CUDA graph begin. backend=full, num_tokens_per_req=8, "
        "bs=[1, 2, 3, 4, 5, 6, 7], avail mem=17.49 GB\n")
    assert draft_extend_captures(log) == {4: list(range(1, 9)), 8: list(range(1, 8))}
