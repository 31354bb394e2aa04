"""The speed verdict on simulated real traffic (issue 20): each method judges the simulated records, and the rates
are summed over runs. Entry points: :func:`run_traffic_study` / :func:`format_traffic_study`. Model and methods:
docs/method.md#the-error-rate-simulation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specharness.analysis.comparison import ComparisonRules, speed_from_pairs
from specharness.analysis.comparison.classify import block_log_speedups, classify
from specharness.analysis.simulation.model import CONFIDENCE, mirrored_a_first
from specharness.analysis.simulation.traffic_records import run_records
from specharness.analysis.simulation.traffic_scenarios import TrafficScenario, traffic_scenarios
from specharness.analysis.stats import RatioInterval, block_ratio_interval, look_confidence
from specharness.analysis.verdict import band_edges, speed_verdict
from specharness.experiment.machine_record import band_from_offset
from specharness.experiment.plan import possible_looks
from specharness.records import RequestRecord

__all__ = [
    "NO_INTERVAL_SIM",
    "TRAFFIC_METHODS",
    "TrafficResult",
    "format_traffic_study",
    "run_traffic_study",
    "simulate_traffic",
    "traffic_margin",
]

# Each simulated run is turned into request records (chunk arrivals, tokens per chunk, prefix chains, digests) and
# judged by the project's own functions: the new rules by comparison.speed_from_pairs (common prefixes, failures
# drop their pair, timeouts at the timeout, the offset variance from the A/A record in the interval, the band from
# the same record), the old rules by the functions that judged before (comparison.classify: identical outputs, a
# case that is not the same work everywhere leaves every block; no offset; the fixed 10% band). Deliberately wrong
# methods are simulated too, so that the error-rate tests are seen to fail for them.

TRAFFIC_METHODS = ("new", "old", "new-50%-interval", "new-naive-looks", "new-drop-case")


@dataclass(frozen=True, slots=True)
class TrafficResult:
    """Rates over ``runs`` simulated runs of one traffic scenario judged by one method; the verdict's right and wrong
    answers are against the method's own band (the old rules: the fixed 10%; the new: the A/A record's)."""

    scenario: str
    method: str
    runs: int
    true_speedup: float
    margin: float
    coverage_true: float
    coverage_identifiable: float
    false_verdict_rate: float
    power: float
    equivalent_rate: float
    inconclusive_rate: float
    not_comparable_rate: float
    helps_rate: float
    hurts_rate: float
    median_ci_width: float
    mean_covered_share: float
    without_capped_coverage: float  # how often the estimate without loops covers the truth without the looping cases


def _drop_case_on_failure(
    pairs: Sequence[tuple[RequestRecord, RequestRecord]],
) -> list[tuple[RequestRecord, RequestRecord]]:
    """The wrong rule: a case with a failure or timeout in any block leaves every block."""
    bad = {x.case_id for x, y in pairs if x.error_kind or y.error_kind}
    return [(x, y) for x, y in pairs if x.case_id not in bad]


def _traffic_verdict(
    pairs: Sequence[tuple[RequestRecord, RequestRecord]],
    order: dict[int, bool],
    method: str,
    sc: TrafficScenario,
    confidence: float,
    timeout: float,
) -> tuple[RatioInterval, str, float, RatioInterval]:
    if method == "old":
        by_block, counts = classify(pairs, True)
        logs = block_log_speedups(by_block, True)
        blocks = sorted(logs)
        ci = block_ratio_interval([logs[k] for k in blocks], [1 if order[k] else -1 for k in blocks], confidence)
        v = speed_verdict(ci, 0.10, same_work_fraction=counts.same_work_fraction, min_same_work=0.5).verdict
        return ci, v, math.nan, NO_INTERVAL_SIM
    rules = ComparisonRules(
        margin=traffic_margin(sc, method),
        confidence=confidence,
        timeout_s=timeout,
        offset_var=sc.recorded_offset_sd_upper**2,
    )
    if method == "new-drop-case":
        pairs = _drop_case_on_failure(pairs)
    ci, verdict, work = speed_from_pairs(pairs, order, rules)
    return ci, verdict.verdict, work.covered_token_share, work.without_capped


NO_INTERVAL_SIM = RatioInterval(math.nan, math.nan, math.nan, CONFIDENCE, 0, 0, "none")


def traffic_margin(sc: TrafficScenario, method: str) -> float:
    """The band a method judges by: the old rules' fixed 10%, else the band from the scenario's A/A record."""
    if method == "old":
        return 0.10
    return band_from_offset(sc.recorded_offset_sd_upper)


def simulate_traffic(sc: TrafficScenario, method: str = "new", runs: int = 500, seed: int = 0) -> TrafficResult:
    """Simulate ``runs`` runs of ``sc`` judged by ``method`` (:data:`TRAFFIC_METHODS`). Seeded."""
    if method not in TRAFFIC_METHODS:
        raise ValueError(f"method {method!r}: use one of {', '.join(TRAFFIC_METHODS)}")
    rng = np.random.default_rng([seed, TRAFFIC_METHODS.index(method)])
    nb = sc.planned_blocks
    a_first = mirrored_a_first(nb)
    looks = possible_looks(sc.blocks, sc.max_blocks)
    conf = {"new-50%-interval": 0.50, "new-naive-looks": CONFIDENCE}.get(method, look_confidence(CONFIDENCE, looks))
    verdicts, lows, highs, idents, truths, covered, wc = [], [], [], [], [], [], []
    for _ in range(runs):
        pairs, truth, ident, no_loops, timeout = run_records(sc, rng, a_first)
        blocks = sc.blocks
        while True:
            kept = [(x, y) for x, y in pairs if x.block < blocks]
            order = {b: bool(a_first[b]) for b in range(blocks)}
            ci, v, share, without = _traffic_verdict(kept, order, method, sc, conf, timeout)
            if v != "inconclusive" or blocks >= nb:
                break
            blocks += 2
        verdicts.append(v)
        lows.append(ci.low)
        highs.append(ci.high)
        idents.append(ident)
        truths.append(truth)
        covered.append(share)
        wc.append(without.low <= no_loops <= without.high if math.isfinite(without.low) else math.nan)
    return _traffic_summary(sc, method, verdicts, lows, highs, truths, idents, covered, wc)


def _traffic_summary(
    sc: TrafficScenario,
    method: str,
    verdicts: list[str],
    lows: list[float],
    highs: list[float],
    truths: list[float],
    idents: list[float],
    covered: list[float],
    wc: list[float],
) -> TrafficResult:
    v = np.array(verdicts)
    lo, hi, s, ident = (np.asarray(x, dtype=float) for x in (lows, highs, truths, idents))
    margin = traffic_margin(sc, method)
    down, up = band_edges(margin)
    s0 = float(np.median(s))
    helps, hurts, equiv = v == "helps", v == "hurts", v == "equivalent"
    if down <= s0 <= up:
        false, right = helps | hurts, equiv
    elif s0 > up:
        false, right = hurts | equiv, helps
    else:
        false, right = helps | equiv, hurts
    with np.errstate(invalid="ignore", divide="ignore"):
        widths = hi / lo
    finite = np.isfinite(widths)
    wcs = np.asarray(wc, dtype=float)
    return TrafficResult(
        scenario=sc.name,
        method=method,
        runs=int(v.size),
        true_speedup=s0,
        margin=margin,
        coverage_true=float(np.mean((lo <= s) & (s <= hi))),
        coverage_identifiable=float(np.mean((lo <= ident) & (ident <= hi))),
        false_verdict_rate=float(np.mean(false)),
        power=float(np.mean(right)),
        equivalent_rate=float(np.mean(equiv)),
        inconclusive_rate=float(np.mean(v == "inconclusive")),
        not_comparable_rate=float(np.mean(v == "not comparable")),
        helps_rate=float(np.mean(helps)),
        hurts_rate=float(np.mean(hurts)),
        median_ci_width=float(np.median(widths[finite])) if finite.any() else math.nan,
        mean_covered_share=float(np.nanmean(covered)) if np.isfinite(covered).any() else math.nan,
        without_capped_coverage=float(np.nanmean(wcs)) if np.isfinite(wcs).any() else math.nan,
    )


def run_traffic_study(
    runs: int = 500,
    seed: int = 0,
    scenarios: Sequence[TrafficScenario] | None = None,
    methods: Sequence[str] = ("old", "new"),
) -> list[TrafficResult]:
    """Every traffic scenario by each method (old rules vs new by default)."""
    return [simulate_traffic(sc, m, runs, seed) for sc in (scenarios or traffic_scenarios()) for m in methods]


def format_traffic_study(results: Sequence[TrafficResult]) -> str:
    """A markdown table: old rules vs new, one row per scenario and method."""
    head = (
        "| scenario | S | method | band | runs | coverage of S | coverage identifiable | false verdict | power | "
        "equivalent | inconclusive | not comparable | helps | hurts | median CI width | covered share | "
        "coverage without loops |"
    )
    lines = [head, "|" + "---|" * 17]
    for r in results:
        lines.append(
            f"| {r.scenario} | {r.true_speedup:.2f} | {r.method} | ±{r.margin:.0%} | {r.runs} | {r.coverage_true:.3f} | "
            f"{r.coverage_identifiable:.3f} | {r.false_verdict_rate:.3f} | {r.power:.3f} | {r.equivalent_rate:.3f} | "
            f"{r.inconclusive_rate:.3f} | {r.not_comparable_rate:.3f} | {r.helps_rate:.3f} | {r.hurts_rate:.3f} | "
            f"{r.median_ci_width:.3f} | {r.mean_covered_share:.2f} | {r.without_capped_coverage:.3f} |"
        )
    return "\n".join(lines)
