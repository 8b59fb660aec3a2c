"""The chi-square two-sample test the EAGLE-3 sampling GPU test relies on (test/gpu/token_distribution.py)."""

from __future__ import annotations

import random

import pytest

from token_distribution import binned, chi_square_survival, two_sample
from collections import Counter


def draw(weights: list[float], n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return rng.choices(range(len(weights)), weights=weights, k=n)


@pytest.mark.parametrize("statistic, dof, expected", [(3.841, 1, 0.05), (6.635, 1, 0.01), (18.307, 10, 0.05),
                                                      (0.0, 4, 1.0)])
def test_survival_matches_chi_square_tables(statistic: float, dof: int, expected: float) -> None:
    assert chi_square_survival(statistic, dof) == pytest.approx(expected, abs=2e-4)


def test_same_distribution_is_not_rejected() -> None:
    weights = [0.33] + [0.67 / 15] * 15
    p_values = [two_sample(draw(weights, 3000, seed), draw(weights, 3000, seed + 100)).p_value for seed in range(20)]
    assert sum(p < 0.01 for p in p_values) <= 1  # about 1% of true nulls fall below 0.01
    assert min(p_values) > 1e-4


def test_a_shifted_distribution_is_rejected() -> None:
    """What the GPU test's negative control relies on: temperature 16 vs 24 on a 32-logit margin."""
    import math

    def softmax_top(t: float) -> list[float]:
        logits = [32.0] + [0.0] * 15
        z = [math.exp(l / t) for l in logits]
        return [v / sum(z) for v in z]

    result = two_sample(draw(softmax_top(16.0), 3000, 1), draw(softmax_top(24.0), 3000, 2))
    assert result.p_value < 1e-6, result.line()


def test_sparse_categories_merge_into_one_bin() -> None:
    a = Counter({1: 500, 2: 500, 3: 1, 4: 2})
    b = Counter({1: 490, 2: 510, 5: 3})
    assert binned(a, b, 5.0) == [(500, 490), (500, 510), (3, 3)]


def test_empty_sample_is_an_error() -> None:
    with pytest.raises(ValueError):
        two_sample([], [1, 2])
