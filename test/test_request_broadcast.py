"""Requests reach the other TP ranks over the shared-memory queue (patch 0011), on CPU.

Runs the tree's (0.5.17 and the upstream port, 0.5.23) ``SchedulerRequestReceiver._broadcast_reqs_across_ranks`` (and, where the tree
has it, ``_broadcast_via_message_queue``), executed from its source file, on a stand-in receiver
at TP 2 without DP attention. Its TP group has the shared-memory ``mq_broadcaster`` SGLang builds
by default (SGLANG_USE_MESSAGE_QUEUE_BROADCASTER). The patched tree must hand the requests to
``tp_group.broadcast_object`` (the queue) and make no gloo ``broadcast_pyobj`` round trip; pristine
0.5.17 and 0.5.23 make the gloo round trip every scheduler step (xfail). The gloo path stays where the queue
cannot serve or should not: no queue, the switch off, or ``--sleep-on-idle`` (the queue's readers
spin while they wait).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from sglang_trees import PATCHED, PATCHED_AND_PRISTINE, TreeImporter, load_defs, source, trees  # noqa: F401

RECEIVER = "sglang.srt.managers.scheduler_components.request_receiver"
SWITCH = "SGLANG_SCHEDULER_BROADCAST_REQS_VIA_MQ"
METHODS = ["SchedulerRequestReceiver._broadcast_reqs_across_ranks",
           "SchedulerRequestReceiver._broadcast_via_message_queue"]


class TPGroup:
    """Rank 0 of a TP group of 2; records how requests were broadcast."""

    rank = 0
    ranks = [0, 1]
    cpu_group = "gloo-group"  # 0.5.23 passes the group's own gloo group

    def __init__(self, has_queue: bool) -> None:
        self.mq_broadcaster = object() if has_queue else None
        self.calls: list[str] = []

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        assert self.mq_broadcaster is not None and src == 0
        self.calls.append("message_queue")
        return obj


def broadcast(tree: Path, reqs: list[Any], has_queue: bool = True, sleep_on_idle: bool = False) -> list[str]:
    """How the tree's receiver at TP rank 0 broadcasts ``reqs``: the transports it used, in order."""
    TreeImporter.use(tree)
    text = source(tree, RECEIVER).read_text()
    names = [m for m in METHODS if f"def {m.rpartition('.')[2]}(" in text]
    group = TPGroup(has_queue)

    def broadcast_pyobj(data: Any, rank: int, dist_group: Any = None, src: int = 0) -> Any:
        group.calls.append("gloo")
        return data

    parallel = SimpleNamespace(enable_dp_attention=False, attn_dp_enabled=False, tp_size=2, tp_group=group)
    defs = load_defs(source(tree, RECEIVER), names, {
        "broadcast_pyobj": broadcast_pyobj,
        "get_parallel": lambda: parallel,  # 0.5.23 reads the TP group and size from here
        "get_device": lambda: SimpleNamespace(sleep_on_idle=sleep_on_idle),  # 0.5.23's --sleep-on-idle
        # the rest of 0.5.23's runtime_context import, so that running it does not rebind the two above
        "get_exec": lambda: SimpleNamespace(moe=SimpleNamespace(is_ep_scale_joiner=False)),
        "get_disagg": lambda: SimpleNamespace(),
    })
    methods = {name.rpartition(".")[2]: fn for name, fn in defs.items()}
    receiver = SimpleNamespace(
        ps=SimpleNamespace(tp_size=2, attn_tp_rank=0, attn_cp_rank=0, pp_rank=0),
        tp_group=group, tp_cpu_group="gloo-group",
        server_args=SimpleNamespace(sleep_on_idle=sleep_on_idle),
    )
    for name, fn in methods.items():
        setattr(receiver, name, fn.__get__(receiver))
    assert receiver._broadcast_reqs_across_ranks(reqs) == reqs
    return group.calls


@pytest.mark.parametrize("tree_name", PATCHED_AND_PRISTINE)
@pytest.mark.parametrize("reqs", [[], ["req-a", "req-b"]], ids=["no-requests", "two-requests"])
def test_requests_go_over_the_shared_memory_queue(trees, tree_name: str, reqs: list[str]) -> None:
    assert broadcast(trees.get(tree_name), reqs) == ["message_queue"]


@pytest.mark.parametrize("tree_name", ["patched", "pristine", "upstream", "upstream_pristine"])
def test_gloo_without_a_queue(trees, tree_name: str) -> None:
    assert broadcast(trees.get(tree_name), ["req"], has_queue=False) == ["gloo"]


@pytest.mark.parametrize("tree_name", PATCHED)
def test_gloo_when_switched_off(trees, tree_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SWITCH, "false")
    assert broadcast(trees.get(tree_name), ["req"]) == ["gloo"]


@pytest.mark.parametrize("tree_name", PATCHED)
def test_gloo_when_the_server_sleeps_on_idle(trees, tree_name: str) -> None:
    assert broadcast(trees.get(tree_name), ["req"], sleep_on_idle=True) == ["gloo"]
