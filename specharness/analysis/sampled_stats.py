"""The distribution check under sampling: do two streams' outputs come from the same distribution?

:func:`compare_streams` compares two streams' samples on first token, length and pass rate, per case and pooled,
with Bonferroni over the three and a minimum detectable effect for each; :func:`detection_rates` turns repeated
comparisons into the A/A false-alarm rate and the positive control's detection rate.
Tests and assumptions: docs/method.md#the-distribution-check-under-sampling.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
from scipy import optimize
from scipy import stats as sps

__all__ = [
    "MIN_EXPECTED",
    "DistributionComparison",
    "Sample",
    "StatisticResult",
    "compare_streams",
    "detection_rates",
    "merge_categories",
]

MIN_EXPECTED = 5.0  # the usual chi-square validity rule: every expected cell count at least 5
Z_CAP = 38.0  # |z| beyond which the normal tail underflows to 0; a per-case z is capped there to stay finite
STATISTICS = ("first_token", "length", "pass_rate")


@dataclass(frozen=True, slots=True)
class Sample:
    """One request's outcome in a stream: its case, first generated token id, output length and rubric result.

    ``None`` means not observed (a failed request) or, for ``passed``, that the case has no rubric.
    """

    case_id: str
    first_token: int | None
    length: int | None
    passed: bool | None
    repetition: int = 0  # the repetition (block) it was sent in: with the case and stream, its cell


@dataclass(frozen=True, slots=True)
class StatisticResult:
    """One statistic's pooled test, its effect and minimum detectable effect, and the per-case p-values.

    ``effect`` and ``mde`` are in ``unit`` (stream A minus stream B where signed). ``mde`` is the smallest effect the
    pooled test would flag with the comparison's power at ``alpha`` (the per-statistic Bonferroni level);
    ``mde_total_variation`` restates it as a total-variation distance (first token only, NaN otherwise).
    """

    name: str
    method: str
    statistic: float
    df: int | None
    p_value: float
    alpha: float
    differs: bool
    effect: float
    mde: float
    unit: str
    cases_used: int
    cases_skipped: int
    samples_a: int
    samples_b: int
    per_case_p: dict[str, float] = field(default_factory=dict)
    mde_total_variation: float = math.nan
    test_unit: str = "sample"  # "sample": asymptotic p over independent samples; "cell": cell permutation
    cells: int = 0  # (case, repetition) cells swapped by the permutation ("cell" only)
    p_value_samples: float = math.nan  # the asymptotic p-value that assumes independent samples, for comparison

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "per_case_p": dict(self.per_case_p)}


@dataclass(frozen=True, slots=True)
class DistributionComparison:
    """Two streams compared on three statistics; ``verdict`` is "differs" or "no difference detected".

    ``differs_on`` names the statistics whose pooled test is significant at ``alpha_per_statistic`` (α/3).
    """

    first_token: StatisticResult
    length: StatisticResult
    pass_rate: StatisticResult
    alpha: float
    alpha_per_statistic: float
    power: float
    cases_compared: int  # cases present in both streams
    cases_only_a: int
    cases_only_b: int
    verdict: str
    differs_on: tuple[str, ...]

    @property
    def statistics(self) -> tuple[StatisticResult, StatisticResult, StatisticResult]:
        return (self.first_token, self.length, self.pass_rate)

    def to_dict(self) -> dict[str, Any]:
        return {
            "first_token": self.first_token.to_dict(),
            "length": self.length.to_dict(),
            "pass_rate": self.pass_rate.to_dict(),
            "alpha": self.alpha,
            "alpha_per_statistic": self.alpha_per_statistic,
            "power": self.power,
            "cases_compared": self.cases_compared,
            "cases_only_a": self.cases_only_a,
            "cases_only_b": self.cases_only_b,
            "verdict": self.verdict,
            "differs_on": list(self.differs_on),
        }


def merge_categories(counts_a: Counter[int], counts_b: Counter[int]) -> np.ndarray | None:
    """The 2 x K table of one case after merging rare first tokens into "other"; ``None`` when fewer than 2 remain.

    Rule: with ``n_a``, ``n_b`` samples and ``N = n_a + n_b``, the expected count of a category with total ``T`` is
    at least ``min(n_a, n_b) * T / N``, so a category is kept when ``T >= MIN_EXPECTED * N / min(n_a, n_b)``; the
    others are pooled into "other"; if "other" is then non-empty but below that threshold, the smallest kept
    categories join it one at a time until it reaches it. Every expected count is then at least 5. The rule looks
    only at the category totals of both streams together, never at which stream a token came from, so under the null
    hypothesis it does not favour a large statistic.
    """
    groups = _merged_groups(counts_a, counts_b)
    if groups is None:
        return None
    return np.array([[sum(counts[t] for t in group) for group in groups] for counts in (counts_a, counts_b)])


def _merged_groups(counts_a: Counter[int], counts_b: Counter[int]) -> list[list[int]] | None:
    """The categories of :func:`merge_categories`: kept tokens alone, then "other"; ``None`` when fewer than 2."""
    n_a, n_b = sum(counts_a.values()), sum(counts_b.values())
    if min(n_a, n_b) == 0:
        return None
    total = counts_a + counts_b
    threshold = MIN_EXPECTED * (n_a + n_b) / min(n_a, n_b)
    order = sorted(total, key=lambda token: (-total[token], token))
    kept = [token for token in order if total[token] >= threshold]
    other = [token for token in order if total[token] < threshold]
    while kept and 0 < sum(total[t] for t in other) < threshold:
        other.append(kept.pop())
    groups = [[token] for token in kept] + ([other] if other else [])
    return groups if len(groups) >= 2 else None


def _noncentrality_for_power(df: int, alpha: float, power: float) -> float:
    """The noncentrality at which a chi-square test with ``df`` degrees of freedom at level ``alpha`` has ``power``
    (``scipy.stats.ncx2``)."""
    critical = float(sps.chi2.isf(alpha, df))

    def gap(nc: float) -> float:
        return float(sps.ncx2.sf(critical, df, nc)) - power

    high = 1.0
    while gap(high) < 0:
        high *= 2.0
    return float(optimize.brentq(gap, 0.0, high, xtol=1e-10))


def _empty(name: str, method: str, unit: str, alpha: float, skipped: int, df: int | None = None) -> StatisticResult:
    return StatisticResult(
        name, method, math.nan, df, math.nan, alpha, False, math.nan, math.nan, unit, 0, skipped, 0, 0
    )


FIRST_TOKEN_METHOD = (
    "Pearson chi-square per case on the 2 x K first-token table (scipy.stats.chi2_contingency, no continuity "
    "correction; tokens merged until every expected count >= 5); pooled: sum of the per-case statistics and df "
    "(scipy.stats.chi2.sf). Effect: Cohen's w = sqrt(max(X - df, 0) / N), N the samples of both streams."
)


def _first_token(pairs: dict[str, tuple[list[Sample], list[Sample]]], alpha: float, power: float) -> StatisticResult:
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
    nc = _noncentrality_for_power(df, alpha, power)
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


def _length(pairs: dict[str, tuple[list[Sample], list[Sample]]], alpha: float, power: float) -> StatisticResult:
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


def _pass_rate(pairs: dict[str, tuple[list[Sample], list[Sample]]], alpha: float, power: float) -> StatisticResult:
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


CELL_METHOD = (
    " Cell test: the same statistic referred to its permutation distribution over (case, repetition) cells, each "
    "cell's samples of the two streams swapped as a whole (every assignment up to 2^13, else Monte Carlo), so "
    "samples need not be independent within a cell."
)
EXACT_CELLS = 13  # up to 2^13 sign assignments are enumerated; beyond, Monte Carlo
PERMUTATIONS = 9999


def _signs(cells: int, permutations: int, seed: int) -> np.ndarray:
    """Rows of booleans, True = the cell keeps its streams, False = they are swapped; the first row is the observed
    assignment. Every assignment when there are at most ``EXACT_CELLS`` cells (exact), else ``permutations`` drawn
    ones after the observed row."""
    if cells <= EXACT_CELLS:
        codes = np.arange(2**cells)[:, None]
        return np.asarray(((codes >> np.arange(cells)) & 1) == 0)
    rng = np.random.default_rng(seed)
    return np.vstack([np.ones((1, cells), dtype=bool), rng.random((permutations, cells)) < 0.5])


def _cell_groups(
    a: list[Sample], b: list[Sample], value: Callable[[Sample], Any]
) -> dict[int, tuple[list[Any], list[Any]]]:
    """repetition -> (stream A's values, stream B's values), only repetitions where both streams have a value."""
    out: dict[int, tuple[list[Any], list[Any]]] = {}
    for stream, samples in enumerate((a, b)):
        for sample in samples:
            v = value(sample)
            if v is not None:
                out.setdefault(sample.repetition, ([], []))[stream].append(v)
    return {rep: g for rep, g in sorted(out.items()) if g[0] and g[1]}


def _first_token_cells(pairs: dict[str, tuple[list[Sample], list[Sample]]]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per used case: the R x K first-token counts of each stream's cells on the case's merged categories."""
    out = []
    for a, b in pairs.values():
        groups = _cell_groups(a, b, lambda s: s.first_token)
        counts_a = Counter(t for g in groups.values() for t in g[0])
        counts_b = Counter(t for g in groups.values() for t in g[1])
        merged = _merged_groups(counts_a, counts_b)
        if merged is None:
            continue
        column = {t: i for i, group in enumerate(merged) for t in group}
        width = len(merged)

        def counts(tokens: list[int], column: dict[int, int] = column, width: int = width) -> np.ndarray:
            row = np.zeros(width)
            for t in tokens:
                row[column[t]] += 1
            return row

        out.append(
            (np.array([counts(g[0]) for g in groups.values()]), np.array([counts(g[1]) for g in groups.values()]))
        )
    return out


def _first_token_statistic(cells: list[tuple[np.ndarray, np.ndarray]], keep: np.ndarray) -> np.ndarray:
    """The summed Pearson chi-square of every case's 2 x K table under each row of ``keep``."""
    total = np.zeros(keep.shape[0])
    start = 0
    for a, b in cells:
        k = keep[:, start : start + a.shape[0]].astype(float)
        start += a.shape[0]
        obs_a = k @ a + (1.0 - k) @ b
        obs_b = (a + b).sum(axis=0) - obs_a
        col = (a + b).sum(axis=0)
        n_a, n_b = obs_a.sum(axis=1, keepdims=True), obs_b.sum(axis=1, keepdims=True)
        n = n_a + n_b
        e_a, e_b = n_a * col / n, n_b * col / n
        total += (((obs_a - e_a) ** 2 / e_a) + ((obs_b - e_b) ** 2 / e_b)).sum(axis=1)
    return total


def _length_cells(pairs: dict[str, tuple[list[Sample], list[Sample]]]) -> list[tuple[np.ndarray, ...]]:
    """Per used case: each cell's rank sums and sizes (ranks over the case's samples of both streams), the tie
    term and the case's Stouffer weight."""
    out: list[tuple[np.ndarray, ...]] = []
    for a, b in pairs.values():
        groups = _cell_groups(a, b, lambda s: s.length)
        values = np.array([v for g in groups.values() for side in g for v in side], dtype=float)
        if values.size == 0 or np.ptp(values) == 0:
            continue
        ranks = sps.rankdata(values)
        sums_a: list[float] = []
        sums_b: list[float] = []
        sizes_a: list[float] = []
        sizes_b: list[float] = []
        at = 0
        for g in groups.values():
            for side, sums, sizes in ((g[0], sums_a, sizes_a), (g[1], sums_b, sizes_b)):
                sums.append(float(ranks[at : at + len(side)].sum()))
                sizes.append(float(len(side)))
                at += len(side)
        n = values.size
        _, ties = np.unique(values, return_counts=True)
        tie = float((ties**3 - ties).sum()) / (n * (n - 1))
        h = sum(sizes_a) * sum(sizes_b) / n
        out.append((np.array(sums_a), np.array(sums_b), np.array(sizes_a), np.array(sizes_b), np.array([n, tie, h])))
    return out


def _length_statistic(cells: list[tuple[np.ndarray, ...]], keep: np.ndarray) -> np.ndarray:
    """|Stouffer Z| of the cases' Mann-Whitney z (ties corrected, weights sqrt(h) fixed at the observed sizes)."""
    z_sum = np.zeros(keep.shape[0])
    weight = 0.0
    start = 0
    for sums_a, sums_b, sizes_a, sizes_b, (n, tie, h) in cells:
        k = keep[:, start : start + sums_a.size].astype(float)
        start += sums_a.size
        rank_a = k @ sums_a + (1.0 - k) @ sums_b
        n_a = k @ sizes_a + (1.0 - k) @ sizes_b
        n_b = n - n_a
        u = rank_a - n_a * (n_a + 1) / 2.0
        sd = np.sqrt(n_a * n_b / 12.0 * ((n + 1) - tie))
        z_sum += math.sqrt(h) * np.clip((u - n_a * n_b / 2.0) / sd, -Z_CAP, Z_CAP)
        weight += h
    return np.abs(z_sum) / math.sqrt(weight)


def _pass_cells(pairs: dict[str, tuple[list[Sample], list[Sample]]]) -> list[tuple[np.ndarray, ...]]:
    """Per used case: each cell's passes and sizes of both streams."""
    out: list[tuple[np.ndarray, ...]] = []
    for a, b in pairs.values():
        groups = _cell_groups(a, b, lambda s: s.passed)
        if not groups:
            continue
        pass_a = np.array([sum(g[0]) for g in groups.values()], dtype=float)
        pass_b = np.array([sum(g[1]) for g in groups.values()], dtype=float)
        size_a = np.array([len(g[0]) for g in groups.values()], dtype=float)
        size_b = np.array([len(g[1]) for g in groups.values()], dtype=float)
        m, n = pass_a.sum() + pass_b.sum(), size_a.sum() + size_b.sum()
        if m in (0, n):
            continue
        out.append((pass_a, pass_b, size_a, size_b))
    return out


def _pass_statistic(cells: list[tuple[np.ndarray, ...]], keep: np.ndarray) -> np.ndarray:
    """The Cochran-Mantel-Haenszel chi-square under each row of ``keep``."""
    deviation = np.zeros(keep.shape[0])
    variance = np.zeros(keep.shape[0])
    start = 0
    for pass_a, pass_b, size_a, size_b in cells:
        k = keep[:, start : start + pass_a.size].astype(float)
        start += pass_a.size
        x = k @ pass_a + (1.0 - k) @ pass_b
        n_a = k @ size_a + (1.0 - k) @ size_b
        m, n = pass_a.sum() + pass_b.sum(), size_a.sum() + size_b.sum()
        deviation += x - n_a * m / n
        variance += n_a * (n - n_a) * m * (n - m) / (n * n * (n - 1))
    return deviation**2 / variance


_CELL_TESTS: dict[
    str,
    tuple[
        Callable[[dict[str, tuple[list[Sample], list[Sample]]]], list[Any]],
        Callable[[list[Any], np.ndarray], np.ndarray],
    ],
] = {
    "first_token": (_first_token_cells, _first_token_statistic),
    "length": (_length_cells, _length_statistic),
    "pass_rate": (_pass_cells, _pass_statistic),
}


def _cell_test(
    result: StatisticResult, pairs: dict[str, tuple[list[Sample], list[Sample]]], permutations: int, seed: int
) -> StatisticResult:
    """``result`` with its p-value from the cell permutation (the statistic, effect and MDE kept)."""
    build, statistic = _CELL_TESTS[result.name]
    cells = build(pairs)
    count = sum(c[0].shape[0] for c in cells)
    if count == 0:
        return replace(
            result,
            test_unit="cell",
            p_value_samples=result.p_value,
            p_value=math.nan,
            differs=False,
            method=result.method + CELL_METHOD,
        )
    keep = _signs(count, permutations, seed)
    values = statistic(cells, keep)
    observed = values[0]
    at_least = float(np.count_nonzero(values >= observed * (1.0 - 1e-9) - 1e-12))
    p_value = at_least / values.size  # exact: the observed row is among all; Monte Carlo: (1 + b) / (1 + B)
    return replace(
        result,
        test_unit="cell",
        cells=count,
        p_value_samples=result.p_value,
        p_value=p_value,
        differs=p_value < result.alpha,
        method=result.method + CELL_METHOD,
    )


_TESTS: tuple[Callable[[dict[str, tuple[list[Sample], list[Sample]]], float, float], StatisticResult], ...] = (
    _first_token,
    _length,
    _pass_rate,
)


def compare_streams(
    a: Sequence[Sample],
    b: Sequence[Sample],
    alpha: float = 0.05,
    power: float = 0.8,
    unit: str = "sample",
    permutations: int = PERMUTATIONS,
    seed: int = 0,
) -> DistributionComparison:
    """Compare stream ``a`` with stream ``b`` (e.g. ngram against baseline) on the cases present in both.

    Each of the three pooled tests (first token, length, pass rate) is judged at α/3 (Bonferroni), and its MDE is
    stated at α/3 and ``power`` (docs/method.md#the-distribution-check-under-sampling). The verdict is "differs" when
    any is significant (``differs_on`` names them), "not compared" when the streams share no case, else "no
    difference detected".

    ``unit`` "sample" refers each statistic to its large-sample distribution, which assumes independent samples;
    "cell" to its permutation distribution over (case, repetition) cells (``Sample.repetition``), which assumes only
    that the two streams' cells of one case and repetition are exchangeable under H0. Use "cell" over several
    repetitions: with c cells the smallest p-value is 2 / 2^c, so it cannot flag at α/3 below 8 cells.
    """
    if unit not in ("sample", "cell"):
        raise ValueError(f"unit must be 'sample' or 'cell', got {unit!r}")
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise ValueError(f"alpha and power must lie in (0, 1), got {alpha}, {power}")
    by_case_a: dict[str, list[Sample]] = defaultdict(list)
    by_case_b: dict[str, list[Sample]] = defaultdict(list)
    for sample in a:
        by_case_a[sample.case_id].append(sample)
    for sample in b:
        by_case_b[sample.case_id].append(sample)
    common = sorted(set(by_case_a) & set(by_case_b))
    pairs = {case_id: (by_case_a[case_id], by_case_b[case_id]) for case_id in common}
    level = alpha / len(STATISTICS)
    first_token, length, pass_rate = (test(pairs, level, power) for test in _TESTS)
    if unit == "cell":
        first_token, length, pass_rate = (
            _cell_test(r, pairs, permutations, seed) for r in (first_token, length, pass_rate)
        )
    differs_on = tuple(r.name for r in (first_token, length, pass_rate) if r.differs)
    return DistributionComparison(
        first_token=first_token,
        length=length,
        pass_rate=pass_rate,
        alpha=alpha,
        alpha_per_statistic=level,
        power=power,
        cases_compared=len(common),
        cases_only_a=len(set(by_case_a) - set(common)),
        cases_only_b=len(set(by_case_b) - set(common)),
        verdict="differs" if differs_on else ("no difference detected" if common else "not compared"),
        differs_on=differs_on,
    )


def detection_rates(results: Sequence[DistributionComparison]) -> float:
    """The share of comparisons with verdict "differs": the detection rate of the positive control, or the
    false-alarm rate of A/A pairs, over repeated runs; NaN for none."""
    if not results:
        return math.nan
    return sum(1 for r in results if r.verdict == "differs") / len(results)
