"""``graph_memory_gb``: each e2e engine's CUDA-graph memory, read from its job's log
(``benchmark/driver/graph_memory.py``) and recorded per process by ``collect.records_of``.

The logs are session 15's dense-8 runs (committed in the results folder's ``raw.tar.gz``): the adaptive K set
(K 2/3/4/6/8) and fixed K 4, each process a plain-decode engine and then an EAGLE-3 engine. The figures are
the ones read off those logs by hand for issue 12's graph-memory target.
"""

from __future__ import annotations

import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmark.driver import collect
from benchmark.driver.graph_memory import engines_of
from benchmark.driver.schema import Record

RESULTS = Path(__file__).resolve().parents[1] / "benchmark" / "results"
RUN = RESULTS / "20261202-1206-h200-tp1-dense8-adaptive-ks-graph-hit-and-memory"
LOGS = {"ks": "20261202-1206-h200-s15-adaptive-ks/logs/e2e-ks-tp1-triton.log",
        "fixed": "20261202-1210-h200-s15-fixed-k4/logs/e2e-fixed-tp1-triton.log"}


@pytest.fixture(scope="module")
def logs() -> dict[str, str]:
    with tarfile.open(RUN / "raw.tar.gz") as tar:
        return {name: tar.extractfile(member).read().decode() for name, member in LOGS.items()}


def summary(text: str) -> list[tuple[bool, float]]:
    return [(e.speculative, e.graph_gb) for e in engines_of(text)]


def test_each_engine_of_a_process_gets_its_graphs_memory(logs: dict[str, str]) -> None:
    assert summary(logs["fixed"]) == [(False, 0.09), (True, 0.57)]
    assert summary(logs["ks"]) == [(False, 0.09), (True, 2.51)]  # every K's runners, built at start-up


def test_only_tp_rank_0_counts(logs: dict[str, str]) -> None:
    """At TP > 1 every rank logs its captures; another rank's free memory must not mix into rank 0's: here
    rank 1's capture lines come first and its end-of-captures line last, with other figures."""
    out = []
    for line in logs["fixed"].splitlines():
        if "Capture" in line and "begin" in line:
            out += [line.replace("] Capture", "] TP1 Capture").replace("avail mem=", "avail mem=9"),
                    line.replace("] Capture", "] TP0 Capture")]
        elif "available_gpu_mem=" in line:
            out += [line.replace("] max_total", "] TP0 max_total"),
                    line.replace("] max_total", "] TP1 max_total").replace("available_gpu_mem=", "available_gpu_mem=1")]
        else:
            out.append(line)
    assert summary("\n".join(out)) == [(False, 0.09), (True, 0.57)]


def test_an_engine_without_graphs_or_a_cut_log_gives_nothing() -> None:
    head = "[t] server_args=ServerArgs(model_path='m', speculative_algorithm='EAGLE3', disable_cuda_graph=True)\n"
    assert engines_of(head + "[t] max_total_num_tokens=10, available_gpu_mem=5.00 GB\n") == []
    assert engines_of(head + "[t] Capture target verify CUDA graph begin. bs=[1], avail mem=9.00 GB\n") == []


def test_records_of_adds_graph_memory_on_each_modes_largest_batch(tmp_path: Path, logs: dict[str, str]) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "e2e-ks.log").write_text(logs["ks"])
    rows = [("e2e_nospec", bs, 0, 0) for bs in (1, 64)] + [("e2e_spec", bs, 4, 1) for bs in (1, 64)]
    lines = [{"type": "record", "mode": m, "bs": bs, "k": k, "topk": t, "metric": "tokens_per_s", "value": 1.0}
             for m, bs, k, t in rows]
    job = SimpleNamespace(variant=SimpleNamespace(name="ks"), parallel=SimpleNamespace(name="tp1", tp=1),
                          backend="triton", name="e2e-ks", series="e2e-ks", round=1)
    outcome = SimpleNamespace(job=job, lines=lines, status="ok", note="", rc=0, log="logs/e2e-ks.log")
    got, errors = collect.records_of(outcome, tmp_path)
    assert errors == []
    memory = {(r.mode, r.bs, r.k): r.value for r in got if r.metric == "graph_memory_gb"}
    assert memory == {("e2e_nospec", 64, 0): 0.09, ("e2e_spec", 64, 4): 2.51}
    spec = next(r for r in got if r.metric == "graph_memory_gb" and r.mode == "e2e_spec")
    assert spec.extra["state_gb_by_steps"] == {"1": 0.21, "2": 0.36, "5": 0.55, "7": 0.67}
    assert spec.extra["startup_state_gb"] == 0.72
    without_dir, _ = collect.records_of(outcome)
    assert not [r for r in without_dir if r.metric == "graph_memory_gb"]


def test_each_adaptive_states_share_is_kept_by_step_count(logs: dict[str, str]) -> None:
    """Session 15's K set: the start-up K-4 state and the states built for steps 1/2/5/7 (K 2/3/6/8), from the
    capture log's per-state lines; issue 12's plan (docs/graph-memory-k-set.md) reads them per K."""
    spec = [e for e in engines_of(logs["ks"]) if e.speculative][0]
    assert [steps for steps, _ in spec.states_gb] == [1, 2, 5, 7]
    assert all(0 < gb < spec.graph_gb for _, gb in spec.states_gb)
    assert spec.startup_state_gb == round(spec.graph_gb - sum(gb for _, gb in spec.states_gb), 3) > 0
    fixed = [e for e in engines_of(logs["fixed"]) if e.speculative][0]
    assert fixed.states_gb == () and fixed.startup_state_gb == fixed.graph_gb


# Patch 0040's figures, in the order an adaptive engine logs them: the start-up captures, then each extra state's
# captures between its begin line and its "Built" line, whose figures include theirs.
HELD_LOG = """\
[t] server_args=ServerArgs(model_path='m', speculative_algorithm='EAGLE3')
[t] Capture target verify CUDA graph begin. bs=[1], avail mem=50.00 GB
[t] Capture target verify CUDA graph end. elapsed=7.00 s, mem usage=0.74 GB (graph pool grew +0.12 GB, buffers +0.62 GB), avail mem=49.26 GB.
[t] Capture draft decode CUDA graph end. elapsed=4.00 s, mem usage=0.09 GB (graph pool grew +0.05 GB, buffers +0.04 GB), avail mem=49.17 GB.
[t] Build adaptive runtime state steps=7 begin.
[t] Capture draft decode CUDA graph end. elapsed=3.00 s, mem usage=0.01 GB (graph pool grew +0.01 GB, buffers +0.00 GB), avail mem=49.16 GB.
[t] TP1 Built adaptive runtime state steps=7: elapsed=20.00s, mem=0.90GB (graph pool grew +0.50 GB, buffers +0.40 GB)
[t] Built adaptive runtime state steps=7: elapsed=20.00s, mem=0.17GB (graph pool grew +0.03 GB, buffers +0.10 GB)
[t] max_total_num_tokens=10, available_gpu_mem=49.00 GB
[t] Capture target decode CUDA graph end. elapsed=1.00 s, mem usage=0.20 GB (graph pool grew +0.20 GB, buffers +0.00 GB), avail mem=48.80 GB.
"""


def test_what_the_captures_kept_sums_top_level_lines_and_each_states_line() -> None:
    """0.74 + 0.09 at start-up, the steps-7 state's 0.13 (its inner draft capture is in it, rank 1's line is not),
    and nothing logged after the engine's captures ended."""
    (engine,) = engines_of(HELD_LOG)
    assert engine.held_gb == pytest.approx(0.96)
    assert engine.graph_gb == 1.0 and engine.states_gb == ((7, 0.17),)


def test_without_patch_0040_there_is_no_held_figure(logs: dict[str, str]) -> None:
    assert {e.held_gb for e in engines_of(logs["ks"])} == {None}


def test_records_of_adds_graph_held_beside_graph_memory() -> None:
    top = Record(variant="v", config="tp1", backend="triton", mode="e2e_spec", bs=8, k=4, topk=1,
                         metric="tokens_per_s", value=1.0, tp=1)
    got = collect.graph_memory_records([top], engines_of(HELD_LOG))
    assert [(r.metric, r.value, r.bs) for r in got] == [("graph_memory_gb", 1.0, 8), ("graph_held_gb", 0.96, 8)]

