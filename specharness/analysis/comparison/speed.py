"""The speed estimate and its verdict: the interval over the pairs' work, what it stands on, and the gates.

:func:`speed_estimate` gives the interval and :class:`SpeedWork`, :func:`speed_verdict_of` the verdict (pairs cut at
the cap never carry a *helps*), :func:`speed_from_pairs` both from paired requests alone, and :func:`order_interval`
the block interval signed by arm order. Rules: docs/method.md#the-speed-estimate-pair-by-pair.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from specharness.analysis.comparison.logs import case_times, pair_times, per_token_logs, timed, work_logs
from specharness.analysis.comparison.records import ComparisonRules, PairCounts, SpeedWork
from specharness.analysis.comparison.work import SAMPLED_BASIS, WorkTally, prefix_work, sampled_work
from specharness.analysis.pairing import Pair
from specharness.analysis.stats import (
    INSTANCES_METHOD,
    NO_INTERVAL,
    RatioInterval,
    block_ratio_interval,
    case_resampled_interval,
    instance_ratio_interval,
)
from specharness.analysis.summary import ratio
from specharness.analysis.verdict import Verdict, speed_verdict

__all__ = [
    "CASE_INTERVAL_MIN_CASES",
    "INSTANCES_METHOD",
    "INSTANCES_SOURCE",
    "Interval",
    "order_interval",
    "replicate_interval",
    "speed_estimate",
    "speed_from_pairs",
    "speed_verdict_of",
]

INSTANCES_SOURCE = "none added: this run's engine instances measured the offset"
CASE_INTERVAL_MIN_CASES = 16  # cases from which the interval resamples cases too and the verdict is a population one

Interval = Callable[[dict[int, float], float], RatioInterval]  # (block -> log ratio, offset variance) -> interval


def replicate_interval(
    logs: Mapping[int, float],
    order_a_first: Mapping[int, bool],
    confidence: float,
    offset_var: float,
    instance_of: Mapping[int, int] | None = None,
) -> RatioInterval:
    """The interval of (block -> log ratio) over its replicates: where ``instance_of`` (block -> engine instance)
    puts the finite blocks on two or more engine instances, over the instances
    (:func:`~specharness.analysis.stats.instance_ratio_interval`), with no recorded allowance: the instances measured
    the offset; otherwise over the blocks, each signed by its arm order (``order_a_first[block]``: arm A ran first)
    when every block's order is known, with the allowance ``offset_var``."""
    blocks = sorted(b for b, v in logs.items() if math.isfinite(v))
    if instance_of and len({instance_of.get(b, -1) for b in blocks}) >= 2:
        return instance_ratio_interval([logs[b] for b in blocks], [instance_of.get(b, -1) for b in blocks], confidence)
    signs = [1 if order_a_first[b] else -1 for b in blocks] if all(b in order_a_first for b in blocks) else None
    return block_ratio_interval([logs[b] for b in blocks], signs, confidence, offset_var)


def order_interval(
    order_a_first: dict[int, bool], rules: ComparisonRules, instance_of: dict[int, int] | None = None
) -> Interval:
    """:func:`replicate_interval` at ``rules.confidence`` for this comparison's arm orders and engine instances."""

    def interval(logs: dict[int, float], offset_var: float) -> RatioInterval:
        return replicate_interval(logs, order_a_first, rules.confidence, offset_var, instance_of)

    return interval


def _basis(w: WorkTally, whole: bool) -> str:
    if w.chains:
        basis = "prefix chains of the generated token ids"
    elif all(p.identical or p.censored for p in w.pairs):
        basis = "identical outputs only, journal without prefix chains"
    else:
        basis = "common prefix of the texts mapped to tokens in proportion, journal without prefix chains"
    return basis + ("; each pair timed over the baseline's whole answer" if whole else "")


def speed_estimate(
    pairs: Sequence[Pair],
    counts: PairCounts,
    rules: ComparisonRules,
    interval: Interval,
) -> tuple[RatioInterval, dict[int, float], SpeedWork, PairCounts]:
    """The speed estimate and what it stands on (docs/method.md#the-speed-estimate-pair-by-pair): greedy runs over the
    pairs' common prefixes, sampled runs per output token; in both, pair by pair (a failure removes its own pair, a
    timeout is censored)."""
    greedy = rules.greedy
    whole = greedy and rules.estimate == "whole"
    w = prefix_work(pairs, rules) if greedy else sampled_work(pairs, rules)
    logs = work_logs(w.pairs, whole) if greedy else per_token_logs(w.pairs)
    fixed = interval(logs, rules.offset_var)
    over_instances = fixed.method.startswith(INSTANCES_METHOD)
    in_estimate = [timed(p, whole) for p in w.pairs]
    time_a = sum(pair_times(p, whole)[0] for p, t in zip(w.pairs, in_estimate, strict=True) if t)
    capped = [p.whole_capped if whole else p.capped for p in w.pairs]
    cases = len({p.case_id for p, t in zip(w.pairs, in_estimate, strict=True) if t})
    over_cases = (
        case_resampled_interval(case_times(w.pairs, whole), fixed, rules.confidence)
        if greedy and cases >= CASE_INTERVAL_MIN_CASES
        else NO_INTERVAL
    )
    population = math.isfinite(over_cases.low)
    speedup = over_cases if population else fixed  # from 16 cases the verdict is about traffic like these prompts
    uncapped = [p for p, c in zip(w.pairs, capped, strict=True) if not c]
    if not greedy:
        without_capped = NO_INTERVAL
    elif len(uncapped) == len(w.pairs):  # nothing cut at the cap: the same pairs, the same interval
        without_capped = speedup
    else:
        without_capped = interval(work_logs(uncapped, whole), rules.offset_var)
        if population and len({p.case_id for p in uncapped}) >= CASE_INTERVAL_MIN_CASES:
            without_capped = case_resampled_interval(case_times(uncapped, whole), without_capped, rules.confidence)

    def share(flags: Sequence[bool]) -> float:
        return ratio(
            sum(pair_times(p, whole)[0] for p, f, t in zip(w.pairs, flags, in_estimate, strict=True) if f and t), time_a
        )

    work = SpeedWork(
        basis=_basis(w, whole) if greedy else SAMPLED_BASIS,
        min_prefix_tokens=rules.min_prefix_tokens,
        covered_token_share=w.covered_token_share,
        identical_share=w.identical_share,
        excluded_time_share=w.excluded_time_share,
        censored_time_share=share([p.censored for p in w.pairs]),
        capped_time_share=share(capped),
        identical=interval(work_logs([p for p in w.pairs if p.identical], whole), rules.offset_var)
        if greedy
        else NO_INTERVAL,
        without_capped=without_capped,
        prefix=interval(work_logs(w.pairs), rules.offset_var) if whole else NO_INTERVAL,
        over_cases=over_cases,
        these_prompts=fixed if population else NO_INTERVAL,
        cases=cases,
        offset_sd=0.0 if over_instances else math.sqrt(rules.offset_var),
        offset_source=INSTANCES_SOURCE if over_instances else rules.offset_source,
        pairs=tuple(w.pairs),
        whole=whole,
    )
    censored = sum(p.censored for p in w.pairs)
    if greedy:
        counts = replace(counts, in_estimate=len(w.pairs), short_prefix=w.short_prefix, censored=censored)
    else:  # pair by pair: nothing is unstable, the same work is the pairs both complete
        counts = replace(
            counts,
            same_work=len(w.pairs) - censored,
            same_work_truncated=0,
            unstable=0,
            in_estimate=len(w.pairs),
            censored=censored,
        )
    return speedup, logs, work, counts


def speed_from_pairs(
    pairs: Sequence[Pair],
    order_a_first: dict[int, bool],
    rules: ComparisonRules,
    *,
    valid: bool = True,
    invalid_reason: str = "",
) -> tuple[RatioInterval, Verdict, SpeedWork]:
    """The speed interval, verdict and evidence from paired requests alone (what
    :func:`~specharness.analysis.comparison.compare.compare_arms` does for speed, greedy or sampled by
    ``rules.greedy``; the simulation calls it on simulated records)."""
    speedup, _, work, _ = speed_estimate(pairs, PairCounts(), rules, order_interval(order_a_first, rules))
    return speedup, speed_verdict_of(speedup, work, rules, valid, invalid_reason), work


def speed_verdict_of(
    speedup: RatioInterval, work: SpeedWork, rules: ComparisonRules, valid: bool, invalid_reason: str
) -> Verdict:
    """The speed verdict; a *helps* that the pairs cut at the cap carry (it does not hold without them) becomes
    the verdict without them, and says so: a loop to the cap is no speed-up users want."""
    verdict = _gated_verdict(speedup, work, rules, valid, invalid_reason)
    if verdict.verdict != "helps" or not work.capped_time_share > 0:
        return verdict
    without = _gated_verdict(work.without_capped, work, rules, valid, invalid_reason)
    if without.verdict == "helps":
        return verdict
    return Verdict(
        without.verdict,
        f"without the pairs cut at the cap ({work.capped_time_share:.0%} of the time): {without.reason}; with them "
        f"it would read helps ({verdict.reason}), carried by answers that ran to the cap",
    )


def _gated_verdict(
    speedup: RatioInterval, work: SpeedWork, rules: ComparisonRules, valid: bool, invalid_reason: str
) -> Verdict:
    return speed_verdict(
        speedup,
        rules.margin,
        valid=valid,
        invalid_reason=invalid_reason,
        same_work_fraction=work.covered_token_share,
        min_same_work=rules.min_same_work,
        excluded_time_share=work.excluded_time_share,
        max_excluded_time=rules.max_excluded_time,
        covered="the baseline's output tokens were written identically by both arms (common prefixes)"
        if rules.greedy
        else "the baseline's output tokens are in pairs timed per token (both complete, or a timeout)",
    )
