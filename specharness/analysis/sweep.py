"""A load sweep read off an analysed run: speedup against load, where speculation stops paying, and SLO capacity.

:func:`sweeps` orders each workload's levels by offered load (:class:`WorkloadSweep`); :func:`fit_crossings` reads
where a monotone fit of the speedup falls to the band's upper edge and to 1, each with a bootstrap bracket;
:func:`crossover` gives the level-by-level reading and :func:`capacity` each arm's max sustainable load under SLOs.
Rules: docs/method.md#reading-a-load-sweep.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import optimize
from scipy import stats as sps

from specharness.analysis.analyse import Analysis
from specharness.analysis.stats import RatioInterval
from specharness.analysis.summary import ArmSummary, ratio
from specharness.analysis.verdict import band_edges
from specharness.records import PeakProbeEvent

__all__ = [
    "Bracket",
    "Capacity",
    "CurveCrossing",
    "LevelArm",
    "SweepLevel",
    "WorkloadSweep",
    "capacity",
    "crossover",
    "fit_crossings",
    "offered_text",
    "sweeps",
]

HELPS, HURTS = "helps", "hurts"
UNJUDGED = ("invalid", "not comparable")
BOOTSTRAP_DRAWS = 2000
CURVE_CONFIDENCE = 0.95


@dataclass(frozen=True, slots=True)
class LevelArm:
    """One arm at one load level."""

    arm: str
    requests: int
    tpot_p50_ms: float
    tpot_p95_ms: float
    ttft_p95_ms: float
    sent_rps: float
    completed_rps: float
    output_tok_s: float
    slo_goodput_rps: float
    slo_goodput_fraction: float
    slo_latency_fraction: float
    on_time_fraction: float
    delivered: bool | None  # None: closed loop (no schedule to deliver)
    harness_cpu_fraction: float


@dataclass(frozen=True, slots=True)
class SweepLevel:
    """One load level of one workload: the paired verdicts and each arm's figures."""

    workload: str
    load: str
    offered: float
    open_loop: bool
    speedup: RatioInterval
    speed_verdict: str
    quality_verdict: str
    mean_acceptance_length: float
    efficiency: float
    arms: dict[str, LevelArm] = field(default_factory=dict)

    @property
    def delivered(self) -> bool | None:
        flags = [a.delivered for a in self.arms.values() if a.delivered is not None]
        return all(flags) if flags else None


@dataclass(frozen=True, slots=True)
class Bracket:
    """Where a change of verdict happens: between ``below`` (the last level before it, None when it happens at the
    lightest tested load) and ``at`` (the first level where it shows)."""

    below: str | None
    below_offered: float
    at: str
    at_offered: float


@dataclass(frozen=True, slots=True)
class CurveCrossing:
    """Where the fitted speedup curve falls to ``threshold``, with a bootstrap bracket.

    Positions are on the fitted levels' index scale: ``i + f`` lies the fraction ``f`` of the way (in log load)
    from fitted level ``i`` to level ``i + 1``; -0.5 means at or below the lightest fitted level, ``n - 0.5`` beyond
    the heaviest (the curve stays above the threshold). ``load``, ``load_low`` and ``load_high`` are the same
    positions as loads: 0 for at or below the lightest, inf for past the heaviest, and the lighter end for a
    position between the heaviest rate and "all at once". ``text`` says it in words.
    """

    threshold: float
    position: float
    position_low: float
    position_high: float
    load: float
    load_low: float
    load_high: float
    confidence: float
    draws: int
    text: str


@dataclass(frozen=True, slots=True)
class Capacity:
    """Max sustainable load per arm (None: not even the lightest level; inf: every level) and ngram / baseline."""

    basis: str
    max_load: dict[str, float | None]
    max_label: dict[str, str | None]
    ratio: float
    censored: bool = False  # one arm held every level: the ratio is a bound (≥ when ngram did, ≤ when baseline did)


@dataclass(frozen=True, slots=True)
class WorkloadSweep:
    workload: str
    unit: str  # "requests/s" or "clients"
    levels: list[SweepLevel]
    stops_helping: Bracket | None
    starts_hurting: Bracket | None
    helps_up_to: float  # offered load of the heaviest level at which ngram helps (NaN: at none)
    skipped: list[str]
    goodput_capacity: Capacity
    latency_capacity: Capacity
    peak_rps: dict[str, float] = field(default_factory=dict)
    crossover_text: str = ""
    dips: list[str] = field(default_factory=list)  # lighter levels not helping below one that helps
    stops_clearing_band: CurveCrossing | None = None  # the fitted curve falls to the band's upper edge
    stops_above_one: CurveCrossing | None = None  # the fitted curve falls to 1
    fitted_speedup: list[float] = field(default_factory=list)  # per level; NaN where left out of the fit
    left_out: list[str] = field(default_factory=list)  # levels not in the fit (not delivered or not judged)

    @property
    def helps_everywhere(self) -> bool:
        """ngram helps at every judged level, the heaviest included (JSON has no infinity for ``helps_up_to``)."""
        return math.isinf(self.helps_up_to)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for level, raw in zip(self.levels, out["levels"], strict=True):
            raw["speedup"] = level.speedup.to_dict()
        out["helps_everywhere"] = self.helps_everywhere
        return out


def _level_arm(s: ArmSummary) -> LevelArm:
    d, g = s.delivery, s.slo_goodput
    return LevelArm(
        arm=s.arm,
        requests=s.requests,
        tpot_p50_ms=s.tpot_ms.get("p50", math.nan),
        tpot_p95_ms=s.tpot_ms.get("p95", math.nan),
        ttft_p95_ms=s.ttft_ms.get("p95", math.nan),
        sent_rps=d.get("sent_rps", math.nan),
        completed_rps=d.get("completed_rps", s.requests_s),
        output_tok_s=s.output_tok_s,
        slo_goodput_rps=g.get("rps", math.nan),
        slo_goodput_fraction=g.get("fraction", math.nan),
        slo_latency_fraction=g.get("latency_fraction", math.nan),
        on_time_fraction=d.get("on_time_fraction", math.nan),
        delivered=bool(d["delivered"]) if math.isfinite(d.get("delivered", math.nan)) else None,
        harness_cpu_fraction=s.harness_cpu_fraction,
    )


def crossover(levels: Sequence[SweepLevel]) -> tuple[Bracket | None, Bracket | None, float, list[str], list[str]]:
    """(stops helping, starts hurting, helps up to, dips, skipped levels) over levels ordered by offered load.

    ngram *stops helping* after the heaviest level at which it helps: beyond it, it never helps again. A level below
    that one whose verdict is not "helps" (its interval touched the band, then a heavier level helped again) is a
    *dip*, listed, not read as the crossover: near the band edge one level's interval can graze it by chance, and a
    crossover that moved with such a graze would make the tracked value noise. It *starts to hurt* at the first level
    judged "hurts"."""
    judged = [lv for lv in levels if lv.speed_verdict not in UNJUDGED]
    skipped = [lv.load for lv in levels if lv.speed_verdict in UNJUDGED]
    helping = [i for i, lv in enumerate(judged) if lv.speed_verdict == HELPS]
    if not judged:
        return None, None, math.nan, [], skipped
    if not helping:
        stops: Bracket | None = _bracket(None, judged[0])
        helps_up_to, dips = math.nan, []
    else:
        last = helping[-1]
        stops = _bracket(judged[last], judged[last + 1]) if last + 1 < len(judged) else None
        helps_up_to = judged[last].offered
        dips = [lv.load for lv in judged[:last] if lv.speed_verdict != HELPS]
    hurts = None
    for i, lv in enumerate(judged):
        if lv.speed_verdict == HURTS:
            hurts = _bracket(judged[i - 1] if i else None, lv)
            break
    return stops, hurts, helps_up_to, dips, skipped


def _log_se(interval: RatioInterval) -> float:
    """The standard error of the log speedup, offset included: the interval's own, else read back from its t
    interval at the degrees of freedom its quantile used (NaN without an interval)."""
    if not (interval.low > 0 and interval.estimate > 0 and math.isfinite(interval.high) and interval.df >= 1):
        return math.nan
    if math.isfinite(interval.se_log):
        return interval.se_log
    df = interval.t_df if math.isfinite(interval.t_df) and interval.t_df >= 1 else interval.df
    t = float(sps.t.ppf(0.5 + interval.confidence / 2.0, df))
    return (math.log(interval.high) - math.log(interval.low)) / (2.0 * t)


MIN_OWN_SE = 1e-4  # a level's own standard error is never taken as smaller (its weight stays finite)


def _split_se(levels: Sequence[SweepLevel]) -> tuple[np.ndarray, float]:
    """(each level's own standard error, the shared offset's sd): the engine-instance offset every level's interval
    holds (``offset_var``) is one offset shared by all levels of a run, not independent noise per level."""
    total = np.array([_log_se(lv.speedup) for lv in levels])
    shared_var = max((lv.speedup.offset_var for lv in levels), default=0.0)
    shared_var = shared_var if math.isfinite(shared_var) and shared_var > 0 else 0.0
    own = np.sqrt(np.maximum(total**2 - shared_var, MIN_OWN_SE**2))
    return own, math.sqrt(shared_var)


def _in_fit(level: SweepLevel) -> bool:
    se = _log_se(level.speedup)
    return level.speed_verdict not in UNJUDGED and level.delivered is not False and math.isfinite(se) and se > 0


def _monotone(log_speedup: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The weighted least-squares non-increasing fit (pool adjacent violators)."""
    return np.asarray(optimize.isotonic_regression(log_speedup, weights=weights, increasing=False).x)


def _crossing_position(fitted: np.ndarray, threshold: float) -> float:
    """Where the non-increasing ``fitted`` (log scale) first reaches ``threshold``, on the index scale of
    :class:`CurveCrossing` (linear between levels)."""
    n = fitted.size
    if fitted[0] <= threshold:
        return -0.5
    at = np.nonzero(fitted <= threshold)[0]
    if at.size == 0:
        return n - 0.5
    j = int(at[0])
    return j - 1 + float((fitted[j - 1] - threshold) / (fitted[j - 1] - fitted[j]))


def _load_at(position: float, offered: Sequence[float]) -> float:
    n = len(offered)
    if position < 0:
        return 0.0
    if position > n - 1:
        return math.inf
    i = min(math.floor(position), n - 1)
    f = position - i
    if f <= 0 or i == n - 1 or math.isinf(offered[i + 1]):
        return offered[i]
    return math.exp(math.log(offered[i]) + f * (math.log(offered[i + 1]) - math.log(offered[i])))


def _position_text(position: float, offered: Sequence[float], unit: str, short: bool = False) -> str:
    """Where a crossing lies, in words: the reading itself, or (``short``) an end of its bracket."""
    n = len(offered)
    if position < 0:
        first = offered_text(offered[0], unit)
        return f"≤ {first}" if short else f"already at the lightest fitted load ({first})"
    if position > n - 1:
        last = offered_text(offered[-1], unit)
        return f"past {last}" if short else f"nowhere in the tested range (still above it at {last})"
    i = min(math.floor(position), n - 1)
    if position > i and i + 1 < n and math.isinf(offered[i + 1]):
        lighter = offered_text(offered[i], unit)
        return f"{lighter} to all at once" if short else f"between {lighter} and all at once"
    load = offered_text(float(f"{_load_at(position, offered):.3g}"), unit)
    return load if short else f"at about {load}"


def fit_crossings(
    levels: Sequence[SweepLevel], margin: float, unit: str = "requests/s", draws: int = BOOTSTRAP_DRAWS, seed: int = 0
) -> tuple[CurveCrossing | None, CurveCrossing | None, list[float], list[str]]:
    """(stops clearing the band, stops being above 1, fitted speedup per level, levels left out) from one monotone fit
    over all levels (ordered by offered load): docs/method.md#reading-a-load-sweep. ``None`` readings with fewer than
    two levels in the fit. The fit is non-increasing: a speedup that truly rises with load would be flattened."""
    used = [i for i, lv in enumerate(levels) if _in_fit(lv)]
    own, _ = _split_se([levels[i] for i in used])  # a level whose blocks did not vary has no weight to give
    used = [i for i, s in zip(used, own, strict=True) if s > MIN_OWN_SE]
    left_out = [lv.load for i, lv in enumerate(levels) if i not in used]
    fitted_all = [math.nan] * len(levels)
    if len(used) < 2:
        return None, None, fitted_all, left_out
    y = np.array([math.log(levels[i].speedup.estimate) for i in used])
    se, shared_sd = _split_se([levels[i] for i in used])
    df = np.array([levels[i].speedup.df for i in used], dtype=float)
    weights = 1.0 / se**2
    offered = [levels[i].offered for i in used]
    fitted = _monotone(y, weights)
    for i, value in zip(used, fitted, strict=True):
        fitted_all[i] = math.exp(float(value))
    rng = np.random.default_rng(seed)
    own = se * rng.standard_t(df, size=(draws, y.size))
    redrawn = y + own + shared_sd * rng.standard_normal((draws, 1))  # one offset per draw, shared by every level
    curves = [_monotone(row, weights) for row in redrawn]
    readings = []
    for threshold in (band_edges(margin)[1], 1.0):
        c = math.log(threshold)
        point = _crossing_position(fitted, c)
        positions = np.array([_crossing_position(curve, c) for curve in curves])
        low, high = (float(q) for q in np.quantile(positions, [(1 - CURVE_CONFIDENCE) / 2, (1 + CURVE_CONFIDENCE) / 2]))
        ends = [_position_text(x, offered, unit, short=True) for x in (low, high)]
        bracket = f" ({CURVE_CONFIDENCE:.0%} bracket: {ends[0]}" + (f" … {ends[1]})" if ends[1] != ends[0] else ")")
        readings.append(
            CurveCrossing(
                threshold=threshold,
                position=point,
                position_low=low,
                position_high=high,
                load=_load_at(point, offered),
                load_low=_load_at(low, offered),
                load_high=_load_at(high, offered),
                confidence=CURVE_CONFIDENCE,
                draws=draws,
                text=_position_text(point, offered, unit) + bracket,
            )
        )
    return readings[0], readings[1], fitted_all, left_out


def _bracket(below: SweepLevel | None, at: SweepLevel) -> Bracket:
    return Bracket(below.load if below else None, below.offered if below else math.nan, at.load, at.offered)


def capacity(levels: Sequence[SweepLevel], arms: tuple[str, str], fraction: float, basis: str) -> Capacity:
    """Max sustainable load of each arm; ``basis`` "goodput" (right and within SLOs) or "latency" (within SLOs)."""
    best: dict[str, float | None] = {}
    label: dict[str, str | None] = {}
    for arm in arms:
        best[arm], label[arm] = None, None
        for lv in levels:
            a = lv.arms.get(arm)
            share = (a.slo_goodput_fraction if basis == "goodput" else a.slo_latency_fraction) if a else math.nan
            if not share >= fraction:  # NaN fails too
                break
            best[arm], label[arm] = lv.offered, lv.load
    ref, cand = best[arms[0]], best[arms[1]]
    # Censored capacities: an arm that held every level, all at once included, counts as the heaviest finite tested
    # load; one that held not even the lightest, as half the lightest. The ratio is then a bound, and says so; it
    # stays finite, so a release where ngram falls below the ladder shows as a rise, not as n/a.
    finite = [lv.offered for lv in levels if math.isfinite(lv.offered)]
    top, lightest = max(finite, default=math.nan), min(finite, default=math.nan)

    def value(x: float | None) -> float:
        return lightest / 2 if x is None else min(x, top)

    if ref is None and cand is None:
        r, censored = math.nan, False
    elif ref is not None and cand is not None and math.isinf(ref) and math.isinf(cand):
        r, censored = 1.0, False
    else:
        r = ratio(value(cand), value(ref))
        censored = any(x is None or math.isinf(x) for x in (ref, cand))
    return Capacity(basis=basis, max_load=best, max_label=label, ratio=r, censored=censored)


def offered_text(value: float, unit: str) -> str:
    """``2 requests/s``, ``all at once``, ``4 clients``."""
    return "all at once" if math.isinf(value) else f"{value:g} {unit}"


def _describe(
    sw_levels: Sequence[SweepLevel],
    band: CurveCrossing | None,
    one: CurveCrossing | None,
    margin: float,
    left_out: Sequence[str],
) -> str:
    if not sw_levels:
        return "no levels"
    if band is None or one is None:
        return "fewer than two levels could be fitted (the others not delivered, invalid or not comparable)"
    text = (
        f"from the fitted curve, ngram's gain stops clearing the band (+{margin:.0%}) {band.text}; "
        f"it stops being above 1 {one.text}"
    )
    if left_out:
        text += f"; left out of the fit (not delivered or not judged): {', '.join(left_out)}"
    return text


def sweeps(a: Analysis, reference: str = "baseline", candidate: str = "ngram") -> list[WorkloadSweep]:
    """One sweep per workload that has at least two load levels on one axis (open loop or closed loop: rates are
    preferred when a run has both) compared between ``reference`` and ``candidate``, ordered by offered load."""
    out: list[WorkloadSweep] = []
    fraction = a.profile.slo_fraction
    probes = a.contents.events_of(PeakProbeEvent)
    peaks = {(e.workload, e.arm): float(e.peak_rps) for e in probes if not math.isnan(e.peak_rps)}
    comps = {(c.workload, c.load): c for c in a.comparisons if (c.arm_a, c.arm_b) == (reference, candidate)}
    for workload, loads in a.loads.items():
        axis = [x for x in loads if x.open_loop] or [x for x in loads if not x.open_loop]
        if len(axis) < 2:
            continue
        levels = []
        for load in sorted(axis, key=lambda x: x.offered):
            c = comps.get((workload, load.label))
            if c is None:
                continue
            sb = a.summaries[(workload, load.label, candidate)]
            mal = sb.acceptance.get("mean_acceptance_length", math.nan)
            levels.append(
                SweepLevel(
                    workload=workload,
                    load=load.label,
                    offered=load.offered,
                    open_loop=load.open_loop,
                    speedup=c.speedup,
                    speed_verdict=c.speed.verdict,
                    quality_verdict=c.quality.verdict,
                    mean_acceptance_length=mal,
                    efficiency=ratio(c.speedup.estimate, mal),
                    arms={arm: _level_arm(a.summaries[(workload, load.label, arm)]) for arm in (reference, candidate)},
                )
            )
        if len(levels) < 2:
            continue  # not a sweep of this pair (e.g. an A/A run: baseline vs baseline-b at two loads)
        unit = "requests/s" if axis[0].open_loop else "clients"
        stops, hurts, _, dips, skipped = crossover(levels)
        band, one, fitted, left_out = fit_crossings(levels, a.rules.margin, unit)
        helps_up_to = math.nan if band is None or band.load == 0 else band.load
        out.append(
            WorkloadSweep(
                workload=workload,
                unit=unit,
                levels=levels,
                stops_helping=stops,
                starts_hurting=hurts,
                helps_up_to=helps_up_to,
                skipped=skipped,
                stops_clearing_band=band,
                stops_above_one=one,
                fitted_speedup=fitted,
                left_out=left_out,
                goodput_capacity=capacity(levels, (reference, candidate), fraction, "goodput"),
                latency_capacity=capacity(levels, (reference, candidate), fraction, "latency"),
                peak_rps={arm: p for (w, arm), p in peaks.items() if w == workload},
                crossover_text=_describe(levels, band, one, a.rules.margin, left_out),
                dips=dips,
            )
        )
    return out
