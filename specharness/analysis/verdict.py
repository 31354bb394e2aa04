"""The verdict rules, in one place: a speed verdict and a quality verdict for every comparison, always both.

Speed (from the same-work speedup interval and the declared no-difference band ``[1/(1+m), 1+m]``; the interval
already holds the engine-instance offset variance from the machine's A/A record):
    helps          the whole interval lies above 1+m
    hurts          the whole interval lies below 1/(1+m)
    equivalent     the whole interval lies inside the band (two one-sided tests, each at (1-confidence)/2)
    inconclusive   the interval reaches across an edge of the band, or failed pairs (other than timeouts, which
                   count at the timeout) hold more than the declared share of the baseline's time
    not comparable the work both arms did identically (the common prefixes) covers less than the declared share of
                   the baseline's output tokens
    invalid        a cell is missing, or its engine died

Quality (baseline A against candidate B, paired by request):
    holds          no significant loss of right answers and no significant rise in failed requests
    fails          B finishes significantly fewer requests by itself than A (failed, cut off or looping to the cap;
                   exact McNemar on complete-vs-not, one-sided, p < alpha/2), or B loses significantly more paired
                   right answers than it gains (same test, p < alpha/2) by more than the declared tolerance; the two
                   tests share alpha (Bonferroni). Both are checked before anything else.
    not assessable no significant loss, and the baseline itself is under the declared correct fraction (the
                   workload is no fair test of this model) or no case has a rubric
    holds          neither test finds a loss; the evidence names the largest loss the run cannot rule out (the
                   95% upper bound), which with few pairs is large: "holds" is "no loss detected", not "no loss"
    invalid        a cell is missing, or its engine died
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specharness.analysis.stats import PairedBinaryTest, RatioInterval

__all__ = [
    "DEFAULT_MARGIN",
    "QUALITY_VERDICTS",
    "SPEED_VERDICTS",
    "Verdict",
    "band_edges",
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


def speed_verdict(interval: RatioInterval, margin: float, *, valid: bool = True, invalid_reason: str = "",
                  same_work_fraction: float = 1.0, min_same_work: float = 0.0, excluded_time_share: float = 0.0,
                  max_excluded_time: float = 1.0, covered: str = "pairs did the same work (identical outputs)",
                  ) -> Verdict:  # fmt: skip
    """Speed verdict from the same-work interval (see the module docstring). ``same_work_fraction`` is the covered
    share the gate reads (``covered`` says of what); ``excluded_time_share`` the baseline's time in failed pairs."""
    if not valid:
        return Verdict("invalid", invalid_reason or "a cell of this comparison is missing or invalid")
    if not (same_work_fraction >= min_same_work):
        shown = "no" if not math.isfinite(same_work_fraction) else f"{same_work_fraction:.0%} of"
        return Verdict("not comparable", f"{shown} {covered}, under the declared "
                                         f"{min_same_work:.0%}; time for different work is not compared")  # fmt: skip
    if excluded_time_share > max_excluded_time:
        return Verdict("inconclusive", f"failed pairs hold {excluded_time_share:.0%} of the baseline's time, over the "
                                       f"declared {max_excluded_time:.0%}: the pairs left may be the faster ones")  # fmt: skip
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


def quality_verdict(*, correct_a: float, correct_b: float, answers: PairedBinaryTest, completion: PairedBinaryTest,
                    checked_pairs: int, min_correct: float, tolerance: float, arm_a: str, arm_b: str,
                    valid: bool = True, invalid_reason: str = "") -> Verdict:  # fmt: skip
    """Quality verdict from paired right answers and paired completions (see the module docstring)."""
    if not valid:
        return Verdict("invalid", invalid_reason or "a cell of this comparison is missing or invalid")
    alpha = ALPHA / 2
    if completion.pvalue_b_worse < alpha:
        return Verdict("fails", f"{arm_b} did not finish {completion.a_only} requests that {arm_a} completed (and "
                                f"{completion.b_only} the other way; exact McNemar p={completion.pvalue_b_worse:.3f})")  # fmt: skip
    evidence = (f"paired answers: {arm_b} lost {answers.a_only}, gained {answers.b_only} of {checked_pairs} "
                f"(exact McNemar p={answers.pvalue_b_worse:.2f}); correct {correct_a:.0%} / {correct_b:.0%}")  # fmt: skip
    if checked_pairs == 0:
        return Verdict("not assessable", "no case has a rubric")
    if answers.pvalue_b_worse < alpha and (correct_a - correct_b) > tolerance:
        return Verdict("fails", evidence)
    if not (correct_a >= min_correct):
        return Verdict("not assessable", f"{arm_a} itself is {correct_a:.0%} correct, under the declared "
                                         f"{min_correct:.0%}: this workload is no fair test of this model; {evidence}")  # fmt: skip
    bound = f"; loss at most {answers.loss_upper:.0%} (95% upper bound)" if math.isfinite(answers.loss_upper) else ""
    return Verdict("holds", evidence + bound)
