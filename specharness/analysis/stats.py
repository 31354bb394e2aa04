"""Statistics: pure functions from records to summary dataclasses. An empty sample gives NaN, never 0.

Headline speed is *speedup* = (output tokens per second of request time, arm B) / (same, arm A), over the requests
paired by (block, position in the cell) that succeeded in both arms. Its 95% CI treats the paired blocks as the
replicates (Student t over the blocks' log speedups): blocks carry drift, and the two-stage bootstrap this replaced
excluded 1 in 11 of 24 A/A cells on the 2-core CPU, far from its nominal 5%. Inter-chunk latency is reported but is
not a headline: several accepted tokens can share one chunk.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from specharness.records import CellRecord, RequestRecord

__all__ = [
    "ArmSummary",
    "Divergence",
    "PairedComparison",
    "compare_arms",
    "divergence",
    "percentiles_ms",
    "speedup_interval",
    "summarise_arm",
    "t_quantile_975",
]

PCTS = (50, 95, 99)
# Student t, 97.5% quantiles for 1..30 degrees of freedom
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip


def percentiles_ms(values_s: Iterable[float]) -> dict[str, float]:
    """p50/p95/p99 in milliseconds of the finite values; NaN when there are none."""
    arr = np.fromiter((math.nan if v is None else v for v in values_s), dtype=float)
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        return {f"p{p}": math.nan for p in PCTS}
    return {f"p{p}": float(np.percentile(arr, p) * 1000.0) for p in PCTS}


def _ratio(num: float, den: float) -> float:
    return num / den if den else math.nan


@dataclass(frozen=True, slots=True)
class ArmSummary:
    """One arm in one (workload, clients) cell, pooled over its valid blocks."""

    arm: str
    workload: str
    clients: int
    requests: int
    failed: int
    incomplete: int
    truncated: int
    complete: int
    checked: int
    correct: int
    unchecked: int
    wall_s: float
    output_tokens: int
    ttft_ms: dict[str, float]
    tpot_ms: dict[str, float]
    itl_ms: dict[str, float]
    e2e_ms: dict[str, float]
    output_tok_s: float
    requests_s: float
    goodput_requests_s: float
    goodput_tok_s: float
    error_rate: float
    correct_fraction: float
    complete_fraction: float
    acceptance: dict[str, float] = field(default_factory=dict)
    accepted_per_position: list[float] = field(default_factory=list)
    peak_memory_mib: dict[str, float] = field(default_factory=dict)
    error_kinds: dict[str, int] = field(default_factory=dict)
    harness_cpu_fraction: float = math.nan

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarise_arm(arm: str, workload: str, clients: int, requests: Sequence[RequestRecord],
                  cells: Sequence[CellRecord]) -> ArmSummary:  # fmt: skip
    """Summarise measured requests of one arm/cell; ``cells`` give wall time, counters and memory."""
    failed = sum(1 for r in requests if r.verdict == "failed")
    incomplete = sum(1 for r in requests if r.verdict == "incomplete")
    truncated = sum(1 for r in requests if r.verdict == "truncated")
    complete = sum(1 for r in requests if r.verdict == "complete")
    correct = sum(1 for r in requests if r.counts_correct)
    unchecked = sum(1 for r in requests if r.check_detail == "unchecked")
    checked = len(requests) - unchecked
    wall = sum(c.wall_s for c in cells)
    ok = [r for r in requests if r.error_kind is None]
    tokens = sum(r.output_tokens for r in ok)
    useful = [r for r in requests if r.useful]
    itl = [gap for r in ok for gap in r.inter_chunk_s]
    totals: dict[str, float] = {}
    per_pos: list[float] = []
    peak: dict[str, float] = {}
    for c in cells:
        for k, v in c.counters.items():
            totals[k] = totals.get(k, 0.0) + v
        for i, v in enumerate(c.accepted_per_position):
            if i >= len(per_pos):
                per_pos.append(0.0)
            per_pos[i] += v
        for k, v in c.memory.items():
            if k.startswith("peak_"):
                peak[k] = max(peak.get(k, 0.0), v)
    drafts = totals.get("drafts", 0.0)
    n = len(requests)
    return ArmSummary(
        arm=arm, workload=workload, clients=clients, requests=n, failed=failed, incomplete=incomplete,
        truncated=truncated, complete=complete, checked=checked, correct=correct, unchecked=unchecked,
        wall_s=wall, output_tokens=tokens,
        ttft_ms=percentiles_ms(r.ttft_s for r in ok), tpot_ms=percentiles_ms(r.tpot_s for r in ok),
        itl_ms=percentiles_ms(itl), e2e_ms=percentiles_ms(r.e2e_s for r in ok),
        output_tok_s=_ratio(tokens, wall), requests_s=_ratio(len(ok), wall),
        goodput_requests_s=_ratio(len(useful), wall), goodput_tok_s=_ratio(sum(r.output_tokens for r in useful), wall),
        error_rate=_ratio(failed + incomplete, n), correct_fraction=_ratio(correct, n - unchecked),
        complete_fraction=_ratio(complete, n),
        acceptance={
            "drafts": drafts, "draft_tokens": totals.get("draft_tokens", 0.0),
            "accepted_tokens": totals.get("accepted_tokens", 0.0),
            "acceptance_rate": _ratio(totals.get("accepted_tokens", 0.0), totals.get("draft_tokens", 0.0)),
            "mean_acceptance_length": 1.0 + totals["accepted_tokens"] / drafts if drafts else math.nan,
        },
        accepted_per_position=[_ratio(v, drafts) for v in per_pos],
        peak_memory_mib=peak,
        error_kinds=_count(r.error_kind for r in requests if r.error_kind),
        harness_cpu_fraction=_ratio(sum(c.harness_cpu_s for c in cells), wall),
    )  # fmt: skip


def _count(items: Iterable[str | None]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        if item:
            out[item] = out.get(item, 0) + 1
    return out


@dataclass(frozen=True, slots=True)
class Divergence:
    """Greedy outputs of two arms compared pairwise: identical count and where the first difference falls."""

    pairs: int
    identical: int
    first_divergence_chars: list[int]

    @property
    def median_first_divergence_chars(self) -> float:
        return float(np.median(self.first_divergence_chars)) if self.first_divergence_chars else math.nan


def divergence(pairs: Sequence[tuple[RequestRecord, RequestRecord]]) -> Divergence:
    identical = 0
    firsts: list[int] = []
    for a, b in pairs:
        if a.text == b.text:
            identical += 1
            continue
        limit = min(len(a.text), len(b.text))
        firsts.append(next((i for i in range(limit) if a.text[i] != b.text[i]), limit))
    return Divergence(pairs=len(pairs), identical=identical, first_divergence_chars=firsts)


def t_quantile_975(df: int) -> float:
    """The 97.5% quantile of Student's t with ``df`` degrees of freedom (table to 30, Cornish-Fisher beyond)."""
    if df < 1:
        return math.nan
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def speedup_interval(blocks: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]) -> tuple[float, float, float]:
    """Point estimate and 95% CI of speedup from paired units grouped by block.

    Each block is (tokens_a, seconds_a, tokens_b, seconds_b), arrays aligned by paired unit.
    speedup = (sum tokens_b / sum seconds_b) / (sum tokens_a / sum seconds_a) over all blocks.
    The paired blocks are the replicates: the CI is the point estimate times exp(± t(n-1) · sd / sqrt(n)) of the
    blocks' log speedups. One block gives no CI (NaN). Request noise inside a block shows up in that block's ratio.
    """
    blocks = [b for b in blocks if len(b[0])]
    if not blocks:
        return math.nan, math.nan, math.nan
    sums = np.array([[float(part.sum()) for part in b] for b in blocks])  # per block: tokens_a, s_a, tokens_b, s_b
    ta, sa, tb, sb = sums.sum(axis=0)
    if not (ta and sa and tb and sb):
        return math.nan, math.nan, math.nan
    point = float((tb / sb) / (ta / sa))
    whole = sums[(sums != 0).all(axis=1)]
    logs = np.log((whole[:, 2] / whole[:, 3]) / (whole[:, 0] / whole[:, 1]))
    if logs.size < 2:
        return point, math.nan, math.nan
    half = t_quantile_975(logs.size - 1) * float(logs.std(ddof=1)) / math.sqrt(logs.size)
    return point, point * math.exp(-half), point * math.exp(half)


@dataclass(frozen=True, slots=True)
class PairedComparison:
    """Arm B against arm A in one (workload, clients) cell."""

    workload: str
    clients: int
    arm_a: str
    arm_b: str
    paired_units: int
    speedup: float
    speedup_ci_low: float
    speedup_ci_high: float
    throughput_ratio: float
    tpot_p50_ratio: float
    goodput_ratio: float
    correct_fraction_a: float
    correct_fraction_b: float
    identical_outputs: int
    compared_outputs: int
    median_first_divergence_chars: float
    verdict: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def paired_units(a: Sequence[RequestRecord], b: Sequence[RequestRecord]) -> list[tuple[RequestRecord, RequestRecord]]:
    """Requests matched by (block, seq, case id): the same case at the same place in the same block."""
    index = {(r.block, r.seq, r.case_id): r for r in a}
    return [(index[k], r) for r in b if (k := (r.block, r.seq, r.case_id)) in index]


def sign_test_worse(pairs: Sequence[tuple[RequestRecord, RequestRecord]]) -> tuple[int, int, float]:
    """Paired correctness: (A right & B wrong, A wrong & B right, one-sided exact sign-test p that B is worse)."""
    checked = [(x, y) for x, y in pairs if x.check_detail != "unchecked" and y.check_detail != "unchecked"]
    lost = sum(1 for x, y in checked if x.counts_correct and not y.counts_correct)
    gained = sum(1 for x, y in checked if y.counts_correct and not x.counts_correct)
    n = lost + gained
    p = sum(math.comb(n, k) for k in range(lost, n + 1)) / 2**n if n else 1.0
    return lost, gained, p


def compare_arms(
    sa: ArmSummary, sb: ArmSummary, a: Sequence[RequestRecord], b: Sequence[RequestRecord], *,
    min_correct_fraction: float, quality_tolerance: float, valid: bool, invalid_reason: str = "",
    greedy: bool = True, equivalence_margin: float = 0.10,
) -> PairedComparison:  # fmt: skip
    """Speedup with CI, quality, divergence and the verdict for one cell."""
    pairs = paired_units(a, b)
    ok_pairs = [(x, y) for x, y in pairs if x.error_kind is None and y.error_kind is None
                and x.output_tokens > 0 and y.output_tokens > 0 and x.e2e_s > 0 and y.e2e_s > 0]  # fmt: skip
    by_block: dict[int, list[tuple[RequestRecord, RequestRecord]]] = {}
    for x, y in ok_pairs:
        by_block.setdefault(x.block, []).append((x, y))
    arrays = [
        (np.array([x.output_tokens for x, _ in ps], float), np.array([x.e2e_s for x, _ in ps], float),
         np.array([y.output_tokens for _, y in ps], float), np.array([y.e2e_s for _, y in ps], float))
        for ps in by_block.values()
    ]  # fmt: skip
    point, low, high = speedup_interval(arrays)
    div = divergence(pairs) if greedy else Divergence(0, 0, [])
    quality = sign_test_worse(pairs)
    verdict, reason = _verdict(sa, sb, low, high, min_correct_fraction, quality_tolerance, valid, invalid_reason,
                               quality, equivalence_margin)  # fmt: skip
    return PairedComparison(
        workload=sa.workload, clients=sa.clients, arm_a=sa.arm, arm_b=sb.arm, paired_units=len(ok_pairs),
        speedup=point, speedup_ci_low=low, speedup_ci_high=high,
        throughput_ratio=_ratio(sb.output_tok_s, sa.output_tok_s),
        tpot_p50_ratio=_ratio(sb.tpot_ms["p50"], sa.tpot_ms["p50"]),
        goodput_ratio=_ratio(sb.goodput_tok_s, sa.goodput_tok_s),
        correct_fraction_a=sa.correct_fraction, correct_fraction_b=sb.correct_fraction,
        identical_outputs=div.identical, compared_outputs=div.pairs,
        median_first_divergence_chars=div.median_first_divergence_chars,
        verdict=verdict, reason=reason,
    )  # fmt: skip


def _verdict(sa: ArmSummary, sb: ArmSummary, low: float, high: float, min_correct: float, tolerance: float,
             valid: bool, invalid_reason: str, quality: tuple[int, int, float], margin: float) -> tuple[str, str]:  # fmt: skip
    """helps / hurts need the whole 95% CI beyond the equivalence margin; quality fails on the declared threshold,
    or when B loses significantly more paired answers than it gains (one-sided sign test, p < 0.05) by more than
    the declared tolerance."""
    if not valid:
        return "invalid", invalid_reason or "a cell of this comparison is missing or invalid"
    qa, qb = sa.correct_fraction, sb.correct_fraction
    lost, gained, p = quality
    if math.isfinite(qb):
        if qb < min_correct:
            return "fails quality", f"{sb.arm} correct fraction {qb:.2f} is below the declared {min_correct:.2f}"
        if p < 0.05 and math.isfinite(qa) and qb < qa - tolerance:
            return "fails quality", (f"{sb.arm} got {lost} paired answers wrong that {sa.arm} got right (and {gained} "
                                     f"the other way; sign test p={p:.3f}); correct {qb:.2f} vs {qa:.2f}")  # fmt: skip
    if sb.error_rate > sa.error_rate:
        return "fails quality", f"{sb.arm} error rate {sb.error_rate:.2f} exceeds {sa.arm}'s {sa.error_rate:.2f}"
    if not (math.isfinite(low) and math.isfinite(high)):
        return "inconclusive", "a confidence interval needs successful pairs in at least 2 blocks"
    up, down = 1.0 + margin, 1.0 / (1.0 + margin)
    if low > up:
        return "helps", f"speedup 95% CI [{low:.2f}, {high:.2f}] is above {up:.2f}"
    if high < down:
        return "hurts", f"speedup 95% CI [{low:.2f}, {high:.2f}] is below {down:.2f}"
    return "inconclusive", f"speedup 95% CI [{low:.2f}, {high:.2f}] reaches into the ±{margin:.0%} no-difference band"
