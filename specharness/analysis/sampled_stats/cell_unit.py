"""The cell test: each pooled statistic referred to its permutation distribution over (case, repetition) cells.

Each cell's samples of the two streams are swapped as a whole, so samples need not be independent within a cell;
:func:`cell_test` gives a sample-unit result its cell p-value.
Tests and assumptions: docs/method.md#the-distribution-check-under-sampling.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
from scipy import stats as sps

from specharness.analysis.sampled_stats.categories import merged_groups
from specharness.analysis.sampled_stats.records import Pairs, Sample, StatisticResult
from specharness.analysis.sampled_stats.sample_unit import Z_CAP

__all__ = ["CELL_METHOD", "EXACT_CELLS", "PERMUTATIONS", "cell_test"]

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


def _first_token_cells(pairs: Pairs) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per used case: the R x K first-token counts of each stream's cells on the case's merged categories."""
    out = []
    for a, b in pairs.values():
        groups = _cell_groups(a, b, lambda s: s.first_token)
        counts_a = Counter(t for g in groups.values() for t in g[0])
        counts_b = Counter(t for g in groups.values() for t in g[1])
        merged = merged_groups(counts_a, counts_b)
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


def _length_cells(pairs: Pairs) -> list[tuple[np.ndarray, ...]]:
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


def _pass_cells(pairs: Pairs) -> list[tuple[np.ndarray, ...]]:
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
        Callable[[Pairs], list[Any]],
        Callable[[list[Any], np.ndarray], np.ndarray],
    ],
] = {
    "first_token": (_first_token_cells, _first_token_statistic),
    "length": (_length_cells, _length_statistic),
    "pass_rate": (_pass_cells, _pass_statistic),
}


def cell_test(result: StatisticResult, pairs: Pairs, permutations: int, seed: int) -> StatisticResult:
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
