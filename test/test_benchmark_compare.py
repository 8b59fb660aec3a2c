"""The regression guard: a 10% latency regression fails, 3% is quiet, improvements are only reported,
a move inside the rounds' spread is noise, a lost graph in any round fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmark.driver import compare
from benchmark.driver.rounds import merge
from benchmark.driver.schema import Record, ResultSet


def rec(value: float, *, metric: str = "latency_ms", mode: str = "verify", variant: str = "fork",
        graph: bool | None = True, bs: int = 8) -> Record:
    return Record(variant=variant, config="tp1", backend="triton", mode=mode, bs=bs, k=4, topk=1, metric=metric,
                  value=value, graph=graph)


def write(path: Path, *records: Record) -> Path:
    ResultSet(meta={"name": path.stem}, records=list(records)).save(path)
    return path


def run(tmp_path: Path, base: list[Record], new: list[Record], capsys) -> tuple[int, str]:
    code = compare.main([str(write(tmp_path / "base.json", *base)), str(write(tmp_path / "new.json", *new))])
    return code, capsys.readouterr().out


def test_ten_percent_latency_regression_exits_nonzero(tmp_path, capsys):
    code, out = run(tmp_path, [rec(1.00)], [rec(1.10)], capsys)
    assert code == 1
    assert "REGRESSION" in out and "bs=8 k=4 topk=1 latency_ms" in out and "+10.0%" in out


def test_three_percent_move_is_quiet(tmp_path, capsys):
    code, out = run(tmp_path, [rec(1.00), rec(500.0, metric="tokens_per_s", mode="e2e_spec", graph=None)],
                    [rec(1.03), rec(485.0, metric="tokens_per_s", mode="e2e_spec", graph=None)], capsys)
    assert code == 0
    assert "0 moved more than 5%" in out and "REGRESSION" not in out and "better" not in out


def test_improvements_are_reported_but_do_not_fail(tmp_path, capsys):
    base = [rec(1.00), rec(100.0, metric="tokens_per_s", mode="e2e_spec", graph=None)]
    new = [rec(0.80), rec(150.0, metric="tokens_per_s", mode="e2e_spec", graph=None)]
    code, out = run(tmp_path, base, new, capsys)
    assert code == 0
    assert out.count("better") == 2 and "-20.0%" in out and "+50.0%" in out


def test_throughput_drop_is_a_regression(tmp_path, capsys):
    code, out = run(tmp_path, [rec(100.0, metric="tokens_per_s", mode="e2e_nospec", graph=None)],
                    [rec(90.0, metric="tokens_per_s", mode="e2e_nospec", graph=None)], capsys)
    assert code == 1 and "REGRESSION" in out


def test_losing_the_cuda_graph_fails_even_when_fast(tmp_path, capsys):
    code, out = run(tmp_path, [rec(1.00, graph=True)], [rec(1.01, graph=False)], capsys)
    assert code == 1 and "graph replay lost" in out


def test_neutral_metric_moves_are_reported_not_failed(tmp_path, capsys):
    code, out = run(tmp_path, [rec(3.0, metric="accept_len", mode="e2e_spec", graph=None)],
                    [rec(2.0, metric="accept_len", mode="e2e_spec", graph=None)], capsys)
    assert code == 0 and "moved" in out and "accept_len" in out


def test_missing_figures_are_listed(tmp_path, capsys):
    code, out = run(tmp_path, [rec(1.0, bs=1), rec(1.0, bs=2)], [rec(1.0, bs=1)], capsys)
    assert code == 0 and "missing  1 figures" in out


def test_variants_within_one_file(tmp_path, capsys):
    path = write(tmp_path / "r.json", rec(1.0, variant="stock"), rec(1.2, variant="fork"))
    assert compare.main([str(path), "--variants", "stock", "fork"]) == 1
    assert "REGRESSION  fork tp1 triton verify bs=8" in capsys.readouterr().out
    comparison = compare.compare_variants(ResultSet.load(path), "fork", "stock")
    assert [m.improved for m in comparison.moves] == [True]


def test_usage_errors_exit_2(tmp_path, capsys):
    (tmp_path / "bad.json").write_text('{"schema": "something-else"}')
    assert compare.main([str(tmp_path / "bad.json"), str(tmp_path / "bad.json")]) == 2
    assert "schema" in capsys.readouterr().err
    path = write(tmp_path / "r.json", rec(1.0, variant="stock"))
    assert compare.main([str(path), "--variants", "stock", "fork"]) == 2
    assert "variant 'fork' is not in the results" in capsys.readouterr().err


@pytest.mark.parametrize("threshold,expected", [(0.05, 1), (0.15, 0)])
def test_threshold_option(tmp_path, capsys, threshold, expected):
    base, new = write(tmp_path / "a.json", rec(1.0)), write(tmp_path / "b.json", rec(1.1))
    assert compare.main([str(base), str(new), "--threshold", str(threshold)]) == expected


def spread(rounds: list[float], *, variant: str = "fork", graphs: list[bool] | None = None) -> Record:
    """A figure measured in several rounds, merged the way collect.py merges them."""
    graphs = graphs or [True] * len(rounds)
    return merge([(n + 1, rec(v, variant=variant, graph=g)) for n, (v, g) in enumerate(zip(rounds, graphs))])


def test_a_move_inside_the_spread_is_noise_and_passes(tmp_path, capsys):
    code, out = run(tmp_path, [spread([1.0, 0.9, 1.12])], [spread([1.1, 1.0, 1.2])], capsys)
    assert code == 0
    assert "1 within it (noise), 0 regressions" in out
    assert "noise  fork tp1 triton verify bs=8" in out and "1 [0.9..1.12] x3 -> 1.1 [1..1.2] x3 (+10.0%)" in out


def test_a_move_beyond_threshold_and_spread_fails(tmp_path, capsys):
    code, out = run(tmp_path, [spread([1.0, 0.98, 1.03])], [spread([1.2, 1.17, 1.24])], capsys)
    assert code == 1
    assert "REGRESSION  fork tp1 triton verify bs=8" in out and "[0.98..1.03] x3 -> 1.2 [1.17..1.24] x3" in out


def test_separated_but_below_threshold_is_quiet(tmp_path, capsys):
    code, out = run(tmp_path, [spread([1.0, 1.001, 0.999])], [spread([1.03, 1.031, 1.029])], capsys)
    assert code == 0 and "0 moved" in out and "0 within it" in out


def test_one_eager_round_loses_the_graph(tmp_path, capsys):
    new = spread([1.0, 1.0, 1.0], graphs=[True, False, True])
    assert new.graph is None
    code, out = run(tmp_path, [spread([1.0, 1.0, 1.0])], [new], capsys)
    assert code == 1 and "graph replay lost in some runs" in out


def test_a_schema_1_baseline_is_a_point_against_the_new_spread():
    old = rec(1.0)  # schema 1: no rounds, so no spread
    assert compare.judge(old.key(), old, spread([1.1, 0.99, 1.2]), 0.05).tag == "noise"
    assert compare.judge(old.key(), old, spread([1.1, 1.08, 1.2]), 0.05).regression
