"""Arm B against arm A in one (workload, clients) cell: pair the requests, compare the same work, judge both ways.

:func:`compare_arms` pairs the requests (:func:`pair_requests`), counts the pairs, takes the speed estimate and
verdict (:mod:`.speed`), the throughput interval over blocks and the case-by-case quality verdict, and returns them
as one :class:`PairedComparison`. Rules: docs/method.md#the-speed-estimate-pair-by-pair.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from specharness.analysis.comparison.classify import classify
from specharness.analysis.comparison.records import ComparisonRules, PairedComparison
from specharness.analysis.comparison.speed import order_interval, speed_estimate, speed_verdict_of
from specharness.analysis.pairing import pair_requests
from specharness.analysis.quality_tests import case_quality
from specharness.analysis.summary import ArmSummary, ratio
from specharness.analysis.throughput import steady_throughput
from specharness.analysis.verdict import quality_verdict
from specharness.records import RequestRecord

__all__ = ["compare_arms"]


def _block_log_throughput(a: Sequence[RequestRecord], b: Sequence[RequestRecord], clients: int) -> dict[int, float]:
    out = {}
    for block in sorted({r.block for r in a} & {r.block for r in b}):
        ta = steady_throughput([r for r in a if r.block == block], clients).tok_s
        tb = steady_throughput([r for r in b if r.block == block], clients).tok_s
        if ta > 0 and tb > 0:
            out[block] = math.log(tb / ta)
    return out


def compare_arms(
    sa: ArmSummary,
    sb: ArmSummary,
    a: Sequence[RequestRecord],
    b: Sequence[RequestRecord],
    order_a_first: dict[int, bool],
    rules: ComparisonRules,
    *,
    valid: bool = True,
    invalid_reason: str = "",
    blocks: Sequence[int] = (),
    instance_of: dict[int, int] | None = None,
) -> PairedComparison:
    """Both verdicts for one cell. ``order_a_first[block]`` says whether arm A ran before arm B in that block;
    ``instance_of[block]`` which engine instances (of the two arms together) served it, where the run had several."""
    pairs = pair_requests(a, b)
    _, counts = classify(pairs, rules.greedy)
    interval = order_interval(order_a_first, rules, instance_of)
    throughput = interval({} if rules.interleaved else _block_log_throughput(a, b, sa.clients), 0.0)
    speedup, speed_logs, work, counts = speed_estimate(pairs, counts, rules, interval)
    speed = speed_verdict_of(speedup, work, rules, valid, invalid_reason)
    per_case = case_quality(pairs, tolerance=rules.tolerance)  # cases as the unit (analysis.quality_tests)
    answers, completion = per_case.answers, per_case.completion
    quality = quality_verdict(
        correct_a=sa.correct_fraction,
        correct_b=sb.correct_fraction,
        answers=answers,
        completion=completion,
        min_correct=rules.min_correct,
        tolerance=rules.tolerance,
        arm_a=sa.arm,
        arm_b=sb.arm,
        valid=valid,
        invalid_reason=invalid_reason,
    )
    return PairedComparison(
        workload=sa.workload,
        clients=sa.clients,
        arm_a=sa.arm,
        arm_b=sb.arm,
        basis=f"time for the same work (common prefixes: {work.basis})" if rules.greedy else work.basis,
        speedup=speedup,
        throughput=throughput,
        pair_counts=counts,
        speed=speed,
        quality=quality,
        answers=answers,
        completion=completion,
        correct_fraction_a=sa.correct_fraction,
        correct_fraction_b=sb.correct_fraction,
        goodput_ratio=ratio(sb.goodput_tok_s, sa.goodput_tok_s),
        tpot_p50_ratio=ratio(sb.tpot_ms["p50"], sa.tpot_ms["p50"]),
        block_speedups=[math.exp(speed_logs[k]) for k in sorted(speed_logs)],
        load=sa.load,
        rate=sa.rate,
        blocks=sorted(blocks),
        a_first_blocks=sorted(k for k, first in order_a_first.items() if first),
        ordered_blocks=sorted(order_a_first),
        block_instances=[instance_of.get(k, -1) for k in sorted(blocks)] if instance_of else [],
        identity=per_case.identity,
        work=work,
    )
