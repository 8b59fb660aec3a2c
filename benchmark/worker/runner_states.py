"""The runners a micro process switches between: one per verify shape (topk, k) and one for decode.

The ModelRunner starts with speculation on (EAGLE3) at the largest k, so its own
``init_cuda_graphs`` captures that verify shape ("init") and sizes the shared logits
and eager buffers for every smaller k. Each other (topk, k) gets a fresh attention
backend and a DecodeCudaGraphRunner built while the resolved config says that topk
and k ("built"), the way ``--speculative-adaptive`` builds its extra target-verify
runners (EAGLEWorkerV2.build_adaptive_runtime_state). The decode runner is built the
same way with the runner's speculative algorithm set to NONE, so it captures plain
DECODE graphs. Activating a state installs its backend and graph runner on the
ModelRunner, so ``ModelRunner.forward`` picks graph or eager exactly as in serving.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Iterator

from sglang.srt.runtime_context import get_context
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

from benchmark.worker.tree import draft_tree

SOURCE = "sglang-fastpath.benchmark"


def steps_for(k: int, topk: int) -> int:
    """Draft steps of a (k, topk) tree: k - 1 for a chain, the tree depth otherwise."""
    return k - 1 if topk == 1 else max(1, draft_tree(k, topk).max_depth)


def set_spec(mr: Any, *, topk: int, k: int) -> None:
    """Make the resolved config (server_args and the context's spec bag) say topk and k."""
    fields = {"speculative_eagle_topk": topk, "speculative_num_draft_tokens": k,
              "speculative_num_steps": steps_for(k, topk)}
    mr.server_args.override(SOURCE, **fields)
    context = get_context()
    if context.server_args is not mr.server_args:
        context.server_args.override(SOURCE, **fields)
    context.override(SOURCE, **fields)


@dataclass
class RunnerState:
    mode: str  # "decode" or "verify"
    k: int
    topk: int
    attn_backend: Any
    graph_runner: Any | None
    spec_algorithm: Any
    origin: str  # "init": ModelRunner.init_cuda_graphs; "built": by this harness
    errors: list[str] = field(default_factory=list)

    @property
    def graph_bs(self) -> list[int]:
        return list(getattr(self.graph_runner, "capture_bs", []) or [])

    def activate(self, mr: Any) -> None:
        if self.mode == "verify":
            set_spec(mr, topk=self.topk, k=self.k)
        mr.spec_algorithm = self.spec_algorithm
        mr.attn_backend = self.attn_backend
        mr.decode_cuda_graph_runner = self.graph_runner

    def describe(self) -> dict[str, Any]:
        return {"mode": self.mode, "k": self.k, "topk": self.topk, "origin": self.origin,
                "graph_bs": self.graph_bs, "backend": type(self.attn_backend).__name__}


@contextlib.contextmanager
def _new_workspace(mr: Any) -> Iterator[None]:
    saved = mr.init_new_workspace
    try:
        yield
    finally:
        mr.init_new_workspace = saved


def _build(mr: Any, *, mode: str, k: int, topk: int, capture: bool) -> RunnerState:
    with _new_workspace(mr):
        backend = mr._get_attention_backend(init_new_workspace=True)
    runner = None
    if capture:
        runner_cls = mr._decode_cuda_graph_runner_cls()
        if mode == "verify":
            runner = runner_cls(mr, attn_backend=backend, speculative_num_steps=steps_for(k, topk),
                                speculative_num_draft_tokens=k)
        else:
            runner = runner_cls(mr, attn_backend=backend)
    return RunnerState(mode, k, topk, backend, runner, mr.spec_algorithm, "built")


def build_states(mr: Any, *, ks: list[int], topks: list[int], capture: bool,
                 on_error: Any) -> tuple[RunnerState, list[RunnerState]]:
    """(init state, every state to measure). ``on_error(where, exc)`` reports a state that failed."""
    spec_algorithm = mr.spec_algorithm
    k_init, topk_init = max(ks), topks[0]
    init = RunnerState("verify", k_init, topk_init, mr.attn_backend, mr.decode_cuda_graph_runner,
                       spec_algorithm, "init")
    states: list[RunnerState] = []
    mr.spec_algorithm = SpeculativeAlgorithm.NONE
    try:
        states.append(_build(mr, mode="decode", k=1, topk=0, capture=capture))
    except Exception as exc:  # noqa: BLE001 - reported, the verify states still run
        on_error("build decode runner", exc)
    finally:
        mr.spec_algorithm = spec_algorithm
    for topk in topks:
        for k in ks:
            if (k, topk) == (k_init, topk_init):
                states.append(init)
                continue
            try:
                set_spec(mr, topk=topk, k=k)
                states.append(_build(mr, mode="verify", k=k, topk=topk, capture=capture))
            except Exception as exc:  # noqa: BLE001 - reported, the other shapes still run
                on_error(f"build verify runner k={k} topk={topk}", exc)
    init.activate(mr)
    return init, states
