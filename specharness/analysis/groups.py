"""Per-group decisions and what the traffic looks like: each workload group judged on its own, beside the pooled
cell, and which prompt features went with the gain. Pure: an :class:`~specharness.analysis.analyse.Analysis` and
the prompt texts in, frozen summaries out.

Entry points: :func:`group_decisions`, :func:`feature_correlations`, :func:`token_spread`.
Rules: docs/method.md#per-group-decisions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats as sps

from specharness.analysis.comparison import PairCounts, PairedComparison, compare_arms
from specharness.analysis.copyability import LOOKUP_MAX, LOOKUP_MIN, copyability
from specharness.analysis.pairing import pair_requests
from specharness.analysis.stats import RatioInterval, min_samples_for
from specharness.analysis.summary import summarise_arm
from specharness.analysis.verdict import ALPHA, Verdict
from specharness.records import RequestRecord

if TYPE_CHECKING:  # analyse may call into this module, so no import at run time
    from specharness.analysis.analyse import Analysis

__all__ = [
    "FEATURES",
    "MIN_CORRELATION_CASES",
    "MIN_GROUP_BLOCKS",
    "MIN_GROUP_CASES",
    "MIN_GROUP_PAIRS",
    "POOLED",
    "FeatureCorrelation",
    "FeatureCorrelations",
    "GroupDecision",
    "feature_correlations",
    "group_decisions",
    "predictors_text",
    "prompts_from_manifest",
    "token_spread",
]

# A group claims a verdict from MIN_GROUP_PAIRS same-work pairs in at least MIN_GROUP_BLOCKS blocks. Its interval
# is over blocks, each block a ratio of sums over the group's pairs in it: under 8 pairs over the usual 4 blocks a
# block ratio rests on a single request, whose own noise (a scheduling hiccup in a shared cell) then decides the
# verdict; 8 is the fewest that puts an average of 2 or more requests in each of 4 blocks.
MIN_GROUP_PAIRS = 8
MIN_GROUP_BLOCKS = 2
# A group's quality is tested over its cases (:mod:`specharness.analysis.quality_tests`), whatever the blocks repeat:
# over k cases that differ the smallest one-sided p is 2^-k, so under 6 cases no loss could reach alpha/2 = 0.025.
MIN_GROUP_CASES = 6
# Fewer cases than this: no correlation is tested. With 4 cases the smallest two-sided permutation p is 2/4! = 0.083,
# so no feature could reach alpha = 0.05; with 5 it is 2/5! = 0.017.
MIN_CORRELATION_CASES = 5
POOLED = "(all)"  # the group name of the pooled row
FEATURES = ("copyability", "prompt_tokens", "output_tokens")
PERMUTATIONS = 9999  # permutation test resamples (exact when n! is smaller)


def token_spread(values: Iterable[float | int | None]) -> dict[str, float]:
    """``n``, ``p50`` and ``p95`` of token counts (None and non-finite dropped); a percentile is NaN below the
    samples it needs (:func:`~specharness.analysis.stats.min_samples_for`), as in ``percentile_table``, which is in
    ms and so not reused for counts."""
    arr = np.asarray([float(v) for v in values if v is not None and math.isfinite(float(v))], dtype=float)
    out = {"n": float(arr.size)}
    for p in (50, 95):
        enough = arr.size >= min_samples_for(p) and arr.size > 0
        out[f"p{p}"] = float(np.percentile(arr, p, method="inverted_cdf")) if enough else math.nan
    return out


@dataclass(frozen=True, slots=True)
class GroupDecision:
    """One group of one comparison (or, ``pooled``, all its groups: the pooled cell itself): speed and quality
    verdicts, acceptance, and what the group's traffic looks like. A ``small`` group shows its estimate and
    interval with the verdicts withheld ("too small (n pairs)" for speed, "too small (k cases)" for quality)."""

    workload: str
    load: str
    arm_a: str
    arm_b: str
    group: str
    pooled: bool
    small: bool
    pair_counts: PairCounts
    blocks_with_pairs: int
    speedup: RatioInterval
    speed: Verdict
    quality: Verdict
    correct_fraction_a: float
    correct_fraction_b: float
    acceptance_rate: float
    mean_acceptance_length: float
    input_tokens: dict[str, float] = field(default_factory=dict)  # n, p50, p95 of prompt tokens (arm A)
    output_tokens: dict[str, float] = field(default_factory=dict)  # n, p50, p95 of completion tokens (arm A)
    copyability: float = math.nan  # mean over arm A's finished requests
    copyability_n: int = 0
    request_speedup_p50: float = math.nan  # median per-request speedup over same-work pairs

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["speedup"] = self.speedup.to_dict()
        out["pair_counts"]["same_work_fraction"] = self.pair_counts.same_work_fraction
        return out


@dataclass(frozen=True, slots=True)
class FeatureCorrelation:
    """Spearman rank correlation of one prompt feature with the log per-request speedup, over cases."""

    feature: str
    rho: float
    pvalue: float
    n: int

    @property
    def predicts(self) -> bool:
        return self.pvalue < ALPHA


@dataclass(frozen=True, slots=True)
class FeatureCorrelations:
    """Which prompt features went with the per-request speedup in one comparison, and the sentence saying so."""

    workload: str
    load: str
    arm_a: str
    arm_b: str
    cases: int
    features: tuple[FeatureCorrelation, ...]
    predictors_text: str

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["features"] = [{**asdict(f), "predicts": f.predicts} for f in self.features]
        return out


def prompts_from_manifest(manifest: dict[str, Any]) -> dict[tuple[str, str], str]:
    """(workload, case id) -> prompt text, from the manifest's saved cases: a raw ``prompt``, or a chat case's
    message contents joined by newlines (what the proposer searches, less the chat template)."""
    out: dict[tuple[str, str], str] = {}
    for name, saved in (manifest.get("workloads") or {}).items():
        for case in saved.get("cases", []) if isinstance(saved, dict) else []:
            if case.get("prompt") is not None:
                out[(name, case["id"])] = str(case["prompt"])
            elif case.get("messages"):
                out[(name, case["id"])] = "\n".join(str(m.get("content", "")) for m in case["messages"])
    return out


@lru_cache(maxsize=8192)
def _copyability(prompt: str, text: str, lookup_min: int, lookup_max: int) -> float:
    return copyability(prompt, text, lookup_min, lookup_max)


def _lookup_sizes(manifest: dict[str, Any]) -> tuple[int, int, int | None]:
    spec = dict(manifest.get("config", {}).get("profile", {}).get("speculative") or {})
    k = spec.get("num_speculative_tokens")
    return (
        int(spec.get("prompt_lookup_min", LOOKUP_MIN)),
        int(spec.get("prompt_lookup_max", LOOKUP_MAX)),
        int(k) if k else None,
    )


def _requests(a: Analysis, c: PairedComparison, kept: set[int]) -> tuple[list[RequestRecord], list[RequestRecord]]:
    pick = [[r for r in a.measured.get((c.workload, c.load, arm), []) if r.block in kept] for arm in (c.arm_a, c.arm_b)]
    return pick[0], pick[1]


def _estimate_pairs(
    a_req: Sequence[RequestRecord], b_req: Sequence[RequestRecord], c: PairedComparison
) -> tuple[list[tuple[RequestRecord, float]], int]:
    """The pairs in the speed estimate, as the comparison ``c`` of these requests found them (its
    :attr:`~specharness.analysis.comparison.SpeedWork.pairs`, computed once by :func:`compare_arms`), each as (arm A's
    request, A's time over B's for the pair: its common work in greedy runs, per output token in sampled runs), and
    the blocks they are in."""
    if c.work is None:
        return [], 0
    request_a = {(x.block, x.case_id): x for x, _ in reversed(pair_requests(a_req, b_req))}
    return [(request_a[(w.block, w.case_id)], w.speedup) for w in c.work.pairs], c.work.blocks_with_pairs


def _acceptance(b_req: Sequence[RequestRecord], k: int | None) -> tuple[float, float]:
    reported = [r for r in b_req if r.spec_draft_tokens is not None]
    drafted = float(sum(r.spec_draft_tokens or 0 for r in reported))
    accepted = float(sum(r.spec_accepted_tokens or 0 for r in reported))
    if not drafted:
        return math.nan, math.nan
    return accepted / drafted, (1.0 + accepted / (drafted / k)) if k else math.nan


def _finished(r: RequestRecord) -> bool:
    return r.error_kind is None and r.verdict in ("complete", "truncated")


def _copy_values(
    a_req: Sequence[RequestRecord], prompts: dict[tuple[str, str], str], sizes: tuple[int, int]
) -> list[float]:
    out = []
    for r in a_req:
        prompt = prompts.get((r.workload, r.case_id))
        if prompt is not None and _finished(r):
            value = _copyability(prompt, r.text, *sizes)
            if math.isfinite(value):
                out.append(value)
    return out


Pair = tuple[RequestRecord, RequestRecord]


def _traffic(
    a_req: Sequence[RequestRecord],
    b_req: Sequence[RequestRecord],
    estimate: Sequence[tuple[RequestRecord, float]],
    prompts: dict[tuple[str, str], str],
    manifest: dict[str, Any],
) -> dict[str, Any]:
    lo, hi, k = _lookup_sizes(manifest)
    done = [r for r in a_req if _finished(r)]
    copy = _copy_values(a_req, prompts, (lo, hi))
    rate, length = _acceptance(b_req, k)
    speedups = [s for _, s in estimate if math.isfinite(s)]
    return {
        "acceptance_rate": rate,
        "mean_acceptance_length": length,
        "input_tokens": token_spread(r.prompt_tokens for r in done),
        "output_tokens": token_spread(r.completion_tokens for r in done),
        "copyability": float(np.mean(copy)) if copy else math.nan,
        "copyability_n": len(copy),
        "request_speedup_p50": float(np.median(speedups)) if speedups else math.nan,
    }


def _withheld(v: Verdict, size: str, why: str) -> Verdict:
    if v.verdict in ("invalid", "not comparable"):  # these already claim nothing, and say why
        return v
    return Verdict(
        f"too small ({size})", f"{why}: estimate shown, no verdict claimed (the rule alone would say {v.verdict})"
    )


def group_decisions(a: Analysis, prompts: dict[tuple[str, str], str]) -> list[GroupDecision]:
    """For every pooled comparison: a pooled row (its own verdicts, the traffic over all groups), then, when the
    workload has two or more groups, one row per group judged by the pooled cell's functions and rules.
    ``prompts`` maps (workload, case id) to the prompt text (:func:`prompts_from_manifest`)."""
    timeout_s = float(a.config.request_timeout_s)
    out: list[GroupDecision] = []
    for c in a.comparisons:
        order, kept = c.order_a_first, set(c.blocks)
        a_req, b_req = _requests(a, c, kept)
        estimate, blocks = _estimate_pairs(a_req, b_req, c)
        out.append(
            GroupDecision(
                workload=c.workload,
                load=c.load,
                arm_a=c.arm_a,
                arm_b=c.arm_b,
                group=POOLED,
                pooled=True,
                small=False,
                pair_counts=c.pair_counts,
                blocks_with_pairs=blocks,
                speedup=c.speedup,
                speed=c.speed,
                quality=c.quality,
                correct_fraction_a=c.correct_fraction_a,
                correct_fraction_b=c.correct_fraction_b,
                **_traffic(a_req, b_req, estimate, prompts, a.manifest),
            )
        )
        names = sorted({r.group for r in (*a_req, *b_req)})
        if len(names) < 2:
            continue
        valid = c.speed.verdict != "invalid"
        for name in names:
            ga, gb = [r for r in a_req if r.group == name], [r for r in b_req if r.group == name]
            steady = not a.rules.interleaved
            sa = summarise_arm(
                c.arm_a, c.workload, c.clients, ga, [], failed_at_s=timeout_s, rate=c.rate, steady=steady
            )
            sb = summarise_arm(
                c.arm_b, c.workload, c.clients, gb, [], failed_at_s=timeout_s, rate=c.rate, steady=steady
            )
            gc = compare_arms(sa, sb, ga, gb, order, a.rules, valid=valid, invalid_reason=c.speed.reason)
            gestimate, gblocks = _estimate_pairs(ga, gb, gc)
            counts = gc.pair_counts
            n = len(gestimate)
            small = n < MIN_GROUP_PAIRS or gblocks < MIN_GROUP_BLOCKS
            speed, quality = gc.speed, gc.quality
            if small:
                speed = _withheld(
                    speed,
                    f"{n} pairs",
                    f"{n} pairs in the speed estimate in {gblocks} blocks; "
                    f"a speed verdict needs {MIN_GROUP_PAIRS} in at least {MIN_GROUP_BLOCKS} blocks",
                )
            cases = gc.completion.n_cases
            if cases < MIN_GROUP_CASES:
                quality = _withheld(
                    quality,
                    f"{cases} case{'s' if cases != 1 else ''}",
                    f"{cases} cases; a quality verdict needs {MIN_GROUP_CASES} (cases are its unit)",
                )
            out.append(
                GroupDecision(
                    workload=c.workload,
                    load=c.load,
                    arm_a=c.arm_a,
                    arm_b=c.arm_b,
                    group=name,
                    pooled=False,
                    small=small,
                    pair_counts=counts,
                    blocks_with_pairs=gblocks,
                    speedup=gc.speedup,
                    speed=speed,
                    quality=quality,
                    correct_fraction_a=gc.correct_fraction_a,
                    correct_fraction_b=gc.correct_fraction_b,
                    **_traffic(ga, gb, gestimate, prompts, a.manifest),
                )
            )
    return out


def _permutation_spearman(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Spearman's rho (``scipy.stats.spearmanr``) and a two-sided permutation p-value (``scipy.stats.
    permutation_test``, pairings permuted, seeded): spearmanr's own p-value is a large-sample approximation that
    its documentation says is only accurate from about 500 observations."""
    rho = float(sps.spearmanr(x, y).statistic)
    ry = sps.rankdata(y)
    ryc = ry - ry.mean()

    def statistic(rx: np.ndarray, axis: int = -1) -> np.ndarray:  # Pearson on ranks = Spearman, vectorised
        rxc = rx - rx.mean(axis=axis, keepdims=True)
        return np.asarray((rxc * ryc).sum(axis=axis) / np.sqrt((rxc**2).sum(axis=axis) * (ryc**2).sum()))

    res = sps.permutation_test(
        (sps.rankdata(x),),
        statistic,
        permutation_type="pairings",
        vectorized=True,
        n_resamples=PERMUTATIONS,
        rng=np.random.default_rng(0),
    )
    return rho, float(res.pvalue)


def _correlate(feature: str, points: Sequence[tuple[float, float]]) -> FeatureCorrelation:
    pts = [(f, s) for f, s in points if math.isfinite(f) and math.isfinite(s)]
    x = np.asarray([f for f, _ in pts], dtype=float)
    y = np.asarray([s for _, s in pts], dtype=float)
    if len(pts) < MIN_CORRELATION_CASES or np.ptp(x) == 0 or np.ptp(y) == 0:  # constant: no rank correlation
        return FeatureCorrelation(feature, math.nan, math.nan, len(pts))
    rho, p = _permutation_spearman(x, y)
    return FeatureCorrelation(feature, rho, p, len(pts))


def _finite_mean(values: Iterable[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan


def _label(feature: str) -> str:
    return feature.replace("_", " ")


_MORE = {"copyability": "higher copyability", "prompt_tokens": "longer prompts", "output_tokens": "longer outputs"}


def predictors_text(found: Sequence[FeatureCorrelation], cases: int) -> str:
    """One sentence: which features predicted the per-request speedup at alpha = 0.05, with direction, or that
    none did; never a claim of cause."""
    if cases < MIN_CORRELATION_CASES:
        return (
            f"Too few cases with same-work pairs ({cases}, under {MIN_CORRELATION_CASES}) to say which prompt "
            "features predicted the speedup in this run."
        )
    hits = [f for f in found if f.predicts]
    missed = [_label(f.feature) for f in found if math.isfinite(f.pvalue) and not f.predicts]
    untested = [_label(f.feature) for f in found if not math.isfinite(f.pvalue)]
    skipped = f"; {' and '.join(untested)} could not be tested (constant or missing)" if untested else ""
    if not hits:
        if not missed:
            return f"None did in this run: no prompt feature could be tested over {cases} cases{skipped}."
        return (
            f"None did in this run: no tested feature ({', '.join(missed)}) predicted the per-request speedup at "
            f"α={ALPHA:g} over {cases} cases{skipped}."
        )
    said = "; ".join(
        f"{_MORE.get(f.feature, 'higher ' + _label(f.feature))} went with "
        f"{'larger' if f.rho > 0 else 'smaller'} speedups (Spearman ρ={f.rho:.2f}, permutation "
        f"p={f.pvalue:.3f}, n={f.n})"
        for f in hits
    )
    rest = f"; {' and '.join(missed)} did not" if missed else ""
    return (
        f"In this run ({cases} cases, α={ALPHA:g}), {said}{rest}{skipped}: an association in this run, not "
        "evidence that the feature causes the gain."
    )


def feature_correlations(a: Analysis, prompts: dict[tuple[str, str], str]) -> list[FeatureCorrelations]:
    """Per pooled comparison: Spearman correlation of the log per-request speedup with each of :data:`FEATURES`
    (arm A's copyability, prompt tokens, output tokens) over the same-work pairs of all groups.

    One point per case (the mean log speedup of its pairs, its features' mean): a case's features repeat in every
    block, so its pairs are not independent evidence about them, and counting each would overstate the evidence.
    Each feature is tested at alpha = 0.05 on its own (three tests, not adjusted). With several clients a request's
    time also depends on what ran beside it, which adds noise but no bias to the correlation.
    """
    lo, hi, _ = _lookup_sizes(a.manifest)
    out: list[FeatureCorrelations] = []
    for c in a.comparisons:
        a_req, b_req = _requests(a, c, set(c.blocks))
        estimate, _ = _estimate_pairs(a_req, b_req, c)
        by_case: dict[str, list[tuple[float, float, float, float]]] = {}
        for x, s in estimate:
            if not (s > 0 and math.isfinite(s)):
                continue
            prompt = prompts.get((x.workload, x.case_id))
            copy = _copyability(prompt, x.text, lo, hi) if prompt is not None else math.nan
            tokens_in = float(x.prompt_tokens) if x.prompt_tokens is not None else math.nan
            by_case.setdefault(x.case_id, []).append((math.log(s), copy, tokens_in, float(x.output_tokens)))
        rows = [[_finite_mean(column) for column in zip(*v, strict=True)] for v in by_case.values()]
        found = tuple(
            _correlate(name, [(float(row[i + 1]), float(row[0])) for row in rows]) for i, name in enumerate(FEATURES)
        )
        out.append(
            FeatureCorrelations(
                workload=c.workload,
                load=c.load,
                arm_a=c.arm_a,
                arm_b=c.arm_b,
                cases=len(rows),
                features=found,
                predictors_text=predictors_text(found, len(rows)),
            )
        )
    return out
