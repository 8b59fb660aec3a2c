"""Two-sample chi-square test of token counts: do two samplers draw from one distribution?

Used by ``test_sampling_distribution_gpu.py`` (EAGLE-3's accepted tokens against the target's own
sampling) and tested on CPU by ``test/test_token_distribution.py``. Categories whose pooled
expected count in either sample is below ``min_expected`` are merged into one "other" bin (the
usual validity rule of the chi-square approximation); the p-value is the chi-square survival
function, ``Q(dof / 2, stat / 2)``, from ``torch.special.gammaincc``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class ChiSquare:
    statistic: float
    dof: int
    p_value: float
    bins: int
    n_a: int
    n_b: int

    def line(self) -> str:
        return (f"chi2 {self.statistic:.1f} on {self.dof} dof, p = {self.p_value:.3g} "
                f"({self.bins} bins, {self.n_a} vs {self.n_b} samples)")


def chi_square_survival(statistic: float, dof: int) -> float:
    """P(X >= statistic) for X ~ chi-square(dof)."""
    import torch

    if dof < 1:
        return 1.0
    return float(torch.special.gammaincc(torch.tensor(dof / 2.0, dtype=torch.float64),
                                         torch.tensor(statistic / 2.0, dtype=torch.float64)))


def binned(a: Counter, b: Counter, min_expected: float) -> list[tuple[int, int]]:
    """(count in a, count in b) per bin, sparse categories merged into a last "other" bin."""
    n_a, n_b = sum(a.values()), sum(b.values())
    total = n_a + n_b
    keep, other = [], (0, 0)
    for token in sorted(set(a) | set(b)):
        pooled = (a[token] + b[token]) / total
        if pooled * min(n_a, n_b) >= min_expected:
            keep.append((a[token], b[token]))
        else:
            other = (other[0] + a[token], other[1] + b[token])
    if sum(other) > 0:
        keep.append(other)
    return keep


def two_sample(a: Iterable[int], b: Iterable[int], min_expected: float = 5.0) -> ChiSquare:
    """Chi-square test that samples ``a`` and ``b`` (token ids) come from one distribution."""
    ca, cb = Counter(a), Counter(b)
    n_a, n_b = sum(ca.values()), sum(cb.values())
    if not n_a or not n_b:
        raise ValueError("both samples need at least one token")
    bins = binned(ca, cb, min_expected)
    statistic = 0.0
    for count_a, count_b in bins:
        pooled = (count_a + count_b) / (n_a + n_b)
        for count, n in ((count_a, n_a), (count_b, n_b)):
            expected = pooled * n
            statistic += (count - expected) ** 2 / expected
    dof = len(bins) - 1
    return ChiSquare(statistic, dof, chi_square_survival(statistic, dof), len(bins), n_a, n_b)
