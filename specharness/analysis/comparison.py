"""Arm B against arm A in one (workload, clients) cell: pair the requests, compare the same work, judge both ways.

:func:`pair_requests` matches requests by (block, case id, position); :func:`prefix_work` (greedy runs: each pair's
common prefix) and :func:`sampled_work` (sampled runs: time per output token) give each pair's part in the speed
estimate; :func:`compare_arms` gives both verdicts and their evidence (:class:`PairedComparison`, :class:`SpeedWork`)
and :func:`speed_from_pairs` the speed part alone. Pairs cut at the cap never carry a *helps* (:func:`_speed_verdict`).
Rules: docs/method.md#the-speed-estimate-pair-by-pair.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from specharness.analysis.pairing import Pair, finished, history_intact, is_identical, pair_requests
from specharness.analysis.quality_tests import CaseIdentity, CasePairedTest, case_quality
from specharness.analysis.stats import NO_INTERVAL, RatioInterval, block_ratio_interval, case_resampled_interval
from specharness.analysis.summary import ArmSummary, ratio
from specharness.analysis.throughput import steady_throughput
from specharness.analysis.verdict import Verdict, quality_verdict, speed_verdict
from specharness.experiment.design import MAX_EXCLUDED_TIME, MIN_PREFIX_TOKENS
from specharness.records import RequestRecord
from specharness.traffic.client import common_prefix_tokens

__all__ = [
    "ComparisonRules",
    "PairCounts",
    "PairWork",
    "PairedComparison",
    "SpeedWork",
    "compare_arms",
    "pair_requests",
    "prefix_work",
    "sampled_work",
    "speed_block_logs",
    "speed_from_pairs",
    "time_to_token_s",
]

CASE_INTERVAL_MIN_CASES = 20  # cases from which the second interval (cases resampled) is given


@dataclass(frozen=True, slots=True)
class ComparisonRules:
    """The declared rules a comparison is judged by (from the run's profile: ``--min-prefix-tokens``,
    ``--max-excluded-time`` and the others, :func:`specharness.analysis.analyse.rules_for`)."""

    margin: float = 0.10
    confidence: float = 0.95
    min_correct: float = 0.5
    tolerance: float = 0.0
    min_same_work: float = 0.5  # share of the baseline's output tokens the common prefixes must cover
    greedy: bool = True
    min_prefix_tokens: int = MIN_PREFIX_TOKENS  # a pair whose common prefix is shorter counts apart
    max_excluded_time: float = MAX_EXCLUDED_TIME  # failed pairs' baseline time share above which: inconclusive
    timeout_s: float = 300.0  # the run's request timeout: where a timed-out request's time is counted
    offset_var: float = 0.0  # engine-instance offset variance (log scale), at its upper confidence limit
    offset_source: str = ""  # where offset_var and the band come from (the machine's A/A record)


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
    in_estimate: int = 0  # pairs whose common prefix enters the speed estimate (identical ones included)
    short_prefix: int = 0  # both finished, common prefix under the declared minimum: counted apart
    censored: int = 0  # pairs with a timeout, counted at the timeout

    @property
    def same_work_fraction(self) -> float:
        return ratio(self.same_work, self.pairs)


@dataclass(frozen=True, slots=True)
class PairWork:
    """One pair's part in the speed estimate: the common work (tokens) and each arm's time for it."""

    block: int
    case_id: str
    tokens: int
    time_a_s: float
    time_b_s: float
    identical: bool
    capped: bool  # the common work runs to the max_tokens cap of an arm that was cut there (a loop, mostly)
    censored: bool  # an arm timed out; its time is the timeout
    tokens_b: int | None = None  # sampled: arm B's own output tokens (``tokens`` is arm A's); greedy: None (same)

    @property
    def speedup(self) -> float:
        """A's time over B's for this pair: for the common work (greedy), or per output token (sampled)."""
        if self.tokens_b is None:
            return ratio(self.time_a_s, self.time_b_s)
        return ratio(ratio(self.time_a_s, self.tokens), ratio(self.time_b_s, self.tokens_b))


@dataclass(frozen=True, slots=True)
class SpeedWork:
    """What the speed estimate stands on, shown beside the verdict (docs/method.md#the-speed-estimate-pair-by-pair)."""

    basis: str
    min_prefix_tokens: int
    covered_token_share: float  # common-prefix tokens in the estimate / the baseline's output tokens, all pairs
    identical_share: float  # pairs with identical outputs / pairs
    excluded_time_share: float  # baseline time in failed pairs / baseline time in all pairs
    censored_time_share: float  # baseline time in pairs with a timeout / baseline time in the estimate
    capped_time_share: float  # baseline time in pairs cut at the cap / baseline time in the estimate
    identical: RatioInterval = NO_INTERVAL  # the same interval over identical pairs alone
    without_capped: RatioInterval = NO_INTERVAL  # the same interval without the pairs cut at the cap
    over_cases: RatioInterval = NO_INTERVAL  # cases resampled too (20 cases or more): traffic like these prompts
    cases: int = 0
    offset_sd: float = 0.0  # the engine-instance offset sd in the interval (log scale)
    offset_source: str = ""
    pairs: tuple[PairWork, ...] = ()  # the pairs in the estimate (groups reuse them; not in report.json)

    @property
    def blocks_with_pairs(self) -> int:
        return len({p.block for p in self.pairs})

    def to_dict(self) -> dict[str, Any]:
        out = {f: getattr(self, f) for f in self.__dataclass_fields__ if f != "pairs"}
        for k in ("identical", "without_capped", "over_cases"):
            out[k] = getattr(self, k).to_dict()
        return out


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
    work: SpeedWork | None = None  # what the speed estimate stands on (greedy and sampled alike)

    @property
    def order_a_first(self) -> dict[int, bool]:
        """Block -> arm A ran first, as the interval used it (JSON keeps the two block lists)."""
        return {b: b in self.a_first_blocks for b in self.ordered_blocks}

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["speedup"] = self.speedup.to_dict()
        out["throughput"] = self.throughput.to_dict()
        out["pair_counts"]["same_work_fraction"] = self.pair_counts.same_work_fraction
        out["work"] = None if self.work is None else self.work.to_dict()
        return out


def _classify(pairs: Sequence[Pair], greedy: bool) -> tuple[dict[int, list[Pair]], PairCounts]:
    """The counts of every kind of pair, and by block the same-work pairs of the cases that are the same work in
    every block where they ran (only the simulation's reference rule reads them; no verdict does): a case that
    diverged, failed or followed a diverged history somewhere leaves every block. Sampled runs: "same work" is both
    arms finishing by themselves (complete); a truncated answer is a loop or a longer answer, and its time per token
    is not compared. Replayed turns after the two arms' histories differed are counted apart
    (docs/method.md#the-speed-estimate-pair-by-pair)."""
    intact = history_intact(pairs)
    done = [finished(x) and finished(y) for x, y in pairs]
    ended = [p for p, ok, same_history in zip(pairs, done, intact, strict=True) if ok and same_history]
    failed = done.count(False)
    history_diverged = len(pairs) - failed - len(ended)
    if greedy:
        is_same = [is_identical(x, y) for x, y in ended]
    else:
        is_same = [x.verdict == y.verdict == "complete" for x, y in ended]
    same = [p for p, ok in zip(ended, is_same, strict=True) if ok]
    divergent = len(ended) - len(same)
    differs_somewhere = {x.case_id for (x, _), ok in zip(ended, is_same, strict=True) if not ok}
    differs_somewhere |= {x.case_id for (x, _), ok, h in zip(pairs, done, intact, strict=True) if not (ok and h)}
    stable = [(x, y) for x, y in same if x.case_id not in differs_somewhere]
    by_block: dict[int, list[Pair]] = {}
    for x, y in stable:
        by_block.setdefault(x.block, []).append((x, y))
    return by_block, PairCounts(
        pairs=len(pairs),
        same_work=len(stable),
        divergent=divergent,
        unstable=len(same) - len(stable),
        failed=failed,
        same_work_truncated=sum(1 for x, _ in stable if x.verdict == "truncated"),
        history_diverged=history_diverged,
    )


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


def time_to_token_s(r: RequestRecord, k: int) -> float:
    """Seconds from send to the arrival of the chunk holding the ``k``-th generated token (NaN when not reached)."""
    total = 0
    for t, n in zip(r.chunk_arrival_s, r.chunk_tokens, strict=False):
        total += n
        if total >= k > 0:
            return t
    return math.nan


def _time_for(r: RequestRecord, k: int) -> float:
    """An arm's time for its first ``k`` tokens: to the end of the request when they are its whole output (so an
    identical pair is timed end to end), else to the chunk holding token ``k``."""
    if k >= sum(r.chunk_tokens) and math.isfinite(r.e2e_s):
        return r.e2e_s
    return time_to_token_s(r, k)


def _kept_text(r: RequestRecord) -> bool:
    return not r.text.startswith(("hash:", "dropped:"))


def _common_prefix(x: RequestRecord, y: RequestRecord) -> tuple[int, int, bool]:
    """(A's tokens, B's tokens) of the work both wrote identically, and whether the chains gave it (else the texts,
    mapped to tokens in proportion; hashed or dropped texts give nothing beyond identical outputs)."""
    na, nb = sum(x.chunk_tokens), sum(y.chunk_tokens)
    if x.output_identity == y.output_identity:
        return na, nb, bool(x.prefix_chain and y.prefix_chain)
    if x.prefix_chain and y.prefix_chain:
        k = common_prefix_tokens(x.prefix_chain, y.prefix_chain)
        return k, k, True
    if not (_kept_text(x) and _kept_text(y) and x.text and y.text):
        return 0, 0, False
    chars = next(
        (i for i, (u, v) in enumerate(zip(x.text, y.text, strict=False)) if u != v), min(len(x.text), len(y.text))
    )
    return int(chars / len(x.text) * na), int(chars / len(y.text) * nb), False


def _base_time_s(r: RequestRecord, timeout_s: float) -> float:
    """The baseline's time for a request, for the time shares: to the end, the timeout for a timeout, else the last
    chunk seen (0 when none)."""
    if r.error_kind == "timeout":
        return timeout_s
    if math.isfinite(r.e2e_s):
        return r.e2e_s
    return r.chunk_arrival_s[-1] if r.chunk_arrival_s else 0.0


@dataclass(frozen=True, slots=True)
class _Work:
    pairs: list[PairWork]
    short_prefix: int
    failed: int
    history_diverged: int
    chains: bool  # every pair in the estimate had prefix chains
    covered_token_share: float
    identical_share: float
    excluded_time_share: float


def prefix_work(pairs: Sequence[Pair], rules: ComparisonRules) -> _Work:
    """Every greedy pair's common work and each arm's time for it (docs/method.md#the-speed-estimate-pair-by-pair):
    failed pairs out (their baseline time counted), timeouts at the timeout, common prefixes under
    ``rules.min_prefix_tokens`` apart."""
    intact = history_intact(pairs)
    out: list[PairWork] = []
    short = failed = diverged_history = identical = 0
    chains = True
    base_tokens = excluded_time = total_time = 0.0
    for (x, y), same_history in zip(pairs, intact, strict=True):
        base_tokens += x.output_tokens
        t_base = _base_time_s(x, rules.timeout_s)
        total_time += t_base
        if not same_history:
            diverged_history += 1
            continue
        timed_out = (x.error_kind == "timeout", y.error_kind == "timeout")
        if any(timed_out) and all(t or finished(r) for t, r in zip(timed_out, (x, y), strict=True)):
            if all(timed_out):
                k = common_prefix_tokens(x.prefix_chain, y.prefix_chain)
                ta = tb = rules.timeout_s
            elif timed_out[0]:
                k, ta, tb = sum(y.chunk_tokens), rules.timeout_s, _time_for(y, sum(y.chunk_tokens))
            else:
                k, ta, tb = sum(x.chunk_tokens), _time_for(x, sum(x.chunk_tokens)), rules.timeout_s
            out.append(PairWork(x.block, x.case_id, k, ta, tb, identical=False, capped=False, censored=True))
            continue
        if not (finished(x) and finished(y)):
            failed += 1
            excluded_time += t_base
            continue
        same = is_identical(x, y)
        identical += same
        ka, kb, chained = _common_prefix(x, y)
        if min(ka, kb) < rules.min_prefix_tokens:
            short += 1
            continue
        chains &= chained
        capped = (x.verdict == "truncated" and ka >= sum(x.chunk_tokens)) or (
            y.verdict == "truncated" and kb >= sum(y.chunk_tokens)
        )
        out.append(
            PairWork(
                x.block,
                x.case_id,
                min(ka, kb),
                _time_for(x, ka),
                _time_for(y, kb),
                identical=same,
                capped=capped,
                censored=False,
            )
        )
    covered = sum(w.tokens for w in out)
    return _Work(
        out,
        short,
        failed,
        diverged_history,
        chains and bool(out),
        covered_token_share=min(1.0, ratio(covered, base_tokens)) if base_tokens else math.nan,
        identical_share=ratio(identical, len(pairs)),
        excluded_time_share=ratio(excluded_time, total_time) if total_time else 0.0,
    )


def sampled_work(pairs: Sequence[Pair], rules: ComparisonRules) -> _Work:
    """Every sampled pair's part in the time-per-token estimate (docs/method.md#sampled-runs), pair by pair as in greedy
    runs: a pair both arms finished by themselves (complete) enters with each arm's own time and tokens; a pair with a
    timeout keeps its place when the other arm completed or timed out too (the timed-out arm's time is the timeout, its
    tokens those it had written by then: censored, flagged); a failed pair leaves alone (its baseline time counted); a
    pair cut at the cap in either arm is counted apart (a loop's time per token is not compared)."""
    intact = history_intact(pairs)
    out: list[PairWork] = []
    failed = diverged_history = identical = 0
    base_tokens = covered = excluded_time = total_time = 0.0
    for (x, y), same_history in zip(pairs, intact, strict=True):
        base_tokens += x.output_tokens
        t_base = _base_time_s(x, rules.timeout_s)
        total_time += t_base
        if not same_history:
            diverged_history += 1
            continue
        identical += is_identical(x, y)
        timed_out = (x.error_kind == "timeout", y.error_kind == "timeout")
        complete = (finished(x) and x.verdict == "complete", finished(y) and y.verdict == "complete")
        if all(t or c for t, c in zip(timed_out, complete, strict=True)):
            ta, tok_a = (rules.timeout_s, sum(x.chunk_tokens)) if timed_out[0] else (x.e2e_s, x.output_tokens)
            tb, tok_b = (rules.timeout_s, sum(y.chunk_tokens)) if timed_out[1] else (y.e2e_s, y.output_tokens)
            covered += x.output_tokens
            out.append(
                PairWork(
                    x.block,
                    x.case_id,
                    tok_a,
                    ta,
                    tb,
                    identical=False,
                    capped=False,
                    censored=any(timed_out),
                    tokens_b=tok_b,
                )
            )
        elif not (finished(x) and finished(y)):  # a failed request: its pair leaves, its time is shown
            failed += 1
            excluded_time += t_base
        # else both finished and one was cut at the cap (a loop or a longer answer): not timed, counted apart
    return _Work(
        out,
        0,
        failed,
        diverged_history,
        False,
        covered_token_share=min(1.0, ratio(covered, base_tokens)) if base_tokens else math.nan,
        identical_share=ratio(identical, len(pairs)),
        excluded_time_share=ratio(excluded_time, total_time) if total_time else 0.0,
    )


def _per_token_logs(work: Sequence[PairWork]) -> dict[int, float]:
    """Sampled: one log speedup per block, A's time per output token over B's (summed times over summed tokens)."""
    sums: dict[int, list[float]] = {}
    for w in work:
        if math.isfinite(w.time_a_s) and math.isfinite(w.time_b_s):
            row = sums.setdefault(w.block, [0.0, 0.0, 0.0, 0.0])
            row[0] += w.time_a_s
            row[1] += w.tokens
            row[2] += w.time_b_s
            row[3] += w.tokens_b or 0
    return {k: math.log((ta / na) / (tb / nb)) for k, (ta, na, tb, nb) in sums.items() if min(ta, na, tb, nb) > 0}


def _work_logs(work: Sequence[PairWork]) -> dict[int, float]:
    """One log speedup per block: A's summed time over B's, over the block's pairs."""
    ta: dict[int, float] = {}
    tb: dict[int, float] = {}
    for w in work:
        if math.isfinite(w.time_a_s) and math.isfinite(w.time_b_s) and w.time_a_s > 0 and w.time_b_s > 0:
            ta[w.block] = ta.get(w.block, 0.0) + w.time_a_s
            tb[w.block] = tb.get(w.block, 0.0) + w.time_b_s
    return {k: math.log(ta[k] / tb[k]) for k in ta}


def _by_case(work: Sequence[PairWork]) -> list[dict[str, tuple[float, float]]]:
    blocks: dict[int, dict[str, tuple[float, float]]] = {}
    for w in work:
        if math.isfinite(w.time_a_s) and math.isfinite(w.time_b_s):
            a, b = blocks.setdefault(w.block, {}).get(w.case_id, (0.0, 0.0))
            blocks[w.block][w.case_id] = (a + w.time_a_s, b + w.time_b_s)
    return [blocks[k] for k in sorted(blocks)]


def speed_block_logs(c: PairedComparison) -> dict[int, float]:
    """Block -> log same-work speedup (A's time over B's), as the comparison's speed interval used them."""
    if c.work is None:
        return {}
    return _per_token_logs(c.work.pairs) if c.work.basis == SAMPLED_BASIS else _work_logs(c.work.pairs)


def _block_log_throughput(a: Sequence[RequestRecord], b: Sequence[RequestRecord], clients: int) -> dict[int, float]:
    out = {}
    for block in sorted({r.block for r in a} & {r.block for r in b}):
        ta = steady_throughput([r for r in a if r.block == block], clients).tok_s
        tb = steady_throughput([r for r in b if r.block == block], clients).tok_s
        if ta > 0 and tb > 0:
            out[block] = math.log(tb / ta)
    return out


def _basis(w: _Work) -> str:
    if w.chains:
        return "prefix chains of the generated token ids"
    if all(p.identical or p.censored for p in w.pairs):
        return "identical outputs only, journal without prefix chains"
    return "common prefix of the texts mapped to tokens in proportion, journal without prefix chains"


SAMPLED_BASIS = (
    "time per output token, pairs both complete, timeouts at the timeout (sampled: outputs differ by design)"
)


def _speed(
    pairs: Sequence[Pair],
    counts: PairCounts,
    rules: ComparisonRules,
    interval: Callable[[dict[int, float], float], RatioInterval],
) -> tuple[RatioInterval, dict[int, float], SpeedWork, PairCounts]:
    """The speed estimate and what it stands on (docs/method.md#the-speed-estimate-pair-by-pair): greedy runs over the
    pairs' common prefixes, sampled runs per output token; in both, pair by pair (a failure removes its own pair, a
    timeout is censored)."""
    greedy = rules.greedy
    w = prefix_work(pairs, rules) if greedy else sampled_work(pairs, rules)
    logs = _work_logs(w.pairs) if greedy else _per_token_logs(w.pairs)
    speedup = interval(logs, rules.offset_var)
    in_estimate = [p for p in w.pairs if math.isfinite(p.time_a_s)]
    time_a = sum(p.time_a_s for p in in_estimate)
    cases = len({p.case_id for p in in_estimate})
    over_cases = (
        case_resampled_interval(_by_case(w.pairs), speedup, rules.confidence)
        if greedy and cases >= CASE_INTERVAL_MIN_CASES
        else NO_INTERVAL
    )
    work = SpeedWork(
        basis=_basis(w) if greedy else SAMPLED_BASIS,
        min_prefix_tokens=rules.min_prefix_tokens,
        covered_token_share=w.covered_token_share,
        identical_share=w.identical_share,
        excluded_time_share=w.excluded_time_share,
        censored_time_share=ratio(sum(p.time_a_s for p in in_estimate if p.censored), time_a),
        capped_time_share=ratio(sum(p.time_a_s for p in in_estimate if p.capped), time_a),
        identical=interval(_work_logs([p for p in w.pairs if p.identical]), rules.offset_var)
        if greedy
        else NO_INTERVAL,
        without_capped=interval(_work_logs([p for p in w.pairs if not p.capped]), rules.offset_var)
        if greedy
        else NO_INTERVAL,
        over_cases=over_cases,
        cases=cases,
        offset_sd=math.sqrt(rules.offset_var),
        offset_source=rules.offset_source,
        pairs=tuple(w.pairs),
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
    """The speed interval, verdict and evidence from paired requests alone (what :func:`compare_arms` does for
    speed, greedy or sampled by ``rules.greedy``; the simulation calls it on simulated records)."""

    def interval(logs: dict[int, float], offset_var: float = 0.0) -> RatioInterval:
        blocks = sorted(logs)
        signs = [1 if order_a_first.get(k, True) else -1 for k in blocks]
        known = all(k in order_a_first for k in blocks)
        return block_ratio_interval([logs[k] for k in blocks], signs if known else None, rules.confidence, offset_var)

    speedup, _, work, _ = _speed(pairs, PairCounts(), rules, interval)
    return speedup, _speed_verdict(speedup, work, rules, valid, invalid_reason), work


def _speed_verdict(
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
) -> PairedComparison:
    """Both verdicts for one cell. ``order_a_first[block]`` says whether arm A ran before arm B in that block."""
    pairs = pair_requests(a, b)
    _, counts = _classify(pairs, rules.greedy)

    def interval(logs: dict[int, float], offset_var: float = 0.0) -> RatioInterval:
        blocks = sorted(logs)
        signs = [1 if order_a_first.get(k, True) else -1 for k in blocks]
        known = all(k in order_a_first for k in blocks)
        return block_ratio_interval([logs[k] for k in blocks], signs if known else None, rules.confidence, offset_var)

    throughput = interval(_block_log_throughput(a, b, sa.clients))
    speedup, speed_logs, work, counts = _speed(pairs, counts, rules, interval)
    speed = _speed_verdict(speedup, work, rules, valid, invalid_reason)
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
        identity=per_case.identity,
        work=work,
    )
