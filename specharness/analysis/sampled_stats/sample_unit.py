"""The three pooled tests over independent samples: first token, length and pass rate, per case and pooled.

Each gives a :class:`StatisticResult` with its effect and minimum detectable effect (:data:`SAMPLE_TESTS`, in order).
Tests and assumptions: docs/method.md#the-distribution-check-under-sampling.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable

import numpy as np
from scipy import stats as sps

from specharness.analysis.sampled_stats.categories import merge_categories
from specharness.analysis.sampled_stats.power import noncentrality_for_power
from specharness.analysis.sampled_stats.records import Pairs, StatisticResult

__all__ = [
    "FIRST_TOKEN_METHOD",
    "LENGTH_METHOD",
    "PASS_RATE_METHOD",
    "SAMPLE_TESTS",
    "Z_CAP",
    "first_token_test",
    "length_test",
    "pass_rate_test",
]

Z_CAP = 38.0  # |z| beyond which the normal tail underflows to 0; a per-case z is capped there to stay finite


def _empty(name: str, method: str, unit: str, alpha: float, skipped: int, df: int | None = None) -> StatisticResult:
    return StatisticResult(
        name, method, math.nan, df, math.nan, alpha, False, math.nan, math.nan, unit, 0, skipped, 0, 0
    )


FIRST_TOKEN_METHOD = (
    "Pearson chi-square per case on the 2 x K first-token table (scipy.stats.chi2_contingency, no continuity "
    "correction; tokens merged until every expected count >= 5); pooled: sum of the per-case statistics and df "
    "(scipy.stats.chi2.sf). Effect: Cohen's w = sqrt(max(X - df, 0) / N), N the samples of both streams."
)


def first_token_test(pairs: Pairs, alpha: float, power: float) -> StatisticResult:
    """Pooled chi-square over independent cases: under H0 each per-case statistic is approximately chi-square with
    its df, so their sum is chi-square with the summed df. The sum is the verdict (rather than Fisher's combination of
    the per-case p-values, ``combine_pvalues(method="fisher")``) because its power is a function of one number, the
    total noncentrality sum N_i w_i^2, which is what the MDE below is computed from, so the verdict and the MDE
    describe the same test; Fisher's combination weights a 40-sample case like a 400-sample one and has no such
    MDE, and a single striking case already shows in the per-case p-values.

    Cohen's w for a 2 x K table is sqrt(chi-square noncentrality / N): the standardised distance between the joint
    table and the one independence would give (0.1 small, 0.3 medium, 0.5 large). The pooled w is the N-weighted root
    mean square of the cases' w, estimated without its null bias (E[X] = df + N w^2). The MDE is the w at which the
    pooled test has the requested power (noncentral chi-square, noncentrality N w^2, pooled df).

    Total variation: with stream shares p_a, p_b of a case, Cauchy–Schwarz gives w >= 2 sqrt(p_a p_b) TV for the
    total-variation distance TV between the two streams' first-token distributions (on the merged categories). So
    if every contributing case has TV >= sqrt(nc* / (4 sum_i n_a n_b / N_i)) the noncentrality is at least nc* and the
    test has at least the stated power; that bound is ``mde_total_variation`` (equal to the MDE w for equal stream
    sizes). Differences confined to tokens merged into "other" are not seen.
    """
    unit = "Cohen's w"
    per_case: dict[str, float] = {}
    stat = 0.0
    df = 0
    samples_a = samples_b = 0
    harmonic = 0.0  # sum over cases of n_a n_b / N
    skipped = 0
    for case_id, (a, b) in pairs.items():
        table = merge_categories(
            Counter(s.first_token for s in a if s.first_token is not None),
            Counter(s.first_token for s in b if s.first_token is not None),
        )
        if table is None:
            skipped += 1
            continue
        result = sps.chi2_contingency(table, correction=False)
        per_case[case_id] = float(result.pvalue)
        stat += float(result.statistic)
        df += int(result.dof)
        n_a, n_b = int(table[0].sum()), int(table[1].sum())
        samples_a += n_a
        samples_b += n_b
        harmonic += n_a * n_b / (n_a + n_b)
    if not per_case:
        return _empty("first_token", FIRST_TOKEN_METHOD, unit, alpha, skipped)
    n = samples_a + samples_b
    p_value = float(sps.chi2.sf(stat, df))
    nc = noncentrality_for_power(df, alpha, power)
    return StatisticResult(
        name="first_token",
        method=FIRST_TOKEN_METHOD,
        statistic=stat,
        df=df,
        p_value=p_value,
        alpha=alpha,
        differs=p_value < alpha,
        effect=math.sqrt(max(stat - df, 0.0) / n),
        mde=math.sqrt(nc / n),
        unit=unit,
        cases_used=len(per_case),
        cases_skipped=skipped,
        samples_a=samples_a,
        samples_b=samples_b,
        per_case_p=per_case,
        mde_total_variation=math.sqrt(nc / (4.0 * harmonic)),
    )


LENGTH_METHOD = (
    "Two-sided Mann-Whitney U per case (scipy.stats.mannwhitneyu); pooled: Stouffer's combination of the signed "
    "per-case normal-approximation z weighted by sqrt(n_a n_b / N), two-sided. "
    "Effect: difference in mean length (A - B), weighted like the z."
)


def length_test(pairs: Pairs, alpha: float, power: float) -> StatisticResult:
    """Stratified rank test for output length. scipy has no van Elteren test, so each case gives a signed z from the
    Mann–Whitney U normal approximation (ties corrected, no continuity correction, so z is symmetric under swapping
    the streams), and Stouffer's method combines them with weights sqrt(n_a n_b / N) (sqrt(n) up to a constant when
    the streams are equal in size): Z = sum w_i z_i / sqrt(sum w_i^2), two-sided p = 2 Phi(-|Z|). It assumes
    independent cases, each z approximately standard normal under H0 (good from about 10 samples per stream), and is
    most powerful for a shift in the same direction in every case. A case whose lengths are all equal (e.g. every
    output hit the token limit) carries no information about a difference and is skipped.

    MDE: the mean-length difference a z-test on the weighted mean difference would detect with the requested power:
    (z_{1-alpha/2} + z_{power}) * sigma / sqrt(sum_i n_a n_b / N_i), sigma the pooled within-case standard deviation
    (both streams, every used case). This is a normal approximation for the rank test (whose efficiency relative to
    the t-test is 3/pi ~ 0.95 for normal data and higher for heavy-tailed lengths).
    """
    unit = "tokens"
    per_case: dict[str, float] = {}
    z_values: list[float] = []
    weights: list[float] = []
    differences: list[float] = []
    squares = 0.0
    dof = 0
    samples_a = samples_b = 0
    skipped = 0
    for case_id, (a, b) in pairs.items():
        x = np.array([s.length for s in a if s.length is not None], dtype=float)
        y = np.array([s.length for s in b if s.length is not None], dtype=float)
        if x.size == 0 or y.size == 0 or np.ptp(np.concatenate([x, y])) == 0:
            skipped += 1
            continue
        per_case[case_id] = float(sps.mannwhitneyu(x, y, alternative="two-sided").pvalue)
        normal = sps.mannwhitneyu(x, y, alternative="two-sided", method="asymptotic", use_continuity=False)
        sign = math.copysign(1.0, float(normal.statistic) - x.size * y.size / 2.0)
        z_values.append(sign * min(float(sps.norm.isf(float(normal.pvalue) / 2.0)), Z_CAP))
        h = x.size * y.size / (x.size + y.size)
        weights.append(h)
        differences.append(float(x.mean() - y.mean()))
        squares += float(((x - x.mean()) ** 2).sum() + ((y - y.mean()) ** 2).sum())
        dof += x.size + y.size - 2
        samples_a += x.size
        samples_b += y.size
    if not per_case:
        return _empty("length", LENGTH_METHOD, unit, alpha, skipped)
    h_values = np.array(weights)
    # Stouffer's weighted Z, as scipy.stats.combine_pvalues(method="stouffer") computes it, but from the z themselves:
    # passing one-sided p-values would round a z below about -8.3 to p = 1 and so to -inf
    z = float(np.dot(np.sqrt(h_values), z_values) / math.sqrt(float(h_values.sum())))
    p_value = float(2.0 * sps.norm.sf(abs(z)))
    sigma = math.sqrt(squares / dof) if dof > 0 else math.nan
    mde = (sps.norm.isf(alpha / 2.0) + sps.norm.ppf(power)) * sigma / math.sqrt(float(h_values.sum()))
    return StatisticResult(
        name="length",
        method=LENGTH_METHOD,
        statistic=z,
        df=None,
        p_value=p_value,
        alpha=alpha,
        differs=p_value < alpha,
        effect=float(np.average(differences, weights=h_values)),
        mde=float(mde),
        unit=unit,
        cases_used=len(per_case),
        cases_skipped=skipped,
        samples_a=samples_a,
        samples_b=samples_b,
        per_case_p=per_case,
    )


PASS_RATE_METHOD = (
    "Fisher's exact test per case (scipy.stats.fisher_exact); pooled: Cochran-Mantel-Haenszel chi-square, 1 df, no "
    "continuity correction (formula; scipy.stats.chi2.sf). Effect: Mantel-Haenszel difference in pass rate (A - B), "
    "as a fraction."
)


def pass_rate_test(pairs: Pairs, alpha: float, power: float) -> StatisticResult:
    """Cochran–Mantel–Haenszel over the cases with a rubric. Per case, with ``x`` passes of ``n_a`` in stream A,
    ``m`` passes of ``N`` in both and ``n_b = N - n_a``: E = n_a m / N, V = n_a n_b m (N - m) / (N^2 (N - 1)), and
    CMH = (sum (x - E))^2 / sum V is chi-square with 1 df under H0 (no difference in any case). statsmodels, which
    has it, is not a dependency, so it is written out here. It is most powerful for a common odds ratio and needs
    sum V not tiny (a few cases of 20+ samples are ample). A case where every sample passed, or every one failed, in
    both streams has V = 0, carries no information and is skipped; a case without rubric is not counted at all.

    Effect: the Mantel–Haenszel risk difference sum w_i (p_a - p_b) / sum w_i, w_i = n_a n_b / N. MDE: normal
    approximation for two proportions at each case's pooled pass rate p_i:
    (z_{1-alpha/2} + z_{power}) * sqrt(sum w_i p_i (1 - p_i)) / sum w_i.
    """
    unit = "pass-rate difference (fraction)"
    per_case: dict[str, float] = {}
    deviation = variance = 0.0
    weights: list[float] = []
    differences: list[float] = []
    binomial = 0.0  # sum w_i p_i (1 - p_i)
    samples_a = samples_b = 0
    skipped = 0
    for case_id, (a, b) in pairs.items():
        x = [s.passed for s in a if s.passed is not None]
        y = [s.passed for s in b if s.passed is not None]
        if not x and not y:
            continue  # no rubric: not a pass-rate case
        n_a, n_b = len(x), len(y)
        n = n_a + n_b
        pass_a, pass_b = sum(x), sum(y)
        m = pass_a + pass_b
        if n_a == 0 or n_b == 0 or m in (0, n):
            skipped += 1
            continue
        per_case[case_id] = float(sps.fisher_exact([[pass_a, n_a - pass_a], [pass_b, n_b - pass_b]]).pvalue)
        deviation += pass_a - n_a * m / n
        variance += n_a * n_b * m * (n - m) / (n * n * (n - 1))
        w = n_a * n_b / n
        weights.append(w)
        differences.append(pass_a / n_a - pass_b / n_b)
        binomial += w * (m / n) * (1 - m / n)
        samples_a += n_a
        samples_b += n_b
    if not per_case:
        return _empty("pass_rate", PASS_RATE_METHOD, unit, alpha, skipped, df=1)
    stat = deviation * deviation / variance
    p_value = float(sps.chi2.sf(stat, 1))
    mde = (sps.norm.isf(alpha / 2.0) + sps.norm.ppf(power)) * math.sqrt(binomial) / sum(weights)
    return StatisticResult(
        name="pass_rate",
        method=PASS_RATE_METHOD,
        statistic=stat,
        df=1,
        p_value=p_value,
        alpha=alpha,
        differs=p_value < alpha,
        effect=float(np.average(differences, weights=weights)),
        mde=float(mde),
        unit=unit,
        cases_used=len(per_case),
        cases_skipped=skipped,
        samples_a=samples_a,
        samples_b=samples_b,
        per_case_p=per_case,
    )


SAMPLE_TESTS: tuple[Callable[[Pairs, float, float], StatisticResult], ...] = (
    first_token_test,
    length_test,
    pass_rate_test,
)
