"""First-token categories: rare tokens merged into "other" until every expected chi-square cell count is at least 5.

:func:`merge_categories` gives one case's 2 x K table, :func:`merged_groups` the categories behind it.
Tests and assumptions: docs/method.md#the-distribution-check-under-sampling.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

__all__ = ["MIN_EXPECTED", "merge_categories", "merged_groups"]

MIN_EXPECTED = 5.0  # the usual chi-square validity rule: every expected cell count at least 5


def merge_categories(counts_a: Counter[int], counts_b: Counter[int]) -> np.ndarray | None:
    """The 2 x K table of one case after merging rare first tokens into "other"; ``None`` when fewer than 2 remain.

    Rule: with ``n_a``, ``n_b`` samples and ``N = n_a + n_b``, the expected count of a category with total ``T`` is
    at least ``min(n_a, n_b) * T / N``, so a category is kept when ``T >= MIN_EXPECTED * N / min(n_a, n_b)``; the
    others are pooled into "other"; if "other" is then non-empty but below that threshold, the smallest kept
    categories join it one at a time until it reaches it. Every expected count is then at least 5. The rule looks
    only at the category totals of both streams together, never at which stream a token came from, so under the null
    hypothesis it does not favour a large statistic.
    """
    groups = merged_groups(counts_a, counts_b)
    if groups is None:
        return None
    return np.array([[sum(counts[t] for t in group) for group in groups] for counts in (counts_a, counts_b)])


def merged_groups(counts_a: Counter[int], counts_b: Counter[int]) -> list[list[int]] | None:
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
