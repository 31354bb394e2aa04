"""Arm B against arm A in one (workload, clients) cell: pair the requests, compare the same work, judge both ways.

Pairs are requests matched by (block, case id, position). Each pair is one of:
    same work         both arms finished the request (complete, or both cut at the same cap) with identical output
                      token ids: the time each took is the time for the same work
    divergent         both finished, with different outputs (shown apart, never in the speed estimate)
    history diverged  a later turn of a replayed conversation (:mod:`specharness.traffic.replay`) that both arms
                      finished, after an earlier turn of the same conversation whose outputs differed (shown apart,
                      never in the speed estimate, never counted as identical outputs)
    failed            either arm failed or did not finish the stream, a turn skipped after an earlier one failed
                      included (shown apart; judged by the quality verdict)
Replayed conversations: each turn is a request of its own (case id ``<id>#t<k>``), all turns of one conversation at
the conversation's position, and each arm sends turn k+1 with its *own* earlier answers as history. Turn k+1 of the
two arms is the same work only if every earlier turn of that conversation in that block (same block, conversation
and position) gave identical outputs in both arms (no error in either, identical token digest), and its own
outputs are identical; once the histories differ the prompts differ, so later turns are *history diverged* whatever
their outputs (their times are not for the same work). An earlier turn missing from the pairs counts as differing.
The rule is the same in sampled runs, where histories seldom match, so there mostly first turns are compared.
A case that did the same work in some blocks but not in others (it diverged or failed somewhere) is *unstable* and
left out of every block, so each block's ratio is over the same cases. Greedy runs compare same-work pairs; sampled
runs (temperature > 0), whose outputs differ by design, compare time per output token over pairs that both finished
by themselves (a truncated answer, a loop, never enters), and say so.

Headline: speedup = (A's summed request time / B's summed request time) over a block's same-work pairs, one log
ratio per block, interval by :func:`~specharness.analysis.stats.block_ratio_interval`. System throughput (steady-
state output tokens per wall-clock second) gets the same block interval and is shown beside it; the verdict does
not use it, since it counts tokens and an arm that writes more (a loop) would look faster.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from specharness.analysis.quality_tests import CaseIdentity, CasePairedTest, case_quality
from specharness.analysis.stats import RatioInterval, block_ratio_interval
from specharness.analysis.summary import ArmSummary, ratio
from specharness.analysis.throughput import steady_throughput
from specharness.analysis.verdict import Verdict, quality_verdict, speed_verdict
from specharness.records import RequestRecord
from specharness.traffic.workloads import split_turn_id

__all__ = ["ComparisonRules", "PairCounts", "PairedComparison", "compare_arms", "pair_requests"]

Pair = tuple[RequestRecord, RequestRecord]


@dataclass(frozen=True, slots=True)
class ComparisonRules:
    """The declared rules a comparison is judged by (from the run's profile)."""

    margin: float = 0.10
    confidence: float = 0.95
    min_correct: float = 0.5
    tolerance: float = 0.0
    min_same_work: float = 0.5
    greedy: bool = True


@dataclass(frozen=True, slots=True)
class PairCounts:
    """How the pairs of one comparison split."""

    pairs: int = 0
    same_work: int = 0
    same_work_truncated: int = 0
    divergent: int = 0
    unstable: int = 0
    failed: int = 0
    history_diverged: int = 0  # later turns of a replayed conversation after its two histories differed

    @property
    def same_work_fraction(self) -> float:
        return ratio(self.same_work, self.pairs)


@dataclass(frozen=True, slots=True)
class PairedComparison:
    """Arm B against arm A in one (workload, clients) cell: both verdicts and their evidence."""

    workload: str
    clients: int
    arm_a: str
    arm_b: str
    basis: str
    speedup: RatioInterval
    throughput: RatioInterval
    pair_counts: PairCounts
    speed: Verdict
    quality: Verdict
    answers: CasePairedTest
    completion: CasePairedTest
    correct_fraction_a: float
    correct_fraction_b: float
    goodput_ratio: float
    tpot_p50_ratio: float
    block_speedups: list[float] = field(default_factory=list)
    load: str = ""  # the cell's load label, c<clients> or r<rate>
    rate: str = ""
    blocks: list[int] = field(default_factory=list)  # the blocks the comparison kept (analyse decides them)
    a_first_blocks: list[int] = field(default_factory=list)  # of the blocks with both arms, those where A ran first
    ordered_blocks: list[int] = field(default_factory=list)  # the blocks whose arm order is known
    identity: CaseIdentity = field(default_factory=CaseIdentity)  # identical pairs per case, and the A/A control

    @property
    def order_a_first(self) -> dict[int, bool]:
        """Block -> arm A ran first, as the interval used it (JSON keeps the two block lists)."""
        return {b: b in self.a_first_blocks for b in self.ordered_blocks}

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["speedup"] = self.speedup.to_dict()
        out["throughput"] = self.throughput.to_dict()
        out["pair_counts"]["same_work_fraction"] = self.pair_counts.same_work_fraction
        return out


def pair_requests(a: Sequence[RequestRecord], b: Sequence[RequestRecord]) -> list[Pair]:
    """Requests matched by (block, case id, position): the same case at the same place in the same block."""
    index = {(r.block, r.case_id, r.seq): r for r in a}
    return [(index[k], r) for r in b if (k := (r.block, r.case_id, r.seq)) in index]


def _finished(r: RequestRecord) -> bool:
    return r.error_kind is None and r.verdict in ("complete", "truncated") and r.output_tokens > 0 and r.e2e_s > 0


def _history_intact(pairs: Sequence[Pair]) -> list[bool]:
    """Per pair: True unless it is turn k > 1 of a replayed conversation and some earlier turn of that conversation
    (same block and position) did not give identical outputs in both arms, or has no pair."""
    identical: dict[tuple[int, int, str, int], bool] = {}
    turns: list[tuple[str, int] | None] = [split_turn_id(x.case_id) for x, _ in pairs]
    for (x, y), turn in zip(pairs, turns, strict=True):
        if turn is not None:
            identical[(x.block, x.seq, *turn)] = (x.error_kind is None and y.error_kind is None
                                                  and x.output_identity == y.output_identity)  # fmt: skip
    return [turn is None or all(identical.get((x.block, x.seq, turn[0], k), False) for k in range(1, turn[1]))
            for (x, _), turn in zip(pairs, turns, strict=True)]  # fmt: skip


def _classify(pairs: Sequence[Pair], greedy: bool) -> tuple[dict[int, list[Pair]], PairCounts]:
    """Same-work pairs by block, and the counts of every kind of pair. A case that is not same work in every block
    where it ran (it diverged, failed or followed a diverged history somewhere) leaves every block, so each block's
    ratio is over the same cases. Sampled runs: "same work" is both arms finishing by themselves (complete); a
    truncated answer is a loop or a longer answer, and its time per token is not compared. Replayed turns after
    the two arms' histories differed are counted apart (the module docstring gives the rule)."""
    intact = _history_intact(pairs)
    done = [_finished(x) and _finished(y) for x, y in pairs]
    finished = [p for p, ok, same_history in zip(pairs, done, intact, strict=True) if ok and same_history]
    failed = done.count(False)
    history_diverged = len(pairs) - failed - len(finished)
    if greedy:
        is_same = [x.output_identity == y.output_identity and x.verdict == y.verdict for x, y in finished]
    else:
        is_same = [x.verdict == y.verdict == "complete" for x, y in finished]
    same = [p for p, ok in zip(finished, is_same, strict=True) if ok]
    divergent = len(finished) - len(same)
    differs_somewhere = {x.case_id for (x, _), ok in zip(finished, is_same, strict=True) if not ok}
    differs_somewhere |= {x.case_id for (x, _), ok, h in zip(pairs, done, intact, strict=True) if not (ok and h)}
    stable = [(x, y) for x, y in same if x.case_id not in differs_somewhere]
    by_block: dict[int, list[Pair]] = {}
    for x, y in stable:
        by_block.setdefault(x.block, []).append((x, y))
    return by_block, PairCounts(
        pairs=len(pairs), same_work=len(stable), divergent=divergent, unstable=len(same) - len(stable), failed=failed,
        same_work_truncated=sum(1 for x, _ in stable if x.verdict == "truncated"), history_diverged=history_diverged,
    )  # fmt: skip


def _block_log_speedups(by_block: dict[int, list[Pair]], greedy: bool) -> dict[int, float]:
    out = {}
    for block, ps in by_block.items():
        time_a = float(np.sum([x.e2e_s for x, _ in ps]))
        time_b = float(np.sum([y.e2e_s for _, y in ps]))
        if greedy:  # the same tokens in both: time for the same work
            out[block] = math.log(time_a / time_b)
        else:  # time per output token
            tok_a = float(np.sum([x.output_tokens for x, _ in ps]))
            tok_b = float(np.sum([y.output_tokens for _, y in ps]))
            out[block] = math.log((time_a / tok_a) / (time_b / tok_b))
    return out


def _block_log_throughput(a: Sequence[RequestRecord], b: Sequence[RequestRecord], clients: int) -> dict[int, float]:
    out = {}
    for block in sorted({r.block for r in a} & {r.block for r in b}):
        ta = steady_throughput([r for r in a if r.block == block], clients).tok_s
        tb = steady_throughput([r for r in b if r.block == block], clients).tok_s
        if ta > 0 and tb > 0:
            out[block] = math.log(tb / ta)
    return out


def compare_arms(sa: ArmSummary, sb: ArmSummary, a: Sequence[RequestRecord], b: Sequence[RequestRecord],
                 order_a_first: dict[int, bool], rules: ComparisonRules, *, valid: bool = True,
                 invalid_reason: str = "", blocks: Sequence[int] = ()) -> PairedComparison:  # fmt: skip
    """Both verdicts for one cell. ``order_a_first[block]`` says whether arm A ran before arm B in that block."""
    pairs = pair_requests(a, b)
    by_block, counts = _classify(pairs, rules.greedy)

    def interval(logs: dict[int, float]) -> RatioInterval:
        blocks = sorted(logs)
        signs = [1 if order_a_first.get(k, True) else -1 for k in blocks]
        known = all(k in order_a_first for k in blocks)
        return block_ratio_interval([logs[k] for k in blocks], signs if known else None, rules.confidence)

    speed_logs = _block_log_speedups(by_block, rules.greedy)
    speedup = interval(speed_logs)
    throughput = interval(_block_log_throughput(a, b, sa.clients))
    speed = speed_verdict(speedup, rules.margin, valid=valid, invalid_reason=invalid_reason,
                          same_work_fraction=counts.same_work_fraction, min_same_work=rules.min_same_work)  # fmt: skip
    per_case = case_quality(pairs, tolerance=rules.tolerance)  # cases as the unit (analysis.quality_tests)
    answers, completion = per_case.answers, per_case.completion
    quality = quality_verdict(
        correct_a=sa.correct_fraction, correct_b=sb.correct_fraction, answers=answers, completion=completion,
        min_correct=rules.min_correct, tolerance=rules.tolerance, arm_a=sa.arm, arm_b=sb.arm, valid=valid,
        invalid_reason=invalid_reason,
    )  # fmt: skip
    return PairedComparison(
        workload=sa.workload, clients=sa.clients, arm_a=sa.arm, arm_b=sb.arm,
        basis="time for the same work (identical outputs)" if rules.greedy else
              "time per output token, pairs both complete (sampled: outputs differ by design)",
        speedup=speedup, throughput=throughput, pair_counts=counts, speed=speed, quality=quality,
        answers=answers, completion=completion,
        correct_fraction_a=sa.correct_fraction, correct_fraction_b=sb.correct_fraction,
        goodput_ratio=ratio(sb.goodput_tok_s, sa.goodput_tok_s),
        tpot_p50_ratio=ratio(sb.tpot_ms["p50"], sa.tpot_ms["p50"]),
        block_speedups=[math.exp(speed_logs[k]) for k in sorted(speed_logs)], load=sa.load, rate=sa.rate,
        blocks=sorted(blocks), a_first_blocks=sorted(k for k, first in order_a_first.items() if first),
        ordered_blocks=sorted(order_a_first), identity=per_case.identity,
    )  # fmt: skip
