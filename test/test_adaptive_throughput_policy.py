"""Patch 0019: ``--speculative-adaptive`` picks a slot's step count by measured tokens per second.

The slots run on CPU from each patched tree's ``adaptive_spec_params`` (0.5.17, and its port to
0.5.23: 0017 there) against a simulated server: a fake clock advances by the cycle time of the step
count in force, and each verify result accepts a chain of drafts, each draft with a fixed
probability given the one before. A throughput slot must settle where the simulated tokens per
second peak (including steps 0 where a cycle is much dearer than a decode step), where the
accept-length policy settles elsewhere; cycle times across a switch, across slots, or over
``max_cycle_s`` must not count; the default policy must behave as before (step for step as the
pristine release it patches).
"""

from __future__ import annotations

import json
import logging
import math
import random
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Sequence, Union

import pytest
from sglang_trees import PATCHED, TreeImporter
from sglang_trees import trees  # noqa: F401 (a fixture)

from benchmark.tools.adaptive_sim import FakeClock

MODULE = "sglang.srt.speculative.adaptive_spec_params"
CANDIDATES = [0, 1, 3, 7]
PRISTINE_TWIN = {"patched": "pristine", "upstream": "upstream_pristine"}
CONFIGS = Path(__file__).resolve().parents[1] / "benchmark" / "configs"  # the shipped adaptive configs


@pytest.fixture(params=PATCHED)
def asp(request, trees, monkeypatch) -> Any:
    monkeypatch.delenv("SGLANG_SPEC_ADAPTIVE_POLICY", raising=False)
    return TreeImporter.module(trees.get(request.param), MODULE)


def _config(tmp_path: Path, policy: str | None, candidates: list[int] = CANDIDATES, slots: tuple[str, ...] = ("1",),
            **knobs: Any) -> str:
    """An adaptive config whose batch-size ``slots`` all hold the same entry."""
    entry: dict[str, Any] = {"candidate_steps": candidates, **knobs}
    if policy is not None:
        entry["policy"] = policy
    path = tmp_path / "adaptive.json"
    path.write_text(json.dumps({slot: entry for slot in slots}))
    return str(path)


def _clocked(asp: Any, cfg_path: str, initial: int = 3) -> tuple[Any, FakeClock]:
    """Adaptive params on ``cfg_path`` that read a fake clock."""
    clock = FakeClock()
    return asp.AdaptiveSpeculativeParams(initial_steps=initial, cfg_path=cfg_path, clock=clock), clock


Acceptance = Union[float, Sequence[float]]


def _rate_at(accept_rate: Acceptance, position: int) -> float:
    """The chance that draft ``position`` (0-based) is accepted given the one before it was: one rate for
    every position, or a rate per position (past the list's end, nothing is accepted)."""
    if isinstance(accept_rate, float):
        return accept_rate
    return accept_rate[position] if position < len(accept_rate) else 0.0


def _serve(params: Any, clock: FakeClock, cycle_s: Callable[[int], float], accept_rate: Acceptance,
           batches: int, bs: int = 4, seed: int = 0, trace: list[int] | None = None) -> Counter:
    """Run ``batches`` verify results; return how many ran at each step count (each in ``trace``)."""
    rng = random.Random(seed)
    ran: Counter = Counter()
    for _ in range(batches):
        steps = params.get_steps_for_batch(bs)
        ran[steps] += 1
        if trace is not None:
            trace.append(steps)
        clock.now += cycle_s(steps)
        accepted = []
        for _ in range(bs):
            n = 0
            while n < steps and rng.random() < _rate_at(accept_rate, n):
                n += 1
            accepted.append(n)
        params.on_verify_complete(accepted, bs)
    return ran


def _tokens_per_s(cycle_s: Callable[[int], float], accept_rate: Acceptance, steps: int) -> float:
    tokens, reach = 1.0, 1.0
    for position in range(steps):
        reach *= _rate_at(accept_rate, position)
        tokens += reach
    return tokens / cycle_s(steps)


def _settled_tail(asp: Any, tmp_path: Path, policy: str | None, cycle_s: Callable[[int], float],
                  accept_rate: Acceptance, initial: int = 3) -> Counter:
    """The step counts of 200 verify results after 400 to settle."""
    params, clock = _clocked(asp, _config(tmp_path, policy), initial)
    _serve(params, clock, cycle_s, accept_rate, batches=400)
    return _serve(params, clock, cycle_s, accept_rate, batches=200, seed=1)


def _settled(asp: Any, tmp_path: Path, policy: str | None, cycle_s: Callable[[int], float],
             accept_rate: Acceptance, initial: int = 3) -> int:
    return _settled_tail(asp, tmp_path, policy, cycle_s, accept_rate, initial).most_common(1)[0][0]


def small_batch(steps: int) -> float:
    """Host-bound small batch: a decode-like base plus a cheap draft step."""
    return 0.004 + 0.0004 * steps + (0.002 if steps else 0.0)


def large_batch(steps: int) -> float:
    """Large batch: every cycle with drafting costs much more than a decode step."""
    return 0.010 if steps == 0 else 0.022 + 0.004 * steps


def test_throughput_settles_on_a_long_chain_when_drafts_are_cheap_and_good(asp, tmp_path: Path) -> None:
    best = max(CANDIDATES, key=lambda s: _tokens_per_s(small_batch, 0.8, s))
    assert best == 7
    assert _settled(asp, tmp_path, "throughput", small_batch, 0.8) == best


def test_throughput_falls_back_to_steps_0_where_a_cycle_costs_more_than_it_yields(asp, tmp_path: Path) -> None:
    best = max(CANDIDATES, key=lambda s: _tokens_per_s(large_batch, 0.7, s))
    assert best == 0
    assert _settled(asp, tmp_path, "throughput", large_batch, 0.7) == 0
    # the accept-length policy looks only at acceptance and keeps drafting at a loss
    assert _settled(asp, tmp_path, "accept_len", large_batch, 0.7) != 0


# A draft that is right for two tokens and never for a third (session 15's oracle pair at accept length 3);
# and one whose acceptance falls with depth, as a real EAGLE-3 draft's does.
CAPPED_AT_2 = [1.0, 1.0]
FALLING = [0.9, 0.8, 0.6, 0.45, 0.35, 0.3, 0.25]


@pytest.mark.parametrize("acceptance", [CAPPED_AT_2, FALLING], ids=["capped_at_2", "falling"])
def test_throughput_settles_where_acceptance_that_varies_with_depth_peaks(asp, tmp_path: Path,
                                                                          acceptance: list[float]) -> None:
    """One per-draft rate fitted to a chain's mean overrates a longer chain when acceptance falls with depth
    and a shorter one when it is measured on a long chain: on the capped draft the slot swung between steps
    3 and 7 every few results (dense-8, session 15). Each position's own rate finds the peak and stays."""
    best = max(CANDIDATES, key=lambda s: _tokens_per_s(small_batch, acceptance, s))
    assert best == 3
    tail = _settled_tail(asp, tmp_path, "throughput", small_batch, acceptance)
    assert tail[best] >= 180, tail  # of 200; reprobing the neighbours takes the rest


def with_gaps(cycle_s: Callable[[int], float], every: int = 85, gap_s: float = 0.060) -> Callable[[int], float]:
    """``cycle_s`` plus, on every ``every``-th result, a wait for something other than the cycle: the next
    request's prefill or an idle client (the e2e benchmark's runs are ~85 results apart at accept length 3)."""
    calls = [0]

    def timed(steps: int) -> float:
        calls[0] += 1
        return cycle_s(steps) + (gap_s if calls[0] % every == 0 else 0.0)
    return timed


def test_a_cycle_that_also_waited_for_something_else_does_not_move_the_slot(asp, tmp_path: Path) -> None:
    """Session 16 (dense-8, TP 1, accept length 3): the slot kept switching among K 2-8 (67 switches) and
    reached 0.96x of plain decode at bs 64 where fixed K 4 ran 1.51x. An averaged cycle time let the one
    result per run that also waited for a prefill (tens of ms against ~3) mark whichever step count was in
    force as slow, and the slot moved away from the peak until a reprobe; a median of recent cycles does not."""
    best = max(CANDIDATES, key=lambda s: _tokens_per_s(small_batch, CAPPED_AT_2, s))
    assert best == 3
    params, clock = _clocked(asp, _config(tmp_path, "throughput"))
    timed = with_gaps(small_batch)
    _serve(params, clock, timed, CAPPED_AT_2, batches=400)
    tail = _serve(params, clock, timed, CAPPED_AT_2, batches=200, seed=1)
    assert tail[best] >= 180, tail


@pytest.mark.parametrize("tree_name", PATCHED)
def test_the_env_var_sets_the_policy_of_slots_that_do_not_name_one(trees, tree_name: str, tmp_path: Path,
                                                                   monkeypatch) -> None:
    monkeypatch.setenv("SGLANG_SPEC_ADAPTIVE_POLICY", "throughput")
    asp = TreeImporter.module(trees.get(tree_name), MODULE)
    params = asp.AdaptiveSpeculativeParams(initial_steps=3, cfg_path=_config(tmp_path, None))
    assert isinstance(params._route(1), asp.ThroughputStepSlot)


def test_the_default_policy_is_the_accept_length_one(asp, tmp_path: Path) -> None:
    params = asp.AdaptiveSpeculativeParams(initial_steps=3, cfg_path=_config(tmp_path, None))
    slot = params._route(1)
    assert type(slot) is asp.AdaptiveStepSlot
    default = asp.AdaptiveSpeculativeParams(initial_steps=3)
    assert all(type(s) is asp.AdaptiveStepSlot for s in default._slots.values())


def _default_policy_steps(tree: Path) -> list[int]:
    """The step count of each of 300 verify results under the default policy and config at bs 2, on
    a workload whose acceptance moves (so the accept-length thresholds move the slot both ways)."""
    params = TreeImporter.module(tree, MODULE).AdaptiveSpeculativeParams(initial_steps=3)
    clock, trace = FakeClock(), []
    for phase, rate in enumerate([0.9, 0.2, 0.6]):
        _serve(params, clock, small_batch, rate, batches=100, bs=2, seed=phase, trace=trace)
    return trace


@pytest.mark.parametrize("tree_name", PATCHED)
def test_the_default_policy_chooses_step_for_step_as_the_release(trees, tree_name: str, monkeypatch) -> None:
    monkeypatch.delenv("SGLANG_SPEC_ADAPTIVE_POLICY", raising=False)
    patched = _default_policy_steps(trees.get(tree_name))
    assert len(set(patched)) > 2  # the workload moves the slot up and down
    assert patched == _default_policy_steps(trees.get(PRISTINE_TWIN[tree_name]))


def test_an_unknown_policy_is_rejected(asp, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="policy"):
        asp.AdaptiveSpeculativeParams(initial_steps=3, cfg_path=_config(tmp_path, "fastest"))


@pytest.mark.parametrize("tree_name", PATCHED)
def test_the_unknown_env_policy_is_rejected(trees, tree_name: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SGLANG_SPEC_ADAPTIVE_POLICY", "fastest")
    asp = TreeImporter.module(trees.get(tree_name), MODULE)
    with pytest.raises(ValueError, match="SGLANG_SPEC_ADAPTIVE_POLICY"):
        asp.AdaptiveSpeculativeParams(initial_steps=3, cfg_path=_config(tmp_path, None))


def test_expected_drafts_follow_each_positions_measured_rate(asp, tmp_path: Path) -> None:
    """Measured at steps 3: of 10 requests 2 accept nothing, 3 one draft, 5 all three. Position rates
    8/10, 5/8, 5/5; a fourth position takes the third's rate."""
    params, _ = _clocked(asp, _config(tmp_path, "throughput", candidates=[1, 3, 7], warmup_batches=1000,
                                      settle_batches=0))
    slot = params._route(1)
    assert slot.expected_drafts(3) is None
    slot.update([0, 0, 1, 1, 1, 3, 3, 3, 3, 3])
    r0, r1 = 0.8, 0.8 * 5 / 8
    assert slot.expected_drafts(1) == pytest.approx(r0)
    assert slot.expected_drafts(3) == pytest.approx(r0 + r1 + r1)
    assert slot.expected_drafts(7) == pytest.approx(r0 + 6 * r1)


def _own_drafts_after(asp: Any, tmp_path: Path, results: list[list[int]]) -> float:
    """A steps-3 slot's own drafts per cycle after ``results`` (each the accepted drafts of one verify's requests)."""
    params, _ = _clocked(asp, _config(tmp_path, "throughput", candidates=[3], warmup_batches=1000, settle_batches=0))
    slot = params._route(1)
    for accepted in results:
        slot.update(accepted)
    return slot.drafts_per_cycle(3)


def test_acceptance_fades_per_request_result_not_per_verify(asp, tmp_path: Path) -> None:
    """Session 21 (dense-8, accept ~1.4, bs 1): one chain's tokens per cycle, each a mean over one request a
    verify faded by 0.8 a verify, ranged 1.0-1.4 (K 2) and 1.1-2.3 (K 3) from visit to visit, and the K set
    ran 0.93x of fixed K 4. Faded per request result, 64 verifies of one request weigh what one verify of 64
    does; 20 verifies of one request still remember the first 10."""
    by_one = _own_drafts_after(asp, tmp_path, [[3]] * 64 + [[0]] * 64)
    by_64 = _own_drafts_after(asp, tmp_path, [[3] * 64, [0] * 64])
    assert by_one == pytest.approx(by_64, abs=0.05)
    assert by_64 == pytest.approx(3 / (1 + math.exp(0.5)), abs=1e-6)  # the first 64 faded by exp(-64 / 128)
    assert 1.2 < _own_drafts_after(asp, tmp_path, [[3]] * 10 + [[0]] * 10) < 1.6  # a 0.8-a-verify fade: 0.32


def test_the_sample_window_is_a_config_knob(asp, tmp_path: Path) -> None:
    params, _ = _clocked(asp, _config(tmp_path, "throughput", candidates=[3], warmup_batches=1000, settle_batches=0,
                                      sample_window=1))
    slot = params._route(1)
    slot.update([3] * 8)
    slot.update([0] * 8)
    assert slot.drafts_per_cycle(3) == pytest.approx(3 * math.exp(-8) / (1 + math.exp(-8)))


def wide_verify(steps: int) -> float:
    """Large batch: a cycle costs the verify's width, drafting or not."""
    return 0.010 + 0.004 * steps


def _serve_phase_locked(params: Any, clock: FakeClock, cycle_s: Callable[[int], float], results: int,
                        bs: int = 8) -> Counter:
    """Session 16's oracle draft (misses on every 4th token of its walk): at steps >= 2 every request accepts two
    drafts; at steps 1 the verify lands on a miss every other cycle, all requests in step (1, 0, 1, 0 drafts)."""
    ran: Counter = Counter()
    for i in range(results):
        steps = params.get_steps_for_batch(bs)
        ran[steps] += 1
        clock.now += cycle_s(steps)
        drafts = (1 - i % 2) if steps == 1 else min(2, steps)
        params.on_verify_complete([drafts] * bs, bs)
    return ran


def test_a_candidate_is_judged_by_its_own_acceptance_once_it_has_run(asp, tmp_path: Path) -> None:
    """Session 16 (dense-8 at bs 64): the slot ran mostly at steps 1 (0.96-1.02x of plain decode) on a draft
    whose first position is accepted at every cycle of steps >= 2 but every other cycle at steps 1. Rates per
    position pooled over all chain lengths credited steps 1 with two tokens a cycle, not 1.5; a candidate's
    own measured drafts per cycle do not."""
    truth = {1: 1.5 / wide_verify(1), 3: 3 / wide_verify(3), 7: 3 / wide_verify(7)}
    assert max(truth, key=truth.get) == 3 and 2 / wide_verify(1) > truth[3]  # pooled rates would pick steps 1
    params, clock = _clocked(asp, _config(tmp_path, "throughput", candidates=[1, 3, 7], slots=("8",)))
    _serve_phase_locked(params, clock, wide_verify, 400)
    tail = _serve_phase_locked(params, clock, wide_verify, 200)
    assert tail[3] >= 180, tail
    slot = params._route(8)
    assert slot.drafts_per_cycle(1) == pytest.approx(0.5, abs=0.15)
    assert slot.drafts_per_cycle(3) == pytest.approx(2.0)


def test_a_longer_chain_that_cannot_win_even_at_a_shorter_ones_cycle_time_is_not_explored(asp, tmp_path: Path) -> None:
    """Session 17 (dense-8 at bs 64, K = 2/3/4/6/8): the slot ran K 4 on average but lost its first timed run to
    visits to steps 5 and 7 (5.0 and 6.3 ms a cycle against 3.7 ms) on a draft that never accepts a third draft.
    A cycle never gets cheaper with more drafts, so an unmeasured candidate whose estimated tokens per cycle,
    at the cycle time of the longest measured shorter chain, do not beat the best measured tokens per second
    is not worth a visit."""
    params, clock = _clocked(asp, _config(tmp_path, "throughput", candidates=[1, 2, 3, 5, 7], slots=("8",)))
    ran = _serve_phase_locked(params, clock, wide_verify, 600)
    assert ran[5] == ran[7] == 0, ran
    tail = _serve_phase_locked(params, clock, wide_verify, 200)
    assert tail[2] >= 180, tail  # 3 tokens a cycle for the fewest drafts


def test_a_longer_chain_a_shorter_one_already_matches_in_tokens_is_not_explored(asp, tmp_path: Path) -> None:
    """Session 19 (dense-8 at bs 64, K = 2/3/4/6/8, 0.87x of plain decode): steps 1-3 measured at 4.15-4.45 ms
    (host noise: steps 3 at 4.44 ms, steps 2 at 4.45), steps 3 at 2.98 tokens a cycle (one request's miss now
    and then, which steps 2 did not meet) and every position's rate put steps 5 at 3.00, so at steps 3's cycle
    time steps 5 looked able to win by 0.2% and was visited (then steps 7, at 6.6 ms). The shorter chain is kept
    after any such visit (within same_tokens), so it is not worth one."""
    cycle_ms = {1: 4.15, 2: 4.45, 3: 4.44, 5: 4.45, 7: 6.6}
    params, clock = _clocked(asp, _config(tmp_path, "throughput", candidates=[1, 2, 3, 5, 7], slots=("64",)))
    ran: Counter = Counter()
    for i in range(600):
        steps = params.get_steps_for_batch(64)
        ran[steps] += 1
        clock.now += cycle_ms[steps] / 1e3
        if steps == 1:
            drafts = [int((j + i) % 6 == 0) for j in range(64)]  # 1.16 tokens a cycle
        else:
            drafts = [min(2, steps)] * 64
            if steps >= 3:
                drafts[0] = 0  # one request of 64 misses its first draft
        params.on_verify_complete(drafts, 64)
    assert ran[5] == ran[7] == 0, ran
    assert ran[2] >= 550, ran


def test_one_cycle_that_also_waited_for_a_prefill_does_not_time_a_chain_just_switched_to(asp) -> None:
    """Session 19 (dense-8 at bs 64): a decision right after a switch rested on the new chain's one cycle time so
    far, one that also waited for the next run's prefill (steps 3 at 36.5 ms against 4.4), because results whose
    cycle time does not count (across slots or step counts) still count toward the decision cadence. A decision
    waits for min_samples cycle times of the running chain, so the lower median outvotes that one."""
    slot = asp.ThroughputStepSlot(2, {"candidate_steps": [2, 3], "warmup_batches": 0})
    for _ in range(5):  # steps 2 timed at 4 ms, 3 tokens a cycle; steps 3 is estimated at 4 and tried
        slot.update([2] * 8, 0.004)
    assert slot.current_steps == 3
    # two settling results, two whose cycle time does not count, then one that waited for a prefill
    for cycle_s in (None, None, None, None, 0.040, 0.0042, 0.0042, 0.0042, 0.0042, 0.0042):
        slot.update([3] * 8, cycle_s)
    assert slot.current_steps == 3, slot.describe()  # 4 tokens in 4.2 ms beat 3 in 4.0
    assert slot.cycle_s[3] == pytest.approx(0.0042), slot.describe()


def slow_start(cycle_s: Callable[[int], float], results: int = 150) -> Callable[[int], float]:
    """``cycle_s`` after the first ``results`` cycles of the process; before, the warm-up after start-up, where
    session 18's slots measured every candidate at about the same slow cycle time (bs 1: steps 2 at 4.09 ms,
    3 at 3.84, 5 at 3.75; later 2.1 ms for steps 2), the longer chains a little less slow by chance."""
    calls = [0]
    slow = 2 * cycle_s(7)

    def timed(steps: int) -> float:
        calls[0] += 1
        return slow - 0.0002 * steps if calls[0] <= results else cycle_s(steps)
    return timed


@pytest.mark.parametrize("cycle_s", [small_batch, wide_verify], ids=["host_bound", "wide_verify"])
def test_a_shorter_chain_that_yields_as_many_tokens_wins_over_its_stale_cycle_time(asp, tmp_path: Path,
                                                                                    cycle_s: Callable) -> None:
    """Session 18 (dense-8, accept 3, K = 2/3/4/6/8): in two of six processes the bs-1 and bs-8 slots measured
    every candidate in the slow first cycles after start-up (3.8-4.1 ms at bs 1), then ran K 4-6 whose own
    cycle times refreshed (3.1 ms) while K 3's stayed stale (4.0 ms): 0.75x of plain decode at bs 1 where a
    process that settled at K 3 ran 1.84x. A cycle never gets cheaper with more drafts, so a shorter chain that
    yields as many tokens is at least as fast, whatever its last measurement says; and a chain measured slower than
    a longer one measured well after it was measured in another phase (both rules catch this case; the tests below
    take one each)."""
    params, clock = _clocked(asp, _config(tmp_path, "throughput", candidates=[1, 2, 3, 5, 7], slots=("8",)))
    timed = slow_start(cycle_s)  # the first 150 results
    _serve_phase_locked(params, clock, timed, 250)  # ~3 e2e runs at bs 1; the reprobe comes at ~260 and moves one step
    tail = _serve_phase_locked(params, clock, timed, 200)
    assert tail[2] >= 180, tail  # 3 tokens a cycle for the fewest drafts


def test_of_chains_that_yield_as_many_tokens_the_shortest_runs_though_measured_a_little_slower(asp,
                                                                                             tmp_path: Path) -> None:
    """Host-timed cycles of chains a few tenths of a ms apart can come out in the wrong order (session 18's first
    bs-1 measurements: steps 2 at 4.09 ms, 3 at 3.84, 5 at 3.75). On a draft right for two drafts, steps 2-7 all
    yield three tokens; measured 1% cheaper per step longer (too little to mark a measurement out of date), the
    slot still runs steps 2, which a real cycle never makes slower than the longer ones."""
    params, clock = _clocked(asp, _config(tmp_path, "throughput", candidates=[1, 2, 3, 5, 7], slots=("8",)))
    _serve_phase_locked(params, clock, lambda steps: 0.010 * (1 - 0.01 * steps), 300)
    tail = _serve_phase_locked(params, clock, lambda steps: 0.010 * (1 - 0.01 * steps), 200)
    assert tail[2] >= 180, tail


def test_a_chain_measured_slower_than_a_longer_one_measured_since_is_measured_again(asp, tmp_path: Path) -> None:
    """The same slow start on a draft whose acceptance falls with depth, where chains differ in tokens a cycle: the
    slot ran steps 7 when the slow phase ended, and steps 1-3 kept their slow measurements (75 ms against 18-22 ms)
    while steps 3 and 5 were re-measured by reprobes, so it settled at steps 3 where steps 2 pays 5% more. A chain
    measured slower than a longer one measured after it was measured in another phase: it is measured again."""
    best = max([1, 2, 3, 5, 7], key=lambda s: _tokens_per_s(wide_verify, FALLING, s))
    assert best == 2
    params, clock = _clocked(asp, _config(tmp_path, "throughput", candidates=[1, 2, 3, 5, 7]))
    timed = slow_start(wide_verify)
    # bs 16: enough requests a result that the acceptance estimates do not blur 2 against 1 and 3
    _serve(params, clock, timed, FALLING, batches=250, bs=16)
    tail = _serve(params, clock, timed, FALLING, batches=200, bs=16, seed=1)
    assert tail[best] >= 180, tail


# Session 31's kimi16 pair with the draft wrong at 65% of positions, one H200, bs 8 (benchmark/results/
# 20261204-1657-h200-tp1-kimi16-miss65-koff-deferred-kv/): steps 0 / 1 / 2 at 7.0 / 9.1 / 10.8 ms a cycle for
# 1.00 / ~1.31 / ~1.50 tokens, i.e. within 4% of each other in tokens per second.
MISS65_ACCEPTANCE = [0.31, 0.6, 0.5]


def miss65_bs8(steps: int) -> float:
    return {0: 0.0070, 1: 0.0091, 2: 0.0108, 3: 0.0122}[steps]


def growing_context(cycle_s: Callable[[int], float], run: int = 200, growth: float = 0.05) -> Callable[[int], float]:
    """``cycle_s`` growing by ``growth`` over each run of ``run`` results, as attention's share does while a run's
    context grows (the e2e benchmark: 128 prompt tokens, 256 new ones, ~200 results at accept length 1.3)."""
    calls = [0]

    def timed(steps: int) -> float:
        calls[0] += 1
        return cycle_s(steps) * (1 + growth * (calls[0] % run) / run)
    return timed


def _switches(trace: list[int]) -> int:
    return sum(a != b for a, b in zip(trace, trace[1:]))


def _miss65_switches(asp: Any, tmp_path: Path, seed: int, **knobs: Any) -> int:
    """Switches in 600 results at bs 8 after 200 to explore, on the miss-65 pair's cycle times."""
    params, clock = _clocked(asp, _config(tmp_path, "throughput", candidates=[0, 1, 2, 3], slots=("8",), **knobs))
    timed = growing_context(miss65_bs8)
    _serve(params, clock, timed, MISS65_ACCEPTANCE, batches=200, bs=8, seed=2 * seed)
    trace: list[int] = []
    _serve(params, clock, timed, MISS65_ACCEPTANCE, batches=600, bs=8, seed=2 * seed + 1, trace=trace)
    return _switches(trace)


def test_candidates_tied_within_the_switch_margin_do_not_trade_places(asp, tmp_path: Path) -> None:
    """On the GPU the slot switched 20 times between steps 0, 1 and 2 at bs 8. A cycle gets slower as a run's
    context grows, so the running candidate's fresh figure lands a few percent under another's older one and
    the slot moves; the cycles around each switch cost what no median shows (the first timed run lost 14% to
    plain decode). The chain a decision settled on stays unless another scores more than ``switch_margin`` above
    it; with the margin at 0 (the policy before) the slot keeps trading places. Over ten seeds: the reprobes'
    visits (two switches each) and at most one move of the settled chain: 61 switches in all (5-8 a seed) against
    96 (6-15) before."""
    rates = {s: _tokens_per_s(miss65_bs8, MISS65_ACCEPTANCE, s) for s in (0, 1, 2)}
    assert max(rates.values()) / min(rates.values()) < 1.05, rates  # the three tie
    before = [_miss65_switches(asp, tmp_path, seed, switch_margin=0.0) for seed in range(10)]
    after = [_miss65_switches(asp, tmp_path, seed) for seed in range(10)]
    assert max(after) <= 8 and sum(after) <= 70, after
    assert sum(before) >= 85, before


# Steps 2 the best by 3% (one token a draft, every draft accepted), steps 0 and 1 3% behind it, steps 3 10%.
def three_percent_behind(steps: int) -> float:
    return 0.001 * (1 + steps) / {0: 0.97, 1: 0.97, 2: 1.0, 3: 0.9}[steps]


def test_a_visit_to_a_tied_chain_goes_back_to_the_settled_one(asp, tmp_path: Path) -> None:
    """A review of the first form of the margin (a longer chain needed the margin to replace the running one,
    whatever it was) found a reprobe's visit to a shorter chain within the margin staying there: steps 2 ran 42%
    of the time where it ran 98% before. The margin is kept between the settled chain and the best, so a visit
    goes back."""
    params, clock = _clocked(asp, _config(tmp_path, "throughput", candidates=[0, 1, 2, 3], slots=("8",)))
    _serve(params, clock, three_percent_behind, [1.0, 1.0, 1.0], batches=400, bs=8)
    tail = _serve(params, clock, three_percent_behind, [1.0, 1.0, 1.0], batches=1000, bs=8, seed=1)
    assert tail[2] >= 900, tail


def test_a_candidate_better_by_more_than_the_switch_margin_still_wins(asp, tmp_path: Path) -> None:
    """The margin only breaks ties: with steps 1 at 8.0 ms (over 10% ahead of steps 0) the slot runs steps 1."""
    params, clock = _clocked(asp, _config(tmp_path, "throughput", candidates=[0, 1, 2, 3], slots=("8",)))
    base = lambda steps: 0.0080 if steps == 1 else miss65_bs8(steps)  # noqa: E731
    assert _tokens_per_s(base, MISS65_ACCEPTANCE, 1) > 1.1 * _tokens_per_s(base, MISS65_ACCEPTANCE, 0)
    cycle_s = growing_context(base)
    _serve(params, clock, cycle_s, MISS65_ACCEPTANCE, batches=200, bs=8)
    tail = _serve(params, clock, cycle_s, MISS65_ACCEPTANCE, batches=200, bs=8, seed=1)
    assert tail[1] >= 180, tail


def test_a_switch_logs_what_each_candidate_was_measured_at(asp, tmp_path: Path) -> None:
    """The rank-0 line after each switch gives every candidate's cycle time and expected tokens per cycle, so
    a GPU run's log says why the slot moved (session 16's dense-8 runs switched 65 times and said only the
    accept length)."""
    params, clock = _clocked(asp, _config(tmp_path, "throughput", candidates=[0, 1, 3], warmup_batches=1000,
                                          settle_batches=0))
    slot = params._route(1)
    assert slot.describe() == "steps 0: ? x 1.00 tok, 1: ? x ?, 3: ? x ?"
    for _ in range(3):
        clock.now += 0.004
        params.on_verify_complete([1, 3], 2)  # one request took one draft, the other all three
    assert slot.describe() == "steps 0: ? x 1.00 tok, 1: ? x 2.00 tok, 3: 4.00 ms x 3.00 tok"


def test_the_switch_line_names_the_slot(asp, tmp_path: Path, monkeypatch) -> None:
    """Session 22's kimi16 logs interleaved the bs-1 and bs-8 slots' lines with nothing to tell them apart."""
    lines: list[str] = []
    monkeypatch.setattr(asp, "log_info_on_rank0", lambda logger, msg: lines.append(msg))
    params, clock = _clocked(asp, _config(tmp_path, "throughput", candidates=[1, 3], slots=("1", "8"),
                                          warmup_batches=0, update_interval=1, settle_batches=0))
    for _ in range(4):
        clock.now += 0.004
        params.on_verify_complete([3] * 8, 8)
    switches = [line for line in lines if line.startswith("Adaptive throughput slot")]
    assert switches and all(line.startswith("Adaptive throughput slot (bs 8): steps 1:") for line in switches), lines


def test_cycle_times_after_a_switch_across_slots_and_over_the_cap_do_not_count(asp, tmp_path: Path) -> None:
    params, clock = _clocked(asp, _config(tmp_path, "throughput", candidates=[1, 3], slots=("1", "8"),
                                          warmup_batches=1000, settle_batches=1, max_cycle_s=0.05))
    small, large = params._route(1), params._route(8)
    for dt in (0.010, 0.010, 0.010):  # the first result settles, the second has no predecessor time
        clock.now += dt
        params.on_verify_complete([1], 1)
    assert small.cycle_s == {3: pytest.approx(0.010)}
    clock.now += 0.007
    params.on_verify_complete([1] * 8, 8)  # another slot (and its first result): no cycle time
    assert large.cycle_s == {}
    clock.now += 0.020
    params.on_verify_complete([1] * 8, 8)  # its second result, after its own first: counts
    assert large.cycle_s == {3: pytest.approx(0.020)}
    clock.now += 0.003
    params.on_verify_complete([1], 1)  # its predecessor was the other slot's result
    assert small.cycle_s[3] == pytest.approx(0.010)
    clock.now += 5.0  # an idle gap
    params.on_verify_complete([1], 1)
    assert small.cycle_s[3] == pytest.approx(0.010)
    small._apply_target_steps(3, 1)
    clock.now += 0.004
    params.on_verify_complete([0], 1)  # straight after a switch: skipped
    assert 1 not in small.cycle_s
    clock.now += 0.004
    params.on_verify_complete([0], 1)
    assert small.cycle_s[1] == pytest.approx(0.004)


def test_results_of_batches_launched_before_a_switch_are_not_counted(asp, tmp_path: Path) -> None:
    """Under the overlap scheduler the first results after a switch come from batches launched
    before it: their cycle times and acceptance belong to the old step count."""
    params, clock = _clocked(asp, _config(tmp_path, "throughput", candidates=[1, 3], warmup_batches=1000,
                                          settle_batches=2))
    slot = params._route(1)
    for _ in range(4):
        clock.now += 0.010
        params.on_verify_complete([2], 1)
    counts = list(slot._reached)
    assert slot.cycle_s == {3: pytest.approx(0.010)} and counts[0] > 0
    slot._apply_target_steps(3, 1)
    for _ in range(2):  # launched before the switch: 3-step cycles, 2 accepted drafts
        clock.now += 0.010
        params.on_verify_complete([2], 1)
    assert 1 not in slot.cycle_s and slot._reached == counts
    clock.now += 0.004
    params.on_verify_complete([1], 1)
    assert slot.cycle_s[1] == pytest.approx(0.004) and slot._reached != counts


def test_the_shipped_benchmark_config_loads_as_throughput_slots(asp) -> None:
    path = CONFIGS / "adaptive-throughput.json"
    params = asp.AdaptiveSpeculativeParams(initial_steps=3, cfg_path=str(path))
    assert all(isinstance(slot, asp.ThroughputStepSlot) for slot in params._slots.values())
    assert all(0 in slot.candidate_steps for slot in params._slots.values())


def test_the_steps0_benchmark_config_holds_every_slot_at_steps_0(asp) -> None:
    """benchmark/configs/adaptive-steps0.json pins speculation's turned-down state at every batch size, so a
    benchmark can time a steps-0 cycle against plain decode; no accept length may move a slot off it."""
    path = CONFIGS / "adaptive-steps0.json"
    params = asp.AdaptiveSpeculativeParams(initial_steps=3, cfg_path=str(path))
    for bs in (1, 8, 32, 64):
        slot = params._route(bs)
        assert slot.current_steps == 0
        for correct in (0, 3) * 15:  # nothing accepted, then every draft a steps-3 slot would make
            params.on_verify_complete([correct] * bs, bs)
        assert slot.current_steps == 0


def test_the_k_set_benchmark_config_explores_issue_12s_draft_lengths_at_every_batch_size(asp) -> None:
    """benchmark/configs/adaptive-ks.json: K = steps + 1 in {2, 3, 4, 6, 8} at bs 1-64 (bs x K <= 512), on the
    throughput policy, which measures every candidate, so a run replays each K's graphs (verify_graph_hit)."""
    path = CONFIGS / "adaptive-ks.json"
    params = asp.AdaptiveSpeculativeParams(initial_steps=3, cfg_path=str(path))
    for bs in (1, 8, 32, 64):
        slot = params._route(bs)
        assert isinstance(slot, asp.ThroughputStepSlot)
        assert [s + 1 for s in slot.candidate_steps] == [2, 3, 4, 6, 8] and bs * 8 <= 512


# The decode batch sizes SGLang 0.5.17 captures with graphs to bs 64 (rank 0's start-up log of a kimi16 K-set run).
GRAPH_BS_TO_64 = [*range(1, 9), *range(10, 33, 2), 40, 44, 48, 52, 56, 60, 64]


def test_the_row_budget_config_keeps_every_state_s_graphs_within_fixed_k_4s_rows(asp) -> None:
    """benchmark/configs/adaptive-ks-rows256.json: the K set with K 6 and 8 only where bs x K <= 256, the rows a
    fixed K 4 verifies at bs 64; patch 0016 captures each state only at the batch sizes routed to it, so no K-set
    graph needs larger temporaries than fixed K 4's. Small batches keep the whole K set."""
    params = asp.AdaptiveSpeculativeParams(initial_steps=3, cfg_path=str(CONFIGS / "adaptive-ks-rows256.json"))
    params.set_cuda_graph_bs(GRAPH_BS_TO_64)
    rows = {steps: (steps + 1) * max(params.cuda_graph_bs_for_step(steps)) for steps in (1, 2, 3, 5, 7)}
    assert rows == {1: 128, 2: 192, 3: 256, 5: 192, 7: 256}
    assert [s + 1 for s in params._route(32).candidate_steps] == [2, 3, 4, 6, 8]
    for bs in (33, 40, 64):
        assert [s + 1 for s in params._route(bs).candidate_steps] == [2, 3, 4]


def test_the_k_set_with_speculation_off_config_adds_steps_0_to_the_k_set(asp) -> None:
    """benchmark/configs/adaptive-ks-off.json: the K set above plus steps 0 (speculation turned down), so the
    throughput policy can choose no drafts where every K loses to plain decode (issue 12, accept ~1.5)."""
    k_set = asp.AdaptiveSpeculativeParams(initial_steps=3, cfg_path=str(CONFIGS / "adaptive-ks.json"))
    off = asp.AdaptiveSpeculativeParams(initial_steps=3, cfg_path=str(CONFIGS / "adaptive-ks-off.json"))
    assert sorted(off._slots) == sorted(k_set._slots)
    for bs in (1, 8, 32, 64):
        slot = off._route(bs)
        assert isinstance(slot, asp.ThroughputStepSlot)
        assert slot.candidate_steps == [0] + k_set._route(bs).candidate_steps


@pytest.mark.parametrize(
    "name",
    [
        "adaptive-throughput.json",
        "adaptive-steps0.json",
        "adaptive-ks.json",
        "adaptive-ks-off.json",
        "adaptive-ks-rows256.json",
    ],
)
def test_every_shipped_config_lets_the_benchmark_start_at_k_4(asp, name: str) -> None:
    """The server refuses to start unless its starting --speculative-num-steps is in the union of the
    config's candidates (``speculative_hook._init_adaptive_speculative_params``); benchmark/run.py starts
    at --ks 4, steps 3. Session 15's steps-0 profile died at start-up on exactly this."""
    assert 3 in asp.resolve_candidate_steps_from_config(str(CONFIGS / name))


def test_a_candidate_that_never_gets_measured_is_given_up_after_max_tries(asp, tmp_path: Path) -> None:
    """Results alternating between two slots never give either a cycle time; exploration must not
    stay on one unmeasured candidate for ever."""
    params, clock = _clocked(asp, _config(tmp_path, "throughput", candidates=[1, 3], slots=("1", "8"),
                                          warmup_batches=0, update_interval=1, max_tries=3))
    small = params._route(1)
    for _ in range(40):
        clock.now += 0.01
        params.on_verify_complete([1], 1)
        clock.now += 0.01
        params.on_verify_complete([1] * 8, 8)
    assert small.cycle_s == {}
    assert small._tries == {1: 3, 3: 3}


def test_each_result_s_cycle_time_is_logged_at_debug_level(trees, tmp_path: Path, caplog, monkeypatch) -> None:
    """Patch 0051 (0.5.17 only): every result's time since the slot's previous one, with its step count and its
    place since the switch, at debug level; the first result has no previous one."""
    monkeypatch.delenv("SGLANG_SPEC_ADAPTIVE_POLICY", raising=False)
    asp = TreeImporter.module(trees.get("patched"), MODULE)
    params, clock = _clocked(asp, _config(tmp_path, "throughput"))
    caplog.set_level(logging.DEBUG, logger=MODULE)
    _serve(params, clock, lambda steps: 0.004, 0.7, batches=4)
    lines = [r.getMessage() for r in caplog.records if "since the switch" in r.getMessage()]
    assert lines[:3] == [f"Adaptive throughput slot (bs 1): steps 3, result {n} since the switch, 4.000 ms after the last"
                         for n in (2, 3, 4)]  # fmt: skip
    caplog.clear()
    caplog.set_level(logging.INFO, logger=MODULE)
    _serve(params, clock, lambda steps: 0.004, 0.7, batches=4)
    assert not [r for r in caplog.records if "since the switch" in r.getMessage()]


def shared_slow_stretch(cycle_s: Callable[[int], float], start: int, length: int,
                        factor: float = 2.0) -> Callable[[int], float]:
    """``cycle_s``, ``factor`` times slower for ``length`` results from result ``start``, whatever chain runs."""
    calls = [0]

    def timed(steps: int) -> float:
        calls[0] += 1
        return cycle_s(steps) * (factor if start <= calls[0] < start + length else 1.0)
    return timed


# dense8-miss65 at bs 1 on one H100 with the spec off path (session 41, benchmark/results/20261205-1600-h100-tp1-
# dense8-miss65-koff-off-samples/): steps 0 2.1 ms a cycle, steps 1 4.0 ms for ~1.33 tokens.
def off_path_bs1(steps: int) -> float:
    return 0.0021 if steps == 0 else 0.0040 + 0.0002 * steps


def test_a_slow_stretch_every_chain_shares_does_not_move_the_slot(asp, tmp_path: Path) -> None:
    """Patch 0053. Session 41's per-result samples (dense8-miss65, bs 1) show stretches of a few to 50 results at
    1.3-7x the steady cycle, whatever chain ran. One landing on steps 0's window made it look slower than steps 1's
    figure from before the stretch; the slot moved to steps 1, the stretch ended, steps 1's fresh 4.2 ms for 1.33
    tokens beat steps 0's stale 4.2 ms, and steps 0 (not slower than a longer chain) was never out of date: the run
    read 0.57x plain decode where steps 0 held gave 0.85x. Here 8 results at twice the cost: the slot stays at
    steps 0 (before: 5 of the 200 results after the stretch began)."""
    params, clock = _clocked(asp, _config(tmp_path, "throughput", candidates=[0, 1], slots=("1",)), initial=1)
    timed = shared_slow_stretch(off_path_bs1, start=300, length=8)
    _serve(params, clock, timed, [0.33], batches=300, bs=1)
    assert params.get_steps_for_batch(1) == 0
    stretch_and_after = _serve(params, clock, timed, [0.33], batches=200, bs=1, seed=1)
    assert stretch_and_after[0] >= 190, stretch_and_after


def test_a_visit_adds_to_the_chains_window_from_its_earlier_runs(asp) -> None:
    """Patch 0053: a visit of a few results that falls inside a slow stretch does not rate the chain by the stretch
    alone; its samples join the window kept from the chain's earlier runs (before, each visit timed it afresh)."""
    slot = asp.ThroughputStepSlot(0, {"candidate_steps": [0, 2], "warmup_batches": 10**6})
    for _ in range(14):
        slot.update([0], 0.0020)
    assert slot.cycle_s[0] == pytest.approx(0.0020)
    slot._apply_target_steps(0, 2)
    for _ in range(6):
        slot.update([2], 0.0040)
    slot._apply_target_steps(2, 0)
    for _ in range(5):  # two settling results, then three inside a stretch
        slot.update([0], 0.0050)
    assert slot.cycle_s[0] == pytest.approx(0.0020), slot.describe()
    assert slot._waiting_for_samples() is False  # three fresh samples since the switch-in


def test_a_chain_timed_long_before_the_settled_one_is_visited_before_the_slot_moves_to_it(asp) -> None:
    """Patch 0053: the settled chain's figure is recent and the best-scored one's is 10 or more decisions older; the
    slot visits it (timed afresh beside the settled chain) and keeps its settled chain as home."""
    slot = asp.ThroughputStepSlot(1, {"candidate_steps": [0, 1], "warmup_batches": 0})
    for _ in range(6):
        slot.update([1], 0.0040)  # steps 1: 2 tokens in 4 ms, then tried steps 0
    assert slot.current_steps == 0
    for _ in range(60):
        slot.update([0], 0.0015)  # steps 0 settled: 1 token in 1.5 ms beats 2 in 4
    assert slot.current_steps == 0 and slot._home == 0
    for _ in range(20):
        slot.update([0], 0.0030)  # a slow stretch: steps 0 now reads 3 ms
        if slot.current_steps != 0:
            break
    assert slot.current_steps == 1 and slot._home == 0, slot.describe()
    assert 1 not in slot._cycle_samples, "the visit times steps 1 afresh"
