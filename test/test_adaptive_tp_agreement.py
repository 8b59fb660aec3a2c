"""Patch 0033 (0.5.23: 0025): tensor-parallel ranks take rank 0's throughput-policy decisions.

Every TP rank runs its own adaptive slots and feeds them the same verify results, but the throughput policy
(patch 0019) times cycles on each rank's own host clock. Near a tie two ranks can then choose different step
counts, and ranks on different step counts replay graphs whose collectives do not match (a hang). Simulated here
on CPU with two ``AdaptiveSpeculativeParams`` from each tree: the same results, rank 1's clock jittered by up to
8% per cycle, two step counts that yield nearly the same tokens per second. With the patch each slot hands its
decision to an agreement function at every decision point and the ranks' step counts stay equal cycle for cycle;
without one (the series before this patch: the pristine releases have no throughput policy at all) the same two
ranks diverge. Also ``rank0_decides``: none on one rank, a broadcast of (waiting, steps) from rank 0 over the
group otherwise.
"""

from __future__ import annotations

import json
import random
import types
from pathlib import Path
from typing import Any

import pytest
from sglang_trees import PATCHED, TreeImporter
from sglang_trees import trees  # noqa: F401 (a fixture)

from benchmark.tools.adaptive_sim import FakeClock

MODULE = "sglang.srt.speculative.adaptive_spec_params"
BS = 4


def near_tie(steps: int) -> float:
    """Cycle times under which steps 1 and 3 yield nearly the same tokens per second at the acceptance below."""
    return {0: 0.0050, 1: 0.0066, 3: 0.0090, 7: 0.0150}[steps]


ACCEPT = [0.8, 0.55, 0.3, 0.2, 0.1, 0.1, 0.1]


def _config(tmp_path: Path) -> str:
    path = tmp_path / "adaptive.json"
    path.write_text(json.dumps({"1": {"candidate_steps": [0, 1, 3, 7], "policy": "throughput"}}))
    return str(path)


def _two_ranks(asp: Any, cfg: str, agreeing: bool, results: int = 1500) -> tuple[list[int], list[int], int, int]:
    """Rank 0's and rank 1's step count at each verify, and how many decisions each handed over."""
    handed: list[tuple[bool, int]] = []
    taken = [0]

    def rank0(waiting: bool, steps: int) -> tuple[bool, int]:
        handed.append((waiting, steps))
        return waiting, steps

    def rank1(waiting: bool, steps: int) -> tuple[bool, int]:
        taken[0] += 1
        return handed[taken[0] - 1]

    clocks = FakeClock(), FakeClock()
    kw = [{"agree": rank0}, {"agree": rank1}] if agreeing else [{}, {}]
    ranks = [asp.AdaptiveSpeculativeParams(initial_steps=3, cfg_path=cfg, clock=clock, **extra)
             for clock, extra in zip(clocks, kw)]
    draws, jitter = random.Random(0), random.Random(1)
    trace: tuple[list[int], list[int]] = ([], [])
    for _ in range(results):
        steps = [r.get_steps_for_batch(BS) for r in ranks]
        for t, s in zip(trace, steps):
            t.append(s)
        clocks[0].now += near_tie(steps[0])
        # Rank 1 times its cycles with +-25% jitter: patch 0053's lower quartile over 15 samples absorbs the +-8%
        # that split the ranks before it (5 verifies of 1500), so without agreement they would not diverge.
        clocks[1].now += near_tie(steps[1]) * (1 + jitter.uniform(-0.25, 0.25))
        accepted = []  # one verify's results, the same on every rank (rank 0's chain length)
        for _ in range(BS):
            n = 0
            while n < steps[0] and draws.random() < ACCEPT[n]:
                n += 1
            accepted.append(n)
        for r in ranks:  # rank 0 first: rank 1 takes what rank 0 handed over at the same decision point
            r.on_verify_complete(accepted, BS)
    return trace[0], trace[1], len(handed), taken[0]


@pytest.fixture(params=PATCHED)
def asp(request, trees, monkeypatch) -> Any:  # noqa: F811
    monkeypatch.delenv("SGLANG_SPEC_ADAPTIVE_POLICY", raising=False)
    return TreeImporter.module(trees.get(request.param), MODULE)


def test_ranks_with_their_own_clocks_run_the_same_step_counts(asp, tmp_path: Path) -> None:
    rank0, rank1, handed, taken = _two_ranks(asp, _config(tmp_path), agreeing=True)
    assert len(set(rank0)) > 1, "the slot never switched: the simulation shows nothing"
    first = next((i for i, (a, b) in enumerate(zip(rank0, rank1)) if a != b), None)
    assert first is None, f"the ranks diverged at verify {first}: rank 0 ran {rank0[first]}, rank 1 {rank1[first]}"
    assert handed == taken > 0  # every decision point met on both ranks, in step


def test_without_the_agreement_the_ranks_diverge(asp, tmp_path: Path) -> None:
    """The simulation can fail: the same two ranks, no agreement function (a single rank's setting)."""
    rank0, rank1, handed, _ = _two_ranks(asp, _config(tmp_path), agreeing=False)
    assert rank0 != rank1 and handed == 0


def test_rank0_decides_broadcasts_over_the_group(asp) -> None:
    assert asp.rank0_decides(None) is None
    assert asp.rank0_decides(types.SimpleNamespace(world_size=1)) is None
    sent = []

    def broadcast_object(obj, src=0):
        sent.append((obj, src))
        return (False, 7)  # rank 0's

    agree = asp.rank0_decides(types.SimpleNamespace(world_size=2, broadcast_object=broadcast_object))
    assert agree(True, 3) == (False, 7) and sent == [((True, 3), 0)]
