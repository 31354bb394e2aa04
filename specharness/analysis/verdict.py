"""The verdict rules, in one place: a speed verdict and a quality verdict for every comparison, always both.

:func:`speed_verdict` judges a same-work interval against the declared no-difference band (:func:`band_edges`);
:func:`quality_verdict` judges right answers and completed requests paired by case; :func:`change_verdict`,
:func:`pair_change`, :func:`holm` and :func:`benjamini_hochberg` judge changes between runs and releases.
Rules: docs/method.md#how-the-verdict-is-reached.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specharness.analysis.quality_tests import CasePairedTest
from specharness.analysis.stats import RatioInterval

__all__ = [
    "CHANGE_VERDICTS",
    "DEFAULT_MARGIN",
    "EXPLORATORY_Q",
    "PRIMARY_ALPHA",
    "QUALITY_VERDICTS",
    "RELEASE_FACTOR",
    "SPEED_VERDICTS",
    "Verdict",
    "band_edges",
    "benjamini_hochberg",
    "change_verdict",
    "holm",
    "pair_change",
    "quality_verdict",
    "speed_verdict",
]

SPEED_VERDICTS = ("helps", "hurts", "equivalent", "inconclusive", "not comparable", "invalid")
QUALITY_VERDICTS = ("holds", "fails", "not assessable", "invalid")
ALPHA = 0.05
DEFAULT_MARGIN = 0.10  # the band of a run whose manifest declares none (schema 1 runs)


@dataclass(frozen=True, slots=True)
class Verdict:
    """A verdict word and the one-line evidence behind it."""

    verdict: str
    reason: str


def band_edges(margin: float) -> tuple[float, float]:
    """The no-difference band for a ratio: within +/- ``margin`` on the log scale's symmetric form."""
    return 1.0 / (1.0 + margin), 1.0 + margin


def speed_verdict(
    interval: RatioInterval,
    margin: float,
    *,
    valid: bool = True,
    invalid_reason: str = "",
    same_work_fraction: float = 1.0,
    min_same_work: float = 0.0,
    excluded_time_share: float = 0.0,
    max_excluded_time: float = 1.0,
    covered: str = "pairs did the same work (identical outputs)",
) -> Verdict:
    """Speed verdict from the same-work interval (docs/method.md#how-the-verdict-is-reached). ``same_work_fraction`` is
    the covered share the gate reads (``covered`` says of what); ``excluded_time_share`` the baseline's time in failed
    pairs."""
    if not valid:
        return Verdict("invalid", invalid_reason or "a cell of this comparison is missing or invalid")
    if not (same_work_fraction >= min_same_work):
        shown = "no" if not math.isfinite(same_work_fraction) else f"{same_work_fraction:.0%} of"
        return Verdict(
            "not comparable",
            f"{shown} {covered}, under the declared {min_same_work:.0%}; time for different work is not compared",
        )
    if excluded_time_share > max_excluded_time:
        return Verdict(
            "inconclusive",
            f"failed pairs hold {excluded_time_share:.0%} of the baseline's time, over the "
            f"declared {max_excluded_time:.0%}: the pairs left may be the faster ones",
        )
    low, high = interval.low, interval.high
    if not (math.isfinite(low) and math.isfinite(high)):
        return Verdict("inconclusive", "an interval needs same-work pairs in at least 2 blocks")
    down, up = band_edges(margin)
    ci = f"{interval.confidence:.0%} CI [{low:.2f}, {high:.2f}]"
    if low > up:
        return Verdict("helps", f"{ci} lies above {up:.2f}")
    if high < down:
        return Verdict("hurts", f"{ci} lies below {down:.2f}")
    if down <= low and high <= up:
        return Verdict("equivalent", f"{ci} lies inside the no-difference band [{down:.2f}, {up:.2f}]")
    return Verdict("inconclusive", f"{ci} reaches across the no-difference band [{down:.2f}, {up:.2f}]")


def quality_verdict(
    *,
    correct_a: float,
    correct_b: float,
    answers: CasePairedTest,
    completion: CasePairedTest,
    min_correct: float,
    tolerance: float,
    arm_a: str,
    arm_b: str,
    valid: bool = True,
    invalid_reason: str = "",
) -> Verdict:
    """Quality verdict from right answers and completions paired by case (docs/method.md#how-the-verdict-is-reached,
    :mod:`specharness.analysis.quality_tests`); ``tolerance`` is the non-inferiority margin of the answer loss."""
    if not valid:
        return Verdict("invalid", invalid_reason or "a cell of this comparison is missing or invalid")
    alpha = ALPHA / 2
    if completion.pvalue < alpha:
        return Verdict(
            "fails",
            f"{arm_b} finished fewer requests by itself than {arm_a} on {completion.cases_lost} "
            f"of {completion.n_cases} cases (more on {completion.cases_gained}; paired permutation "
            f"over cases p={completion.pvalue:.3f})",
        )
    if answers.n_cases == 0:
        return Verdict("not assessable", "no case has a rubric")
    margin = f", margin {tolerance:.0%}" if tolerance > 0 else ""
    evidence = (
        f"right answers per case: {arm_b} worse on {answers.cases_lost}, better on {answers.cases_gained} of "
        f"{answers.n_cases} cases (paired permutation over cases p={answers.pvalue:.2f}{margin}); correct "
        f"{correct_a:.0%} / {correct_b:.0%}"
    )
    if answers.pvalue < alpha:
        return Verdict(
            "fails",
            f"{evidence}: the loss ({answers.statistic:.0%} of answers) exceeds the margin "
            f"{tolerance:.0%} at α={alpha:g}",
        )
    if not (correct_a >= min_correct):
        return Verdict(
            "not assessable",
            f"{arm_a} itself is {correct_a:.0%} correct, under the declared "
            f"{min_correct:.0%}: this workload is no fair test of this model; {evidence}",
        )
    if not math.isfinite(answers.loss_upper):
        return Verdict("holds", evidence)
    bound = f"loss at most {answers.loss_upper:.0%} ({answers.confidence:.0%} upper bound over {answers.n_cases} cases)"
    if tolerance <= 0:
        return Verdict("holds", f"{evidence}; no loss detected, {bound}")
    within = "within" if answers.loss_upper <= tolerance else "so not shown within"
    return Verdict("holds", f"{evidence}; {bound}, {within} the margin {tolerance:.0%}")


# The change verdict between two runs (release A vs release B, run A vs run B) and the corrections for testing many
# values at once. The per-cell slowdown is the primary endpoint (Holm across cells, family-wise error 5%); every
# other value is exploratory (Benjamini–Hochberg, false discovery rate q = 0.10).
CHANGE_VERDICTS = ("regressed", "improved", "no significant change", "not tested")
PRIMARY_ALPHA = 0.05
EXPLORATORY_Q = 0.10


def change_verdict(low: float, high: float, *, significant: bool = True) -> str:
    """A ratio B/A's change: *regressed* / *improved* when its interval lies wholly above / below 1 and the
    (multiplicity-corrected) test is ``significant``; else *no significant change*; *not tested* without one."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return "not tested"
    if significant and low > 1:
        return "regressed"
    if significant and high < 1:
        return "improved"
    return "no significant change"


def holm(pvalues: list[float], alpha: float = PRIMARY_ALPHA) -> list[bool]:
    """Holm's step-down rejections (family-wise error at most ``alpha``); NaN p-values are not tested."""
    tested = sorted((p, i) for i, p in enumerate(pvalues) if math.isfinite(p))
    out = [False] * len(pvalues)
    m = len(tested)
    for rank, (p, i) in enumerate(tested):
        if p > alpha / (m - rank):
            break
        out[i] = True
    return out


def benjamini_hochberg(pvalues: list[float], q: float = EXPLORATORY_Q) -> list[bool]:
    """Benjamini–Hochberg rejections at false discovery rate ``q`` (``scipy.stats.false_discovery_control``'s
    adjusted p-values ≤ q); NaN p-values are not tested."""
    from scipy.stats import false_discovery_control

    idx = [i for i, p in enumerate(pvalues) if math.isfinite(p)]
    out = [False] * len(pvalues)
    if idx:
        adjusted = false_discovery_control([pvalues[i] for i in idx], method="bh")
        for i, a in zip(idx, adjusted, strict=True):
            out[i] = bool(a <= q)
    return out


RELEASE_FACTOR = 1.02  # a paired change is called only beyond this ratio (and with its 99% interval excluding 1)


def pair_change(estimate: float, low: float, high: float, factor: float = RELEASE_FACTOR) -> str:
    """``regressed``, ``improved`` or ``unchanged``: changed when the 99% interval excludes 1 and the estimate lies
    beyond ``factor`` (the rule ``asv compare --factor`` applies to a release pair's halves, and the regressions page's)."""
    if not all(math.isfinite(x) for x in (estimate, low, high)):
        return "not tested"
    if low > 1.0 and estimate > factor:
        return "regressed"
    if high < 1.0 and estimate < 1.0 / factor:
        return "improved"
    return "unchanged"
