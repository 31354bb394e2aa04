"""Two streams compared, and repeated comparisons turned into rates.

:func:`compare_streams` runs the three pooled tests (sample or cell unit) with Bonferroni over them and gives the
verdict; :func:`detection_rates` turns repeated verdicts into a false-alarm or detection rate.
Tests and assumptions: docs/method.md#the-distribution-check-under-sampling.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

from specharness.analysis.sampled_stats.cell_unit import PERMUTATIONS, cell_test
from specharness.analysis.sampled_stats.records import DistributionComparison, Sample
from specharness.analysis.sampled_stats.sample_unit import SAMPLE_TESTS

__all__ = ["STATISTICS", "compare_streams", "detection_rates"]

STATISTICS = ("first_token", "length", "pass_rate")


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
    first_token, length, pass_rate = (test(pairs, level, power) for test in SAMPLE_TESTS)
    if unit == "cell":
        first_token, length, pass_rate = (
            cell_test(r, pairs, permutations, seed) for r in (first_token, length, pass_rate)
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
