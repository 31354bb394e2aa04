"""A load sweep read off an analysed run: speedup against load, where speculation stops paying, and SLO capacity.

Every level of a sweep is a paired cell with its own verdicts (:mod:`specharness.analysis.comparison`); this module
only orders the levels by offered load and reads three things off them:

* **Crossover.** ngram *stops helping* after the heaviest level whose speed verdict is "helps": every heavier
  level's interval reached the no-difference band ("equivalent", "inconclusive" or "hurts"). It *starts to hurt* at
  the first level judged "hurts". Each is bracketed by two tested levels: the true crossover lies between them. A
  lighter level that did not help below a heavier one that did is a *dip*, listed, not taken for the crossover.
  Levels whose verdict is "invalid" or "not comparable" are listed and skipped. When the heaviest level helps there
  is no crossover within the tested range.
* **Efficiency.** speedup / mean acceptance length: the share of the acceptance that became speed (1: every
  accepted token saved a full decode step; below 1: verification and scheduling overhead ate part of it).
* **Capacity under SLOs.** Per arm, the *max sustainable load*: the highest tested load such that at it, and at
  every lighter tested load, at least ``slo_fraction`` of the requests were right and within every SLO
  (:mod:`specharness.analysis.slo`). Requiring every lighter level too keeps one lucky heavy level from counting.
  ``None`` means even the lightest level missed; ``inf`` means every level, all at once included, held. The ratio
  ngram / baseline is the capacity a planner gains (above 1) or loses. The same is computed with the latency SLOs
  alone (right or not), since a weak model can miss the goodput bar on correctness at any load.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from specharness.analysis.analyse import Analysis
from specharness.analysis.stats import RatioInterval
from specharness.analysis.summary import ArmSummary, ratio
from specharness.records import PeakProbeEvent

__all__ = ["Bracket", "Capacity", "LevelArm", "SweepLevel", "WorkloadSweep", "capacity", "crossover", "offered_text",
           "sweeps"]

HELPS, HURTS = "helps", "hurts"
UNJUDGED = ("invalid", "not comparable")


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
        arm=s.arm, requests=s.requests, tpot_p50_ms=s.tpot_ms.get("p50", math.nan),
        tpot_p95_ms=s.tpot_ms.get("p95", math.nan), ttft_p95_ms=s.ttft_ms.get("p95", math.nan),
        sent_rps=d.get("sent_rps", math.nan), completed_rps=d.get("completed_rps", s.requests_s),
        output_tok_s=s.output_tok_s, slo_goodput_rps=g.get("rps", math.nan),
        slo_goodput_fraction=g.get("fraction", math.nan), slo_latency_fraction=g.get("latency_fraction", math.nan),
        on_time_fraction=d.get("on_time_fraction", math.nan),
        delivered=bool(d["delivered"]) if math.isfinite(d.get("delivered", math.nan)) else None,
        harness_cpu_fraction=s.harness_cpu_fraction,
    )  # fmt: skip


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


def _describe(sw_levels: Sequence[SweepLevel], stops: Bracket | None, hurts: Bracket | None, unit: str,
              dips: Sequence[str] = ()) -> str:  # fmt: skip
    if not sw_levels:
        return "no levels"

    def at(b: Bracket) -> str:
        if b.below is None:
            return f"already at the lightest tested load ({offered_text(b.at_offered, unit)})"
        return f"between {offered_text(b.below_offered, unit)} and {offered_text(b.at_offered, unit)}"

    if not any(lv.speed_verdict not in UNJUDGED for lv in sw_levels):
        return "no level could be judged (every level invalid or not comparable)"
    if stops is None:
        text = "no crossover within the tested range: ngram helps at the heaviest judged level"
    else:
        text = f"ngram stops helping {at(stops)}"
    text += f"; starts to hurt {at(hurts)}" if hurts else "; it does not hurt at any tested level"
    if dips:
        text += f"; lighter levels where it did not help, with a heavier one helping again: {', '.join(dips)}"
    return text


def sweeps(a: Analysis, reference: str = "baseline", candidate: str = "ngram") -> list[WorkloadSweep]:
    """One sweep per workload that has at least two load levels on one axis (open loop or closed loop: rates are
    preferred when a run has both) compared between ``reference`` and ``candidate``, ordered by offered load."""
    out: list[WorkloadSweep] = []
    profile = a.manifest["config"]["profile"]
    fraction = float(profile.get("slo_fraction", 0.9))
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
            levels.append(SweepLevel(
                workload=workload, load=load.label, offered=load.offered, open_loop=load.open_loop,
                speedup=c.speedup, speed_verdict=c.speed.verdict, quality_verdict=c.quality.verdict,
                mean_acceptance_length=mal, efficiency=ratio(c.speedup.estimate, mal),
                arms={arm: _level_arm(a.summaries[(workload, load.label, arm)]) for arm in (reference, candidate)},
            ))  # fmt: skip
        if len(levels) < 2:
            continue  # not a sweep of this pair (e.g. an A/A run: baseline vs baseline-b at two loads)
        unit = "requests/s" if axis[0].open_loop else "clients"
        stops, hurts, helps_up_to, dips, skipped = crossover(levels)
        out.append(WorkloadSweep(
            workload=workload, unit=unit, levels=levels, stops_helping=stops, starts_hurting=hurts,
            helps_up_to=helps_up_to, skipped=skipped,
            goodput_capacity=capacity(levels, (reference, candidate), fraction, "goodput"),
            latency_capacity=capacity(levels, (reference, candidate), fraction, "latency"),
            peak_rps={arm: p for (w, arm), p in peaks.items() if w == workload},
            crossover_text=_describe(levels, stops, hurts, unit, dips), dips=dips,
        ))  # fmt: skip
    return out
