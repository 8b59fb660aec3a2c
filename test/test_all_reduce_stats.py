"""All-reduce path telemetry of the patched SGLang trees (patch 0002), on CPU.

Every test runs on the 0.5.17 series' tree and on the upstream port's (0.5.23).

The counting module and GroupCoordinator come from the patched tree; the
all-reduces in the dispatch tests are real torch.distributed (gloo) calls on a
one-process group. Stream capture cannot happen on CPU, so the capture tests
set the module's capture probe (the one CUDA query it makes) to True.
Counts are keyed by mode, source, placement, method and message size bucket
(``bytes_le``); the small tensors of the path tests (16 B) are ``smaller``.
"""

from __future__ import annotations

import logging
import socket

import pytest
import torch
import torch.distributed as dist

from sglang_trees import PATCHED, TreeImporter, load_defs, source, trees  # noqa: F401 (trees: a module-scoped fixture)

STATS = "sglang.srt.distributed.all_reduce_stats"
Key = tuple[str, str, str, str, str]  # mode, source, placement, method, bytes_le
SMALL = torch.ones(4)  # 16 B: bucket "smaller"
KIB4 = torch.zeros(2048, dtype=torch.bfloat16)  # 4 KiB: bucket "4096"
KIB40 = torch.zeros(10240, dtype=torch.float32)  # 40 KiB: bucket "65536"


@pytest.fixture(scope="module", params=PATCHED)
def tree(request, trees):
    """The patched tree under test: 0.5.17 + patches/series, then the upstream port."""
    return trees.get(request.param)


@pytest.fixture
def stats(tree):
    module = TreeImporter.module(tree, STATS)
    module.reset()
    module.configure(enabled=True, log_interval=3600.0)
    yield module
    module.configure(enabled=False)
    module.reset()


@pytest.fixture(scope="module")
def ForwardMode(tree):
    path = source(tree, "sglang.srt.model_executor.forward_batch_info")
    return load_defs(path, ["ForwardMode"])["ForwardMode"]


def counts(stats) -> dict[Key, int]:
    rows = stats.snapshot()["counts"]
    got = {(c["mode"], c["source"], c["placement"], c["method"], c["bytes_le"]): c["count"] for c in rows}
    assert len(got) == len(rows), f"one row per key: {rows}"
    return got


def test_disabled_scopes_are_free_and_record_nothing(tree, ForwardMode) -> None:
    stats = TreeImporter.module(tree, STATS)
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
        ("DRAFT_EXTEND_V2", True, "draft_extend"),
    ],
)
def test_forward_scope_labels_by_mode(stats, ForwardMode, mode: str, is_draft: bool, label: str) -> None:
    with stats.forward_scope(ForwardMode[mode], is_draft):
        stats.record("in_place", "torch", SMALL)
    stats.record("out_of_place", "ca", SMALL)  # outside any forward
    assert counts(stats) == {
        (label, "eager", "in_place", "torch", "smaller"): 1,
        ("none", "eager", "out_of_place", "ca", "smaller"): 1,
    }


def test_graph_replays_count_the_all_reduces_captured_in_that_graph(stats, ForwardMode, monkeypatch) -> None:
    with stats.capture_scope(ForwardMode.TARGET_VERIFY, False):
        stats.record("in_place", "pynccl", SMALL)  # warmup run before the capture
        monkeypatch.setattr(stats, "_is_capturing", lambda: True)
        with stats.graph_scope(("runner", 4)):
            for _ in range(3):
                stats.record("in_place", "pynccl", SMALL)
            stats.record("out_of_place", "ca", SMALL)
        with stats.graph_scope(("runner", 8)):
            stats.record("in_place", "pynccl", SMALL)
        monkeypatch.setattr(stats, "_is_capturing", lambda: False)
    assert counts(stats) == {("target_verify", "warmup", "in_place", "pynccl", "smaller"): 1}, (
        "capture executes nothing"
    )

    with stats.forward_scope(ForwardMode.TARGET_VERIFY, False):
        stats.on_replay(("runner", 4))
        stats.on_replay(("runner", 4))
    with stats.forward_scope(ForwardMode.DECODE, False):
        stats.on_replay(("runner", 8))
        stats.on_replay(("unknown", 1))
    assert counts(stats) == {
        ("target_verify", "warmup", "in_place", "pynccl", "smaller"): 1,
        ("target_verify", "replay", "in_place", "pynccl", "smaller"): 6,
        ("target_verify", "replay", "out_of_place", "ca", "smaller"): 2,
        ("decode", "replay", "in_place", "pynccl", "smaller"): 1,
    }
    assert stats.snapshot()["graph_replays"] == {"target_verify": 2, "decode": 2}


def test_a_runner_replayed_outside_a_forward_names_its_mode(stats, ForwardMode, monkeypatch) -> None:
    """The EAGLE draft runners replay outside ModelRunner.forward: their replays carry their own mode."""
    with stats.capture_scope(ForwardMode.DRAFT_EXTEND_V2, True):
        monkeypatch.setattr(stats, "_is_capturing", lambda: True)
        with stats.graph_scope(("draft_extend_runner", 1)):
            stats.record("in_place", "pynccl", KIB40)
            stats.record("in_place", "pynccl", KIB40)
        monkeypatch.setattr(stats, "_is_capturing", lambda: False)
    label = stats.mode_label(ForwardMode.DRAFT_EXTEND_V2, True)
    for _ in range(3):
        stats.on_replay(("draft_extend_runner", 1), label)
    assert counts(stats) == {("draft_extend", "replay", "in_place", "pynccl", "65536"): 6}
    assert stats.snapshot()["graph_replays"] == {"draft_extend": 3}


@pytest.mark.parametrize("module", ["eagle_draft_cuda_graph_runner", "eagle_draft_extend_cuda_graph_runner"])
def test_draft_runners_record_their_graphs_and_count_replays(tree, module: str) -> None:
    """Each draft runner captures inside graph_scope and counts every replay under its own mode label."""
    import ast

    parsed = ast.parse(source(tree, f"sglang.srt.speculative.{module}").read_text())
    funcs = {f.name: f for f in ast.walk(parsed) if isinstance(f, ast.FunctionDef)}
    replay = ast.unparse(funcs["_replay_graph"])
    assert "all_reduce_stats.on_replay((id(self), shape_key), all_reduce_stats.mode_label(" \
        "self.capture_forward_mode, True))" in replay, replay
    scoped = [w for w in ast.walk(funcs["capture_one_shape"]) if isinstance(w, ast.With)
              and "all_reduce_stats.graph_scope((id(self), shape_key))" in ast.unparse(w.items[0])]
    assert scoped and "self.backend.capture_one(" in ast.unparse(scoped[0]), "capture_one outside graph_scope"


def test_unattributed_capture_is_counted_once(stats, ForwardMode, monkeypatch) -> None:
    with stats.capture_scope(ForwardMode.DECODE, True):
        monkeypatch.setattr(stats, "_is_capturing", lambda: True)
        stats.record("in_place", "pynccl", SMALL)
    assert counts(stats) == {("draft", "capture", "in_place", "pynccl", "smaller"): 1}


def test_recapture_replaces_the_graph_record(stats, ForwardMode, monkeypatch) -> None:
    monkeypatch.setattr(stats, "_is_capturing", lambda: True)
    for n in (5, 2):
        with stats.capture_scope(ForwardMode.DECODE, False), stats.graph_scope("g"):
            for _ in range(n):
                stats.record("in_place", "torch", SMALL)
    monkeypatch.setattr(stats, "_is_capturing", lambda: False)
    with stats.forward_scope(ForwardMode.DECODE, False):
        stats.on_replay("g")
    assert counts(stats) == {("decode", "replay", "in_place", "torch", "smaller"): 2}


def test_log_once_per_interval_on_rank_zero(stats, ForwardMode, caplog) -> None:
    caplog.set_level(logging.INFO, logger=STATS)
    stats.configure(enabled=True, log_interval=10.0, tp_rank=0)
    stats.record("in_place", "torch", SMALL)
    stats.maybe_report(now=0.0)
    assert not caplog.records, "not before the interval"
    stats.maybe_report(now=1e12)
    stats.maybe_report(now=1e12 + 1)
    assert [r.getMessage() for r in caplog.records] == ["All-reduce stats: none/eager: in_place.torch[<=512B]=1"]
    caplog.clear()
    stats.configure(enabled=True, log_interval=0.0, tp_rank=1)
    stats.maybe_report()
    assert not caplog.records, "only TP rank 0 logs"


def test_forward_end_reports_when_due(stats, ForwardMode, caplog) -> None:
    caplog.set_level(logging.INFO, logger=STATS)
    stats.configure(enabled=True, log_interval=0.0, tp_rank=0)
    with stats.forward_scope(ForwardMode.TARGET_VERIFY, False):
        stats.record("out_of_place", "pynccl", SMALL)
    assert caplog.records[-1].getMessage() == "All-reduce stats: target_verify/eager: out_of_place.pynccl[<=512B]=1"


def test_prometheus_export_sends_increments(stats, ForwardMode) -> None:
    prometheus_client = pytest.importorskip("prometheus_client")
    stats.configure(enabled=True, log_interval=0.0, tp_rank=3, export_prometheus=True)
    try:
        labels = dict(mode="target_verify", source="eager", placement="in_place", method="torch", tp_rank="3")

        def exported(bytes_le: str):
            return prometheus_client.REGISTRY.get_sample_value(
                "sglang:all_reduce_total", dict(labels, bytes_le=bytes_le)
            )

        with stats.forward_scope(ForwardMode.TARGET_VERIFY, False):
            stats.record("in_place", "torch", SMALL)
            stats.record("in_place", "torch", SMALL)
            stats.record("in_place", "torch", KIB40)
        assert (exported("smaller"), exported("65536"), exported("4096")) == (2, 1, None)
        with stats.forward_scope(ForwardMode.TARGET_VERIFY, False):
            stats.record("in_place", "torch", SMALL)
        assert (exported("smaller"), exported("65536")) == (3, 1), "each report adds only what is new"
        assert prometheus_client.REGISTRY.get_sample_value("sglang:all_reduce_total", labels) is None, (
            "bytes_le is a label of every sample"
        )
    finally:
        prometheus_client.REGISTRY.unregister(stats._prom_counter)
        stats._prom_counter = None


# -- message size buckets ------------------------------------------------------


@pytest.mark.parametrize(
    "nbytes, label",
    [
        (0, "smaller"),
        (1, "smaller"),
        (512, "smaller"),
        (513, "1024"),
        (1024, "1024"),
        (1025, "2048"),
        (4096, "4096"),
        (40 * 1024, "65536"),
        (32 * 2**20 + 1, "67108864"),
        (64 * 2**20, "67108864"),
        (64 * 2**20 + 1, "larger"),
    ],
)
def test_size_bucket_is_the_next_power_of_two(tree, nbytes: int, label: str) -> None:
    stats = TreeImporter.module(tree, STATS)
    assert stats.size_bucket(nbytes) == label
    assert label in stats.SIZE_BUCKETS


def test_size_buckets_are_bounded(tree) -> None:
    buckets = TreeImporter.module(tree, STATS).SIZE_BUCKETS
    assert buckets == ("smaller", *(str(2**b) for b in range(10, 27)), "larger") and len(buckets) == 19


def test_eager_all_reduces_are_counted_by_tensor_bytes(stats, ForwardMode) -> None:
    with stats.forward_scope(ForwardMode.TARGET_VERIFY, False):
        stats.record("in_place", "torch", KIB4)  # 2048 bf16 elements
        stats.record("in_place", "torch", KIB40)  # 10240 fp32 elements
        stats.record("in_place", "torch", KIB40)
        stats.record("out_of_place", "pynccl", KIB4.view(32, 64))  # the shape does not matter, the bytes do
    assert counts(stats) == {
        ("target_verify", "eager", "in_place", "torch", "4096"): 1,
        ("target_verify", "eager", "in_place", "torch", "65536"): 2,
        ("target_verify", "eager", "out_of_place", "pynccl", "4096"): 1,
    }
    rows = stats.snapshot()["counts"]
    assert [r["bytes_le"] for r in rows] == ["4096", "65536", "4096"], "sizes ascend numerically within a path"


def test_replays_multiply_the_captured_sizes(stats, ForwardMode, monkeypatch) -> None:
    with stats.capture_scope(ForwardMode.TARGET_VERIFY, False):
        stats.record("in_place", "pynccl", KIB40)  # warmup: executed once, at its own size
        monkeypatch.setattr(stats, "_is_capturing", lambda: True)
        with stats.graph_scope(("runner", 4)):
            stats.record("in_place", "pynccl", KIB4)
            stats.record("in_place", "pynccl", KIB4)
            stats.record("in_place", "pynccl", KIB40)
        monkeypatch.setattr(stats, "_is_capturing", lambda: False)
    with stats.forward_scope(ForwardMode.TARGET_VERIFY, False):
        for _ in range(3):
            stats.on_replay(("runner", 4))
    assert counts(stats) == {
        ("target_verify", "warmup", "in_place", "pynccl", "65536"): 1,
        ("target_verify", "replay", "in_place", "pynccl", "4096"): 6,
        ("target_verify", "replay", "in_place", "pynccl", "65536"): 3,
    }


def test_log_line_shows_the_size_buckets(stats, ForwardMode, caplog) -> None:
    caplog.set_level(logging.INFO, logger=STATS)
    stats.configure(enabled=True, log_interval=0.0, tp_rank=0)
    with stats.forward_scope(ForwardMode.DECODE, False):
        stats.record("in_place", "torch", KIB40)
        stats.record("in_place", "torch", KIB4)
        stats.record("in_place", "torch", torch.zeros(2**25, dtype=torch.uint8))  # 32 MiB
        stats.record("in_place", "torch", torch.zeros(2**26 + 1, dtype=torch.uint8))
    assert caplog.records[-1].getMessage() == (
        "All-reduce stats: decode/eager: in_place.torch[<=4KiB]=1 in_place.torch[<=64KiB]=1 "
        "in_place.torch[<=32MiB]=1 in_place.torch[>64MiB]=1"
    )


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


def coordinator(tree, group, **comms):
    ps = TreeImporter.module(tree, "sglang.srt.distributed.parallel_state")
    coord = object.__new__(ps.GroupCoordinator)
    coord.world_size, coord.local_size, coord.device_group = 2, 1, group  # 2 ranks: no single-rank bypass
    coord.ca_comm = coord.qr_comm = coord.pymscclpp_comm = coord.torch_symm_mem_comm = coord.pynccl_comm = None
    coord.pcie_ipc_comm, coord._fi_workspace_hint = None, None  # 0.5.23's PCIe-IPC and FlashInfer paths
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


def test_cpu_all_reduce_is_counted(stats, tree, gloo_group, ForwardMode) -> None:
    coord = coordinator(tree, gloo_group)
    x = torch.ones(4)
    with stats.forward_scope(ForwardMode.TARGET_VERIFY, False):
        assert coord.all_reduce(x) is x
    assert torch.equal(x, torch.ones(4)), "one rank: the sum is the input"
    assert counts(stats) == {("target_verify", "eager", "in_place", "torch", "smaller"): 1}


def test_in_place_and_out_of_place_dispatch_are_counted(stats, tree, gloo_group, ForwardMode) -> None:
    coord = coordinator(tree, gloo_group)
    with stats.forward_scope(ForwardMode.DECODE, False):
        coord._all_reduce_in_place(torch.ones(1024))  # 4 KiB of fp32
        # "auto" with no accelerated communicator: a clone reduced in place.
        out = coord._all_reduce_out_place(torch.ones(4), "auto")
    assert torch.equal(out, torch.ones(4))
    ca = coordinator(tree, gloo_group, ca_comm=FakeCustomAllReduce())
    with stats.forward_scope(ForwardMode.TARGET_VERIFY, False):
        method = ca._resolve_outplace_all_reduce_method(torch.ones(4))
        ca._all_reduce_out_place(torch.ones(4), method)
    assert counts(stats) == {
        ("decode", "eager", "in_place", "torch", "4096"): 1,
        ("decode", "eager", "in_place", "torch", "smaller"): 1,
        ("target_verify", "eager", "out_of_place", "ca", "smaller"): 1,
    }


def test_dispatch_records_nothing_when_disabled(tree, gloo_group, ForwardMode) -> None:
    stats = TreeImporter.module(tree, STATS)
    stats.configure(enabled=False)
    stats.reset()
    coord = coordinator(tree, gloo_group)
    coord.all_reduce(torch.ones(4))
    coord._all_reduce_in_place(KIB40.clone())
    coord._all_reduce_out_place(KIB4.clone(), "auto")
    assert stats.snapshot() == {"enabled": False, "counts": [], "graph_replays": {}}


def test_scheduler_snapshot_is_json_ready(stats, ForwardMode) -> None:
    import json

    with stats.forward_scope(ForwardMode.TARGET_VERIFY, False):
        stats.record("in_place", "torch", SMALL)
    assert json.loads(json.dumps(stats.snapshot())) == {
        "enabled": True,
        "counts": [
            {
                "mode": "target_verify",
                "source": "eager",
                "placement": "in_place",
                "method": "torch",
                "bytes_le": "smaller",
                "count": 1,
            }
        ],
        "graph_replays": {},
    }


def test_mode_label_matches_forward_mode_methods(tree, ForwardMode) -> None:
    stats = TreeImporter.module(tree, STATS)
    labels = {m.name: stats.mode_label(m, False) for m in ForwardMode}
    assert labels["TARGET_VERIFY"] == "target_verify" and labels["DECODE"] == "decode"
    assert {v for k, v in labels.items() if k not in ("TARGET_VERIFY", "DECODE", "IDLE")} == {"extend"}
