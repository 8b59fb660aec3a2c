"""benchmark/tools/adaptive_replay.py: the throughput policy replayed on a device run's own per-result cycle times."""

from __future__ import annotations

from pathlib import Path

import pytest
from sglang_trees import trees  # noqa: F401 (a fixture)

from benchmark.tools import adaptive_replay
from benchmark.tools.adaptive_sim import expected_tokens, load_policy

RECORD = (Path(__file__).resolve().parents[1] / "benchmark" / "results"
          / "20261205-1600-h100-tp1-dense8-miss65-koff-off-samples" / "slot-samples.txt")


def _line(slot: str, steps: int, place: int, ms: float) -> str:
    return (f"[2026-12-05 16:02:33] Adaptive throughput slot ({slot}): steps {steps}, result {place} since the "
            f"switch, {ms:.3f} ms after the last")


def test_a_record_gives_each_chains_steady_cycle_and_each_results_ratio_to_it(tmp_path: Path) -> None:
    lines = [_line("bs 1", 0, 1, 50.0), _line("bs 1", 0, 2, 9.0)]  # settling results: not the chain's time
    lines += [_line("bs 1", 0, p, ms) for p, ms in zip(range(3, 8), (2.0, 2.0, 2.0, 2.0, 6.0))]
    lines += [_line("bs 1", 2, 3, 4.0), _line("bs 64", 0, 3, 3.0), "unrelated line"]
    path = tmp_path / "samples.txt"
    path.write_text("\n".join(lines))
    record = adaptive_replay.read_record(path, "bs 1")
    assert record.steady_s == pytest.approx({0: 0.002, 2: 0.004})  # the lower quartile: a burst does not raise it
    assert record.ratios == pytest.approx([1.0, 1.0, 1.0, 1.0, 3.0, 1.0])
    assert record.switch_ratio == pytest.approx({0: 4.5})  # the settling results' lower median: what a switch costs
    with pytest.raises(SystemExit, match="no samples"):
        adaptive_replay.read_record(path, "bs 8")


def test_expected_tokens_follow_the_rate_of_each_draft_position() -> None:
    assert expected_tokens((0.5, 0.5), 2) == pytest.approx(1.75)
    assert expected_tokens((0.5,), 3) == pytest.approx(1.5)  # no draft accepted past the rates


def test_on_an_undisturbed_record_the_policy_finds_the_best_fixed_chain(trees, tmp_path: Path) -> None:
    """Steps 0 at 2 ms against steps 2 at 4 ms for 1.5 tokens: with every result at its chain's steady time the
    patched policy must run close to steps 0's throughput; a policy that never left steps 2 would score 0.75."""
    record = adaptive_replay.Record({0: 0.002, 1: 0.0039, 2: 0.004}, [1.0] * 50)
    asp = load_policy(trees.get("patched"))
    out = adaptive_replay.replay(asp, record, (0.33, 0.5), bs=1, results=1500, seed=0)
    assert 0.9 < out.of_best <= 1.0 + 1e-9, out
    assert out.share[0] > 0.85, out


def test_a_switch_costs_the_records_settling_ratio(trees) -> None:
    """Each switch's first two results cost the switched-to chain's settling ratio: a policy held on one chain pays
    nothing, and the record's switches are not free."""
    asp = load_policy(trees.get("patched"))
    free = adaptive_replay.Record({0: 0.002, 1: 0.0039, 2: 0.004}, [1.0] * 50)
    dear = adaptive_replay.Record(free.steady_s, free.ratios, {0: 3.0, 1: 3.0, 2: 3.0})
    a = adaptive_replay.replay(asp, free, (0.33, 0.5), bs=1, results=1500, seed=0)
    b = adaptive_replay.replay(asp, dear, (0.33, 0.5), bs=1, results=1500, seed=0)
    assert b.switches > 0 and b.of_best < a.of_best, (a, b)


def test_the_session_41_record_replays(trees, capsys) -> None:
    assert adaptive_replay.main(["--tree", str(trees.get("patched")), "--samples", str(RECORD), "--slot", "bs 1",
                                 "--results", "600", "--seeds", "1"]) == 0
    out = capsys.readouterr().out
    assert "best fixed: steps 0" in out and out.count("\n| `") == 1, out
