"""The records of one comparison: its declared rules, how its pairs split, each pair's work, and the verdicts.

:class:`ComparisonRules` (what a comparison is judged by), :class:`PairCounts`, :class:`PairWork` (one pair's part in
the speed estimate), :class:`SpeedWork` (what the estimate stands on) and :class:`PairedComparison` (both verdicts).
Rules: docs/method.md#the-speed-estimate-pair-by-pair.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from specharness.analysis.quality_tests import CaseIdentity, CasePairedTest
from specharness.analysis.stats import NO_INTERVAL, RatioInterval
from specharness.analysis.summary import ratio
from specharness.analysis.verdict import Verdict
from specharness.experiment.design import MAX_EXCLUDED_TIME, MIN_PREFIX_TOKENS

__all__ = ["ComparisonRules", "PairCounts", "PairWork", "PairedComparison", "SpeedWork"]


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
    min_prefix_tokens: int = MIN_PREFIX_TOKENS  # a shorter common prefix is left out of the common-prefix times
    max_excluded_time: float = MAX_EXCLUDED_TIME  # failed pairs' baseline time share above which: inconclusive
    timeout_s: float = 300.0  # the run's request timeout: where a timed-out request's time is counted
    offset_var: float = 0.0  # engine-instance offset variance (log scale), at its upper confidence limit
    offset_source: str = ""  # where offset_var and the band come from (the machine's A/A record)
    memory_var: float = math.nan  # the same for peak memory (NaN: the record holds none, no peak-memory change)
    over_cells_var: float = math.nan  # the offset variance of a run's mean over its cells (NaN: offset_var's)
    offset_estimate_var: float = math.nan  # offset_var at its point estimate, for power (NaN: offset_var)
    interleaved: bool = False  # the arms took turns round by round within each cell: no steady-throughput window
    estimate: str = "whole"  # greedy: "whole" (each pair's whole baseline answer) or "prefix" (the common prefix only)


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
    short_prefix: int = 0  # both finished, common prefix under the declared minimum: counted (whole answers only)
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
    whole_a_s: float = math.nan  # greedy: A's time for its whole answer (end to end)
    whole_b_s: float = math.nan  # greedy: B's time for A's whole answer (common prefix, then B's own pace after it)
    whole_capped: bool = False  # greedy: either arm was cut at the cap (its pace after the prefix may be a loop)
    short_prefix: bool = False  # greedy: a common prefix under the declared minimum (whole-answer times only)

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
    # greedy: the interval over the common prefixes alone, beside the whole-answer one
    prefix: RatioInterval = NO_INTERVAL
    over_cases: RatioInterval = NO_INTERVAL  # cases resampled too (16 cases or more): traffic like these prompts
    these_prompts: RatioInterval = NO_INTERVAL  # with over_cases deciding: the interval over blocks, these prompts only
    cases: int = 0
    offset_sd: float = 0.0  # the engine-instance offset sd in the interval (log scale)
    offset_source: str = ""
    pairs: tuple[PairWork, ...] = ()  # the pairs in the estimate (groups reuse them; not in report.json)
    whole: bool = False  # greedy: the estimate times each pair's whole baseline answer (else the common prefix only)

    @property
    def population(self) -> bool:
        """The case-resampled interval decides: the verdict is about traffic like these prompts."""
        return math.isfinite(self.over_cases.low)

    @property
    def blocks_with_pairs(self) -> int:
        return len({p.block for p in self.pairs})

    def to_dict(self) -> dict[str, Any]:
        out = {f: getattr(self, f) for f in self.__dataclass_fields__ if f != "pairs"}
        for k in ("identical", "without_capped", "prefix", "over_cases", "these_prompts"):
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
    block_instances: list[int] = field(default_factory=list)  # per kept block, its engine instance (empty: one)
    identity: CaseIdentity = field(default_factory=CaseIdentity)  # identical pairs per case, and the A/A control
    work: SpeedWork | None = None  # what the speed estimate stands on (greedy and sampled alike)

    @property
    def order_a_first(self) -> dict[int, bool]:
        """Block -> arm A ran first, as the interval used it (JSON keeps the two block lists)."""
        return {b: b in self.a_first_blocks for b in self.ordered_blocks}

    @property
    def instance_of(self) -> dict[int, int]:
        """Block -> the engine instance that served it (empty where the run kept one engine per arm)."""
        return dict(zip(self.blocks, self.block_instances, strict=True)) if self.block_instances else {}

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["speedup"] = self.speedup.to_dict()
        out["throughput"] = self.throughput.to_dict()
        out["pair_counts"]["same_work_fraction"] = self.pair_counts.same_work_fraction
        out["work"] = None if self.work is None else self.work.to_dict()
        return out
