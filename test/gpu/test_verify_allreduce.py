"""Verify all-reduce paths at TP=2 on the oracle pair (patches 0001-0003).

Custom all-reduce is off in every case, as on the TP=8 PCIe hosts where it is
refused: an all-reduce is then either in place (torch.distributed, or pynccl
inside a captured graph) or out of place (pynccl). The counts come from the
all-reduce telemetry (SGLANG_ALL_REDUCE_STATS=1) of TP rank 0, read through
``get_server_info()``; SGLANG_CHECK_EAGER_GRAPH_FLAGS=1 is on throughout, so
any eager forward that starts with a CUDA graph flag set fails the engine.

* Eager TARGET_VERIFY (decode graph off, or a batch above the captured sizes):
  every verify all-reduce is in place and greedy output equals the
  non-speculative run.
* SGLANG_TEST_FORCE_PCG_FLAG_IN_VERIFY=1 re-creates the 0.5.9 condition (verify
  under the piecewise flag and forward context): the counts must show
  out-of-place pynccl, so the in-place assertions above can fail.
* Graphed verify: the all-reduces are counted per replay, in place; the
  draft and draft-extend graph replays are counted under their own modes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engines import Case, gpu_count, output_ids, run_case

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(gpu_count() < 2, reason="needs 2 GPUs")]

TP = 2
STATS_ENV = (("SGLANG_ALL_REDUCE_STATS", "1"), ("SGLANG_CHECK_EAGER_GRAPH_FLAGS", "1"))
FORCE_ENV = STATS_ENV + (("SGLANG_TEST_FORCE_PCG_FLAG_IN_VERIFY", "1"),)
NO_CUSTOM_AR = (("disable_custom_all_reduce", True),)
# Two ways to make TARGET_VERIFY miss the decode graph; 4 prompts verify at bs 4.
EAGER_VERIFY = {
    "decode_graph_off": NO_CUSTOM_AR + (("disable_decode_cuda_graph", True),),
    "bs_above_captured": NO_CUSTOM_AR + (("cuda_graph_max_bs_decode", 2),),
}
Key = tuple[str, str, str, str]  # mode, source, placement, method


def all_reduce_counts(record: dict) -> dict[Key, int]:
    """Counts per path, summed over the message size buckets (``bytes_le``) of the rows."""
    states = record["internal_states"]
    assert states and "all_reduce_stats" in states[0], f"no all-reduce stats in {states}"
    counts: dict[Key, int] = {}
    for r in states[0]["all_reduce_stats"]["counts"]:
        assert "bytes_le" in r, r
        key = (r["mode"], r["source"], r["placement"], r["method"])
        counts[key] = counts.get(key, 0) + r["count"]
    return counts


def of_mode(counts: dict[Key, int], mode: str, source: str | None = None) -> dict[Key, int]:
    return {k: n for k, n in counts.items() if k[0] == mode and (source is None or k[1] == source)}


@pytest.fixture(scope="module")
def reference(oracle_models: Path, engine_dir: Path) -> list[list[int]]:
    return output_ids(run_case(Case(oracle_models, spec=False, tp=TP, extra=NO_CUSTOM_AR), engine_dir))


@pytest.mark.parametrize("how", sorted(EAGER_VERIFY))
def test_eager_verify_all_reduces_in_place(how: str, oracle_models: Path, engine_dir: Path, reference) -> None:
    record = run_case(Case(oracle_models, spec=True, tp=TP, extra=EAGER_VERIFY[how], env=STATS_ENV), engine_dir)
    counts = all_reduce_counts(record)
    eager = of_mode(counts, "target_verify", "eager")
    assert eager, f"no eager TARGET_VERIFY all-reduce was seen ({how}): {counts}"
    assert all(placement == "in_place" for _, _, placement, _ in eager), eager
    assert not [k for k in of_mode(counts, "target_verify") if k[2] == "out_of_place"], counts
    assert output_ids(record) == reference, f"eager verify ({how}) changed greedy output"


def test_forced_pcg_flag_shows_out_of_place(oracle_models: Path, engine_dir: Path) -> None:
    extra = EAGER_VERIFY["decode_graph_off"]
    record = run_case(Case(oracle_models, spec=True, tp=TP, extra=extra, env=FORCE_ENV), engine_dir)
    eager = of_mode(all_reduce_counts(record), "target_verify", "eager")
    assert eager.get(("target_verify", "eager", "out_of_place", "pynccl"), 0) > 0, eager
    assert eager.get(("target_verify", "eager", "in_place", "torch"), 0) == 0, eager


def test_graphed_verify_counted_per_replay(oracle_models: Path, engine_dir: Path, reference) -> None:
    record = run_case(Case(oracle_models, spec=True, tp=TP, extra=NO_CUSTOM_AR, env=STATS_ENV), engine_dir)
    counts = all_reduce_counts(record)
    replayed = of_mode(counts, "target_verify", "replay")
    assert replayed and all(k[2] == "in_place" for k in replayed), counts
    assert not of_mode(counts, "target_verify", "eager"), "bs 4 fits the captured verify graphs"
    replays = record["internal_states"][0]["all_reduce_stats"]["graph_replays"]
    assert replays.get("target_verify", 0) > 0, replays
    per_replay = sum(replayed.values()) / replays["target_verify"]
    assert per_replay == int(per_replay) and per_replay > 0, (replayed, replays)
    for mode in ("draft", "draft_extend"):  # the EAGLE draft runners' replays are counted too
        assert of_mode(counts, mode, "replay") and replays.get(mode, 0) > 0, (mode, counts, replays)
    assert output_ids(record) == reference
