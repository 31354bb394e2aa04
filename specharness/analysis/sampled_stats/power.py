"""Power of a chi-square test: the noncentrality it needs, from which the first-token MDE is computed.

Tests and assumptions: docs/method.md#the-distribution-check-under-sampling.
"""

from __future__ import annotations

from scipy import optimize
from scipy import stats as sps

__all__ = ["noncentrality_for_power"]


def noncentrality_for_power(df: int, alpha: float, power: float) -> float:
    """The noncentrality at which a chi-square test with ``df`` degrees of freedom at level ``alpha`` has ``power``
    (``scipy.stats.ncx2``)."""
    critical = float(sps.chi2.isf(alpha, df))

    def gap(nc: float) -> float:
        return float(sps.ncx2.sf(critical, df, nc)) - power

    high = 1.0
    while gap(high) < 0:
        high *= 2.0
    return float(optimize.brentq(gap, 0.0, high, xtol=1e-10))
