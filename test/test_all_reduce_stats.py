"""All-reduce path telemetry of the patched SGLang 0.5.17 tree (patch 0002), on CPU.

The counting module and GroupCoordinator come from the patched tree; the
all-reduces in the dispatch tests are real torch.distributed (gloo) calls on a
one-process group. Stream capture cannot happen on CPU, so the capture tests
set the module's capture probe (the one CUDA query it makes) to True.
"""

from __future__ import annotations

import logging
import socket

import pytest
import torch
import torch.distributed as dist

from sglang_trees import TreeImporter, load_defs, source, trees  # noqa: F401 (trees: a module-scoped fixture)

STATS = "sglang.srt.distributed.all_reduce_stats"


@pytest.fixture
def stats(trees):
    module = TreeImporter.module(trees.patched, STATS)
    module.reset()
    module.configure(enabled=True, log_interval=3600.0)
    yield module
    module.configure(enabled=False)
    module.reset()


@pytest.fixture(scope="module")
def ForwardMode(trees):
    path = source(trees.patched, "sglang.srt.model_executor.forward_batch_info")
    return load_defs(path, ["ForwardMode"])["ForwardMode"]


def counts(stats) -> dict[tuple[str, str, str, str], int]:
    return {(c["mode"], c["source"], c["placement"], c["method"]): c["count"] for c in stats.snapshot()["counts"]}


def test_disabled_scopes_are_free_and_record_nothing(trees, ForwardMode) -> None:
    stats = TreeImporter.module(trees.patched, STATS)
    stats.configure(enabled=False)
    stats.reset()
    scope = stats.forward_scope(ForwardMode.TARGET_VERIFY, False)
    assert scope is stats.forward_scope(ForwardMode.DECODE, True), "one shared null context when off"
    with scope, stats.capture_scope(ForwardMode.DECODE, False), stats.graph_scope("k"):
        stats.on_replay("k")
    assert stats.snapshot() == {"enabled": False, "counts": [], "graph_replays": {}}


@pytest.mark.parametrize(
    "mode, is_draft, label",
    [
        ("DECODE", False, "decode"),
        ("TARGET_VERIFY", False, "target_verify"),
        ("EXTEND", False, "extend"),
        ("MIXED", False, "extend"),
        ("IDLE", False, "idle"),
        ("DECODE", True, "draft"),
        ("DRAFT_EXTEND_V2", True, "draft"),
    ],
)
def test_forward_scope_labels_by_mode(stats, ForwardMode, mode: str, is_draft: bool, label: str) -> None:
    with stats.forward_scope(ForwardMode[mode], is_draft):
        stats.record("in_place", "torch")
    stats.record("out_of_place", "ca")  # outside any forward
    assert counts(stats) == {(label, "eager", "in_place", "torch"): 1, ("none", "eager", "out_of_place", "ca"): 1}


def test_graph_replays_count_the_all_reduces_captured_in_that_graph(stats, ForwardMode, monkeypatch) -> None:
    with stats.capture_scope(ForwardMode.TARGET_VERIFY, False):
        stats.record("in_place", "pynccl")  # warmup run before the capture
        monkeypatch.setattr(stats, "_is_capturing", lambda: True)
        with stats.graph_scope(("runner", 4)):
            for _ in range(3):
                stats.record("in_place", "pynccl")
            stats.record("out_of_place", "ca")
        with stats.graph_scope(("runner", 8)):
            stats.record("in_place", "pynccl")
        monkeypatch.setattr(stats, "_is_capturing", lambda: False)
    assert counts(stats) == {("target_verify", "warmup", "in_place", "pynccl"): 1}, "capture executes nothing"

    with stats.forward_scope(ForwardMode.TARGET_VERIFY, False):
        stats.on_replay(("runner", 4))
        stats.on_replay(("runner", 4))
    with stats.forward_scope(ForwardMode.DECODE, False):
        stats.on_replay(("runner", 8))
        stats.on_replay(("unknown", 1))
    assert counts(stats) == {
        ("target_verify", "warmup", "in_place", "pynccl"): 1,
        ("target_verify", "replay", "in_place", "pynccl"): 6,
        ("target_verify", "replay", "out_of_place", "ca"): 2,
        ("decode", "replay", "in_place", "pynccl"): 1,
    }
    assert stats.snapshot()["graph_replays"] == {"target_verify": 2, "decode": 2}


def test_unattributed_capture_is_counted_once(stats, ForwardMode, monkeypatch) -> None:
    with stats.capture_scope(ForwardMode.DECODE, True):
        monkeypatch.setattr(stats, "_is_capturing", lambda: True)
        stats.record("in_place", "pynccl")
    assert counts(stats) == {("draft", "capture", "in_place", "pynccl"): 1}


def test_recapture_replaces_the_graph_record(stats, ForwardMode, monkeypatch) -> None:
    monkeypatch.setattr(stats, "_is_capturing", lambda: True)
    for n in (5, 2):
        with stats.capture_scope(ForwardMode.DECODE, False), stats.graph_scope("g"):
            for _ in range(n):
                stats.record("in_place", "torch")
    monkeypatch.setattr(stats, "_is_capturing", lambda: False)
    with stats.forward_scope(ForwardMode.DECODE, False):
        stats.on_replay("g")
    assert counts(stats) == {("decode", "replay", "in_place", "torch"): 2}


def test_log_once_per_interval_on_rank_zero(stats, ForwardMode, caplog) -> None:
    caplog.set_level(logging.INFO, logger=STATS)
    stats.configure(enabled=True, log_interval=10.0, tp_rank=0)
    stats.record("in_place", "torch")
    stats.maybe_report(now=0.0)
    assert not caplog.records, "not before the interval"
    stats.maybe_report(now=1e12)
    stats.maybe_report(now=1e12 + 1)
    assert [r.getMessage() for r in caplog.records] == ["All-reduce stats: none/eager: in_place.torch=1"]
    caplog.clear()
    stats.configure(enabled=True, log_interval=0.0, tp_rank=1)
    stats.maybe_report()
    assert not caplog.records, "only TP rank 0 logs"


def test_forward_end_reports_when_due(stats, ForwardMode, caplog) -> None:
    caplog.set_level(logging.INFO, logger=STATS)
    stats.configure(enabled=True, log_interval=0.0, tp_rank=0)
    with stats.forward_scope(ForwardMode.TARGET_VERIFY, False):
        stats.record("out_of_place", "pynccl")
    assert caplog.records[-1].getMessage() == "All-reduce stats: target_verify/eager: out_of_place.pynccl=1"


def test_prometheus_export_sends_increments(stats, ForwardMode) -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    stats.configure(enabled=True, log_interval=0.0, tp_rank=3, export_prometheus=True)
    try:
        labels = dict(mode="target_verify", source="eager", placement="in_place", method="torch", tp_rank="3")

        def exported():
            return prometheus_client.REGISTRY.get_sample_value("sglang:all_reduce_total", labels)

        with stats.forward_scope(ForwardMode.TARGET_VERIFY, False):
            stats.record("in_place", "torch")
            stats.record("in_place", "torch")
        assert exported() == 2
        with stats.forward_scope(ForwardMode.TARGET_VERIFY, False):
            stats.record("in_place", "torch")
        assert exported() == 3, "each report adds only what is new"
    finally:
        prometheus_client.REGISTRY.unregister(stats._prom_counter)
        stats._prom_counter = None


# -- the dispatch points in GroupCoordinator ----------------------------------


@pytest.fixture(scope="module")
def gloo_group():
    """A one-process gloo group on the loopback interface, torn down after the module."""
    if dist.is_initialized():
        yield dist.group.WORLD
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    yield dist.group.WORLD
    dist.destroy_process_group()


def coordinator(trees, group, **comms):
    ps = TreeImporter.module(trees.patched, "sglang.srt.distributed.parallel_state")
    coord = object.__new__(ps.GroupCoordinator)
    coord.world_size, coord.local_size, coord.device_group = 2, 1, group  # 2 ranks: no single-rank bypass
    coord.ca_comm = coord.qr_comm = coord.pymscclpp_comm = coord.torch_symm_mem_comm = coord.pynccl_comm = None
    coord.hpu_communicator = coord.xpu_communicator = coord.npu_communicator = None
    for name, comm in comms.items():
        setattr(coord, name, comm)
    return coord


class FakeCustomAllReduce:
    disabled = False

    def should_custom_ar(self, inp: torch.Tensor) -> bool:
        return True

    def custom_all_reduce(self, inp: torch.Tensor) -> torch.Tensor:
        return inp.clone()


def test_cpu_all_reduce_is_counted(stats, trees, gloo_group, ForwardMode) -> None:
    coord = coordinator(trees, gloo_group)
    x = torch.ones(4)
    with stats.forward_scope(ForwardMode.TARGET_VERIFY, False):
        assert coord.all_reduce(x) is x
    assert torch.equal(x, torch.ones(4)), "one rank: the sum is the input"
    assert counts(stats) == {("target_verify", "eager", "in_place", "torch"): 1}


def test_in_place_and_out_of_place_dispatch_are_counted(stats, trees, gloo_group, ForwardMode) -> None:
    coord = coordinator(trees, gloo_group)
    with stats.forward_scope(ForwardMode.DECODE, False):
        coord._all_reduce_in_place(torch.ones(4))
        # "auto" with no accelerated communicator: a clone reduced in place.
        out = coord._all_reduce_out_place(torch.ones(4), "auto")
    assert torch.equal(out, torch.ones(4))
    ca = coordinator(trees, gloo_group, ca_comm=FakeCustomAllReduce())
    with stats.forward_scope(ForwardMode.TARGET_VERIFY, False):
        method = ca._resolve_outplace_all_reduce_method(torch.ones(4))
        ca._all_reduce_out_place(torch.ones(4), method)
    assert counts(stats) == {
        ("decode", "eager", "in_place", "torch"): 2,
        ("target_verify", "eager", "out_of_place", "ca"): 1,
    }


def test_dispatch_records_nothing_when_disabled(trees, gloo_group, ForwardMode) -> None:
    stats = TreeImporter.module(trees.patched, STATS)
    stats.configure(enabled=False)
    stats.reset()
    coord = coordinator(trees, gloo_group)
    coord.all_reduce(torch.ones(4))
    coord._all_reduce_in_place(torch.ones(4))
    assert stats.snapshot()["counts"] == []


def test_scheduler_snapshot_is_json_ready(stats, ForwardMode) -> None:
    import json

    with stats.forward_scope(ForwardMode.TARGET_VERIFY, False):
        stats.record("in_place", "torch")
    assert json.loads(json.dumps(stats.snapshot()))["counts"][0]["mode"] == "target_verify"


def test_mode_label_matches_forward_mode_methods(trees, ForwardMode) -> None:
    stats = TreeImporter.module(trees.patched, STATS)
    labels = {m.name: stats.mode_label(m, False) for m in ForwardMode}
    assert labels["TARGET_VERIFY"] == "target_verify" and labels["DECODE"] == "decode"
    assert {v for k, v in labels.items() if k not in ("TARGET_VERIFY", "DECODE", "IDLE")} == {"extend"}
