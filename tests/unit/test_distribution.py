"""The distribution check under sampling on synthetic streams drawn here with numpy's seeded Generator (no engine):
validity under the null (the A/A false-alarm rate), detection of first-token, length and pass-rate differences,
the minimum detectable effect, and the edge cases (one category, empty input)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np
import pytest
from scipy import stats as sps

from specharness.analysis.sampled_stats import (
    DistributionComparison,
    Sample,
    compare_streams,
    detection_rates,
    merge_categories,
)

ALPHA = 0.05
CASES = 6
RUBRIC_CASES = 4  # cases 0..3 have a rubric; 4 and 5 report passed=None


def skewed_tokens(case: int, tokens: int = 8) -> np.ndarray:
    """A first-token distribution with a few common and several rare tokens, different per case."""
    decay = 0.45 + 0.07 * case
    probs = decay ** np.arange(tokens)
    return probs / probs.sum()


def top_token(top: float, tokens: int = 6) -> np.ndarray:
    """The top token has probability ``top``; the rest share what is left, decaying."""
    rest = 0.6 ** np.arange(1, tokens)
    return np.concatenate([[top], (1.0 - top) * rest / rest.sum()])


def synthetic_stream(
    rng: np.random.Generator,
    samples: int,
    token_probs: Sequence[np.ndarray],
    length_mean: float = 40.0,
    pass_rate: float = 0.7,
    cases: int = CASES,
    max_tokens: int = 48,
) -> list[Sample]:
    """``samples`` synthetic requests per case: categorical first token (ids offset per case), Poisson length
    truncated at ``max_tokens`` (ties, as a token limit gives), Bernoulli rubric result on the rubric cases."""
    out: list[Sample] = []
    for case in range(cases):
        tokens = rng.choice(len(token_probs[case]), size=samples, p=token_probs[case]) + 1000 * case
        lengths = np.minimum(rng.poisson(length_mean, size=samples), max_tokens)
        passed = rng.random(samples) < pass_rate
        rubric = case < RUBRIC_CASES
        out += [
            Sample(f"case{case}", int(t), int(n), bool(p) if rubric else None)
            for t, n, p in zip(tokens, lengths, passed, strict=True)
        ]
    return out


def repeat(seed: int, reps: int, samples: int, stream_a: dict, stream_b: dict) -> list[DistributionComparison]:
    rng = np.random.default_rng(seed)
    results = []
    for _ in range(reps):
        a, b = synthetic_stream(rng, samples, **stream_a), synthetic_stream(rng, samples, **stream_b)
        results.append(compare_streams(a, b, alpha=ALPHA))
    return results


def flagged(results: Sequence[DistributionComparison], name: str) -> float:
    return sum(name in r.differs_on for r in results) / len(results)


SAME = {"token_probs": [skewed_tokens(c) for c in range(CASES)]}


def test_synthetic_aa_false_alarm_rate_stays_at_alpha() -> None:
    results = repeat(12, 200, 24, SAME, SAME)
    # the merging rule is exercised: 8 tokens per case, the rare ones merged into "other" (now and then all of a
    # case's tokens but the top one, and that case is skipped)
    assert all(r.first_token.cases_used + r.first_token.cases_skipped == CASES for r in results)
    assert all(r.first_token.df < 7 * r.first_token.cases_used for r in results)
    assert sum(r.first_token.cases_used == CASES for r in results) > 150
    assert detection_rates(results) <= 0.09
    for name in ("first_token", "length", "pass_rate"):  # each pooled test is valid at the full alpha too
        below = sum(getattr(r, name).p_value < ALPHA for r in results) / len(results)
        assert below <= 0.09, name
    pvalues = np.array([r.first_token.p_value for r in results])
    assert 0.35 < float(np.mean(pvalues)) < 0.65  # roughly uniform under H0
    assert all(r.verdict in ("differs", "no difference detected") for r in results)


def test_synthetic_first_token_shift_is_flagged() -> None:
    results = repeat(3, 100, 24, {"token_probs": [top_token(0.6)] * CASES}, {"token_probs": [top_token(0.3)] * CASES})
    assert flagged(results, "first_token") >= 0.8
    assert detection_rates(results) >= 0.8
    assert all(r.first_token.effect > 0 for r in results[:10])


def test_synthetic_length_shift_is_flagged() -> None:
    results = repeat(4, 100, 24, {**SAME, "length_mean": 40.0}, {**SAME, "length_mean": 43.0})
    assert flagged(results, "length") >= 0.8
    effects = [r.length.effect for r in results]
    assert -4.0 < float(np.mean(effects)) < -2.0  # A minus B, in tokens


def test_synthetic_length_pooled_z_is_scipys_stouffer() -> None:
    rng = np.random.default_rng(11)
    a = synthetic_stream(rng, 24, **SAME, length_mean=40.0)
    b = synthetic_stream(rng, 20, **SAME, length_mean=41.0)
    z, w = [], []
    for case in range(CASES):
        x = [s.length for s in a if s.case_id == f"case{case}"]
        y = [s.length for s in b if s.case_id == f"case{case}"]
        one_sided = sps.mannwhitneyu(x, y, alternative="greater", method="asymptotic", use_continuity=False)
        z.append(float(one_sided.pvalue))
        w.append(math.sqrt(len(x) * len(y) / (len(x) + len(y))))
    expected = sps.combine_pvalues(z, method="stouffer", weights=w)
    result = compare_streams(a, b).length
    assert result.statistic == pytest.approx(float(expected.statistic), rel=1e-9)
    assert result.p_value == pytest.approx(2 * float(sps.norm.sf(abs(expected.statistic))), rel=1e-9)


def test_synthetic_complete_length_separation_stays_finite() -> None:
    a = [Sample(f"c{c}", 1, 100 + i, None) for c in range(2) for i in range(400)]
    b = [Sample(f"c{c}", 1, 1000 + i, None) for c in range(2) for i in range(400)]
    result = compare_streams(a, b).length
    assert math.isfinite(result.statistic) and result.statistic < -20
    assert result.differs and result.effect == pytest.approx(-900.0)


def test_synthetic_pass_rate_drop_is_flagged() -> None:
    results = repeat(5, 100, 24, {**SAME, "pass_rate": 0.8}, {**SAME, "pass_rate": 0.4})
    assert flagged(results, "pass_rate") >= 0.8
    assert all(r.pass_rate.cases_used == RUBRIC_CASES for r in results)  # cases without rubric are not counted
    assert 0.3 < float(np.mean([r.pass_rate.effect for r in results])) < 0.5


def test_synthetic_first_token_power_at_the_mde_matches_the_request() -> None:
    """Two equally likely tokens per case (no merging); a shift of exactly the reported MDE w is detected at about
    the requested power, and for equal streams the total-variation restatement equals w."""
    rng = np.random.default_rng(6)
    probe = compare_streams(
        synthetic_stream(rng, 48, [np.array([0.5, 0.5])] * CASES),
        synthetic_stream(rng, 48, [np.array([0.5, 0.5])] * CASES),
    )
    w = probe.first_token.mde
    assert probe.first_token.df == CASES
    assert probe.first_token.mde_total_variation == pytest.approx(w)
    # balanced streams: w = TV = |P(top) - Q(top)| for two categories
    shifted_a, shifted_b = np.array([0.5 + w / 2, 0.5 - w / 2]), np.array([0.5 - w / 2, 0.5 + w / 2])
    results = repeat(7, 200, 48, {"token_probs": [shifted_a] * CASES}, {"token_probs": [shifted_b] * CASES})
    assert 0.7 <= flagged(results, "first_token") <= 0.9


def test_synthetic_mde_shrinks_with_samples() -> None:
    rng = np.random.default_rng(8)
    small = compare_streams(synthetic_stream(rng, 24, **SAME), synthetic_stream(rng, 24, **SAME))
    large = compare_streams(synthetic_stream(rng, 96, **SAME), synthetic_stream(rng, 96, **SAME))
    for name in ("first_token", "length", "pass_rate"):
        mde_small, mde_large = getattr(small, name).mde, getattr(large, name).mde
        assert math.isfinite(mde_small) and math.isfinite(mde_large), name
        assert 0 < mde_large < mde_small, name
    assert large.length.mde == pytest.approx(small.length.mde / 2, rel=0.25)  # ~ 1/sqrt(n)
    assert large.first_token.samples_a == 96 * CASES


def test_synthetic_one_category_case_is_skipped() -> None:
    rng = np.random.default_rng(9)
    probs = [np.array([1.0])] + [skewed_tokens(c) for c in range(1, CASES)]
    result = compare_streams(synthetic_stream(rng, 24, probs), synthetic_stream(rng, 24, probs))
    assert result.first_token.cases_skipped == 1
    assert result.first_token.cases_used == CASES - 1
    assert "case0" not in result.first_token.per_case_p
    assert set(result.length.per_case_p) == {f"case{c}" for c in range(CASES)}


def test_merging_keeps_every_expected_count_at_five() -> None:
    rng = np.random.default_rng(10)
    for _ in range(50):
        a = rng.choice(10, size=int(rng.integers(5, 40)), p=skewed_tokens(2, 10))
        b = rng.choice(10, size=int(rng.integers(5, 40)), p=skewed_tokens(4, 10))
        table = merge_categories(Counter(a.tolist()), Counter(b.tolist()))
        if table is None:
            continue
        expected = np.outer(table.sum(axis=1), table.sum(axis=0)) / table.sum()
        assert table.shape[1] >= 2
        assert expected.min() >= 5.0
        assert table.sum() == a.size + b.size


def test_constant_lengths_and_outcomes_are_skipped() -> None:
    a = [Sample("c", i % 3, 64, True) for i in range(30)]
    b = [Sample("c", (i + 1) % 3, 64, True) for i in range(30)]
    result = compare_streams(a, b)
    assert result.length.cases_skipped == 1 and result.length.cases_used == 0
    assert result.pass_rate.cases_skipped == 1 and math.isnan(result.pass_rate.p_value)
    assert result.first_token.cases_used == 1


def test_empty_input_gives_nan_and_no_difference() -> None:
    result = compare_streams([], [])
    assert result.verdict == "not compared"  # nothing in common: no verdict, not "no difference"
    assert result.differs_on == ()
    for stat in result.statistics:
        assert stat.cases_used == 0
        assert math.isnan(stat.p_value) and math.isnan(stat.mde) and math.isnan(stat.effect)
        assert not stat.differs
    data = result.to_dict()
    assert math.isnan(data["first_token"]["p_value"])
    assert detection_rates([]) != detection_rates([])  # NaN


def test_cases_in_one_stream_only_and_missing_fields() -> None:
    a = [Sample("shared", i % 2, 10 + i, None) for i in range(20)] + [Sample("only-a", 1, 5, True)]
    b = [Sample("shared", None, None, None) for _ in range(3)] + [
        Sample("shared", i % 2, 12 + i, None) for i in range(20)
    ]
    result = compare_streams(a, b)
    assert (result.cases_compared, result.cases_only_a, result.cases_only_b) == (1, 1, 0)
    assert result.first_token.samples_b == 20 and result.length.samples_b == 20
    assert result.pass_rate.cases_used == 0 and result.pass_rate.cases_skipped == 0  # no rubric: not counted


def test_bad_level_is_rejected() -> None:
    with pytest.raises(ValueError):
        compare_streams([], [], alpha=1.5)


# --- the cell test: samples that are not independent within a (case, stream, repetition) cell -----------------------


def clustered_stream(
    rng: np.random.Generator,
    world: list[dict],
    repetitions: int,
    samples: int,
    cell_sd: float,
    logit_shift: float = 0.0,
) -> list[Sample]:
    """Cases that differ from each other (first-token distribution, pass rate from 5% to 90%, length) and cells that
    differ from each other: each (case, repetition) cell of a stream draws its own first-token distribution around
    the case's, its own pass logit and mean length (sd ``cell_sd``), as a batch or a shared random state would give
    within a cell. Both streams of an A/A pair draw from the same cases with the same cell spread."""
    out: list[Sample] = []
    for c, case in enumerate(world):
        for rep in range(repetitions):
            probs = rng.dirichlet(case["tokens"] / cell_sd**2) if cell_sd > 0 else case["tokens"]
            logit = case["logit"] + logit_shift + (rng.normal(0.0, cell_sd) if cell_sd > 0 else 0.0)
            mean_length = case["length"] + (rng.normal(0.0, 8 * cell_sd) if cell_sd > 0 else 0.0)
            tokens = rng.choice(len(probs), size=samples, p=probs / probs.sum())
            lengths = np.minimum(rng.poisson(max(mean_length, 1.0), size=samples), 48)
            passed = rng.random(samples) < 1.0 / (1.0 + math.exp(-logit))
            out += [
                Sample(f"case{c}", int(t), int(n), bool(p), repetition=rep)
                for t, n, p in zip(tokens, lengths, passed, strict=True)
            ]
    return out


def clustered_world(rng: np.random.Generator, cases: int = 4) -> list[dict]:
    return [
        {
            "tokens": rng.dirichlet(np.full(int(rng.integers(3, 12)), 0.5)) + 1e-3,
            "logit": float(rng.uniform(-3.0, 2.2)),
            "length": float(rng.uniform(20, 45)),
        }
        for _ in range(cases)
    ]


def aa_rates(seed: int, runs: int, cell_sd: float, logit_shift: float = 0.0) -> tuple[float, float]:
    """(sample-level test, cell test) share of runs called "differs", the committed run's design (4 cases, 5
    repetitions, 16 samples per cell)."""
    rng = np.random.default_rng(seed)
    old = new = 0
    for run in range(runs):
        world = clustered_world(rng)
        a = clustered_stream(rng, world, 5, 16, cell_sd)
        b = clustered_stream(rng, world, 5, 16, cell_sd, logit_shift)
        old += compare_streams(a, b).verdict == "differs"
        new += compare_streams(a, b, unit="cell", permutations=999, seed=run).verdict == "differs"
    return old / runs, new / runs


def test_cell_test_holds_its_rate_where_cells_differ_and_the_sample_test_does_not() -> None:
    old, new = aa_rates(3, 200, cell_sd=0.3)
    assert new <= ALPHA + 0.03  # binomial sd at 200 runs is 0.015
    assert old > 0.3  # the sample-level test counts a cell's 16 samples as 16 independent draws


def test_cell_test_holds_its_rate_with_independent_samples() -> None:
    old, new = aa_rates(4, 200, cell_sd=0.0)
    assert new <= ALPHA + 0.03
    assert old <= ALPHA + 0.04


def test_cell_test_still_detects_a_pass_rate_drop() -> None:
    _, new = aa_rates(5, 60, cell_sd=0.0, logit_shift=-1.0)
    assert new >= 0.8


def test_cell_statistics_equal_the_sample_statistics_at_the_observed_assignment() -> None:
    rng = np.random.default_rng(8)
    world = clustered_world(rng)
    a, b = clustered_stream(rng, world, 3, 20, 0.0), clustered_stream(rng, world, 3, 20, 0.0)
    sample, cell = compare_streams(a, b), compare_streams(a, b, unit="cell")
    for s, c in zip(sample.statistics, cell.statistics, strict=True):
        assert c.test_unit == "cell" and c.cells > 0
        assert c.p_value_samples == s.p_value and c.statistic == s.statistic
        assert 0.0 < c.p_value <= 1.0


def test_cell_test_cannot_flag_with_too_few_cells() -> None:
    rng = np.random.default_rng(9)
    world = clustered_world(rng)
    a = clustered_stream(rng, world, 1, 40, 0.0)
    b = clustered_stream(rng, world, 1, 40, 0.0, logit_shift=-4.0)
    cell = compare_streams(a, b, unit="cell")
    assert cell.pass_rate.p_value >= 2 / 2**4  # exact: 4 cells, 16 assignments, two of them as extreme
    assert compare_streams(a, b).pass_rate.differs
