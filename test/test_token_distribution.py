"""The chi-square two-sample test the EAGLE-3 sampling GPU test relies on (test/gpu/token_distribution.py).

Also the GPU test's choice of top_k, on a synthetic copy of the oracle target's tiered logits: with
top_k inside the tied middle tier a tie-exclusive sampler (torch.topk) and a tie-inclusive one (a
pivot-based top-k renorm) draw from different distributions and ``two_sample`` tells them apart,
while at ``untied_top_k`` they agree.
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from pathlib import Path

import pytest
import torch

from token_distribution import OracleTiers, binned, chi_square_survival, two_sample, untied_top_k


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


TINY = OracleTiers((63, 65), 32.0)  # the tiny pair's walk: a*b = 4095 hot tokens, a + b - 2 = 126 in the middle tier


def tiered_logits(tiers: OracleTiers, vocab: int = 4096) -> torch.Tensor:
    """The oracle target's logits after one token: 2m for the next token, m for the middle tier, 0 else."""
    logits = torch.zeros(vocab, dtype=torch.float64)
    logits[0] = 2 * tiers.margin
    logits[1:1 + tiers.middle] = tiers.margin
    return logits


def top_k_sample(logits: torch.Tensor, temperature: float, top_k: int, keep_ties: bool, seed: int) -> list[int]:
    """3000 draws after top-k: exactly ``top_k`` tokens (torch.topk), or every token >= the k-th (pivot renorm)."""
    top = torch.topk(logits, top_k)
    if keep_ties:
        keep = logits >= top.values[-1]
    else:
        keep = torch.zeros_like(logits, dtype=torch.bool).scatter_(0, top.indices, True)
    probs = torch.softmax(torch.where(keep, logits / temperature, float("-inf")), dim=0)
    return torch.multinomial(probs, 3000, replacement=True, generator=torch.Generator().manual_seed(seed)).tolist()


@pytest.mark.parametrize("temperature", [8.0, 16.0])
def test_top_k_inside_a_tier_tells_the_two_samplers_apart(temperature: float) -> None:
    """The H200 failure with top_k 16: tie-exclusive and tie-inclusive top-k differ, and the test sees it."""
    logits = tiered_logits(TINY)
    exclusive = top_k_sample(logits, temperature, 16, keep_ties=False, seed=1)
    inclusive = top_k_sample(logits, temperature, 16, keep_ties=True, seed=2)
    assert len(set(exclusive)) <= 16 < len(set(inclusive))
    result = two_sample(inclusive, exclusive)
    assert result.p_value < 1e-6, result.line()


def test_untied_top_k_makes_the_two_samplers_agree() -> None:
    logits = tiered_logits(TINY)
    top_k = untied_top_k(TINY.cycle)
    assert top_k == 127 and logits.sort(descending=True).values[top_k - 1] > logits.sort(descending=True).values[top_k]
    exclusive = top_k_sample(logits, 8.0, top_k, keep_ties=False, seed=1)
    inclusive = top_k_sample(logits, 8.0, top_k, keep_ties=True, seed=2)
    assert set(exclusive) | set(inclusive) <= set(range(top_k))
    result = two_sample(inclusive, exclusive)
    assert result.p_value > 1e-3, result.line()
    assert exclusive.count(0) / 3000 == pytest.approx(TINY.hot_share(8.0), abs=0.03)


def test_the_negative_control_is_rejected() -> None:
    """What the GPU test's negative control relies on: temperature 12 vs 8 at the untied top_k."""
    logits, top_k = tiered_logits(TINY), untied_top_k(TINY.cycle)
    result = two_sample(top_k_sample(logits, 12.0, top_k, keep_ties=False, seed=1),
                        top_k_sample(logits, 8.0, top_k, keep_ties=False, seed=2))
    assert result.p_value < 1e-6, result.line()


def test_hot_share_follows_the_tiers() -> None:
    assert TINY.middle == 126
    assert TINY.hot_share(8.0) == pytest.approx(math.exp(4) / (math.exp(4) + 126))
    assert 0.25 < TINY.hot_share(8.0) < 0.35 and 0.05 < TINY.hot_share(12.0) < 0.15


def test_tiers_are_read_from_models_json(tmp_path: Path) -> None:
    (tmp_path / "models.json").write_text(json.dumps({"oracle": {"cycle": [63, 65], "logit_margin": 32.0}}))
    assert OracleTiers.read(tmp_path) == TINY


@pytest.mark.parametrize("manifest", [None, {"oracle": None}, {"oracle": {"cycle": [63], "logit_margin": 32.0}}])
def test_a_pair_without_an_oracle_is_an_error(tmp_path: Path, manifest: dict | None) -> None:
    if manifest is not None:
        (tmp_path / "models.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="not an oracle pair"):
        OracleTiers.read(tmp_path)


def test_untied_top_k_rejects_an_empty_cycle() -> None:
    with pytest.raises(ValueError):
        untied_top_k((0, 5))


def test_sparse_categories_merge_into_one_bin() -> None:
    a = Counter({1: 500, 2: 500, 3: 1, 4: 2})
    b = Counter({1: 490, 2: 510, 5: 3})
    assert binned(a, b, 5.0) == [(500, 490), (500, 510), (3, 3)]


def test_empty_sample_is_an_error() -> None:
    with pytest.raises(ValueError):
        two_sample([], [1, 2])
