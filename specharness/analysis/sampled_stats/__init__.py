"""The distribution check under sampling: do two streams' outputs come from the same distribution? Submodules:
- ``records``: one request's :class:`Sample` and the results :class:`StatisticResult`, :class:`DistributionComparison`.
- ``categories``: rare first tokens merged until every expected count is at least 5 (:func:`merge_categories`).
- ``power``: the chi-square noncentrality for a requested power, behind the first-token MDE.
- ``sample_unit``: the three pooled tests (first token, length, pass rate) over independent samples, with their MDEs.
- ``cell_unit``: the same statistics' permutation test over (case, repetition) cells.
- ``compare``: :func:`compare_streams` (Bonferroni over the three, the verdict) and :func:`detection_rates`.
Tests and assumptions: docs/method.md#the-distribution-check-under-sampling.
"""

from specharness.analysis.sampled_stats.categories import MIN_EXPECTED, merge_categories
from specharness.analysis.sampled_stats.compare import compare_streams, detection_rates
from specharness.analysis.sampled_stats.records import DistributionComparison, Sample, StatisticResult

__all__ = [
    "MIN_EXPECTED",
    "DistributionComparison",
    "Sample",
    "StatisticResult",
    "compare_streams",
    "detection_rates",
    "merge_categories",
]
