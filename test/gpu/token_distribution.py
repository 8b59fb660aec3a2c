"""Two-sample chi-square test of token counts: do two samplers draw from one distribution?

Used by ``test_sampling_distribution_gpu.py`` (EAGLE-3's accepted tokens against the target's own
sampling) and tested on CPU by ``test/test_token_distribution.py``. ``untied_top_k`` picks the GPU
test's ``top_k`` from the oracle pair's manifest so that two samplers cannot differ on ties (see its
docstring). Categories whose pooled expected count in either sample is below ``min_expected`` are
merged into one "other" bin (the usual validity rule of the chi-square approximation); the p-value
is the chi-square survival function, ``Q(dof / 2, stat / 2)``, from ``torch.special.gammaincc``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


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


@dataclass(frozen=True)
class OracleTiers:
    """What fixes the oracle target's logit tiers: the walk's cycle lengths ``(a, b)`` and the margin."""

    cycle: tuple[int, int]
    margin: float

    @classmethod
    def read(cls, models: Path) -> OracleTiers:
        """From ``models.json`` (``oracle.cycle`` and ``oracle.logit_margin``) in the ``models`` folder."""
        from sglang_fastpath.models.folder import ModelsFolder

        oracle = ModelsFolder(models).manifest().get("oracle") or {}
        if len(oracle.get("cycle", ())) != 2 or "logit_margin" not in oracle:
            raise ValueError(f"{models} is not an oracle pair: models.json has no oracle.cycle/logit_margin")
        a, b = oracle["cycle"]
        return cls((int(a), int(b)), float(oracle["logit_margin"]))

    @property
    def middle(self) -> int:
        """How many tokens share exactly one walk coordinate with the next token (logit ``margin``)."""
        return sum(self.cycle) - 2

    def hot_share(self, temperature: float) -> float:
        """The next token's share of the mass kept by ``untied_top_k`` at ``temperature``."""
        hot = math.exp(self.margin / temperature)
        return hot / (hot + self.middle)


def untied_top_k(cycle: tuple[int, int]) -> int:
    """The ``top_k`` whose boundary falls between two distinct logit tiers of the oracle target.

    The oracle target's logits (``sglang_fastpath.models.walk``) come in three tiers: ``2 * margin``
    for its next token ``g(x)``, ``margin`` for the ``a + b - 2`` hot tokens that share exactly one
    walk coordinate with ``g(x)``, and 0 for every other token. A ``top_k`` inside a tier cuts
    through tokens with equal logits, and samplers then legitimately differ: ``torch.topk`` (the
    plain sampler) keeps exactly ``k`` tokens, while a threshold/pivot top-k renorm (EAGLE verify's
    ``top_k_renorm_prob``) keeps every token at or above the k-th value. ``a + b - 1`` keeps
    ``g(x)`` and the whole middle tier, so the k-th and (k+1)-th logits are ``margin`` and 0: no tie,
    one distribution for both.
    """
    a, b = cycle
    if a < 1 or b < 1:
        raise ValueError(f"cycle lengths must be positive, got {cycle}")
    return a + b - 1
