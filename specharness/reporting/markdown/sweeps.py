"""report.md's load sweeps: per workload the crossover, the level-by-level reading, the max sustainable loads
under the declared SLOs, and the table of speedup, latency and goodput against load."""

from __future__ import annotations

import math

from specharness.analysis.analyse import Analysis
from specharness.analysis.slo import slo_text
from specharness.analysis.sweep import Capacity, WorkloadSweep, offered_text
from specharness.reporting.answer import load_text
from specharness.reporting.markdown.cells import fmt as _f
from specharness.reporting.markdown.cells import interval as _interval
from specharness.reporting.markdown.cells import pct as _pct

__all__ = ["sweep_lines"]


def _capacity(c: Capacity, unit: str) -> str:
    def one(arm: str) -> str:
        v = c.max_load.get(arm)
        if v is None:
            return f"{arm}: below the lightest tested load"
        return f"{arm}: {'every tested load, all at once included' if math.isinf(v) else offered_text(v, unit)}"

    bound = ""
    if c.censored:
        n, b = c.max_load.get("ngram"), c.max_load.get("baseline")
        bound = "≥ " if (n is not None and math.isinf(n)) or b is None else "≤ "
    note = (
        (
            " (a bound: an arm that held every level counts as the heaviest finite rate, one that held none as half "
            "the lightest)"
        )
        if c.censored
        else ""
    )
    return f"{one('baseline')}; {one('ngram')}; ngram / baseline {bound}{_f(c.ratio)}{note}"


def _level_reading(sw: WorkloadSweep) -> str:
    """The level-by-level reading in one sentence (the heaviest level judged "helps", the first "hurts")."""
    if sw.stops_helping is None:
        text = "By level: the heaviest judged level helps"
    elif sw.stops_helping.below is None:
        text = "By level: no level helps"
    else:
        text = f"By level: the heaviest level judged *helps* is {offered_text(sw.stops_helping.below_offered, sw.unit)}"
    if sw.starts_hurting is not None:
        text += f", the first judged *hurts* {offered_text(sw.starts_hurting.at_offered, sw.unit)}"
    return text + "."


def sweep_lines(a: Analysis, found: list[WorkloadSweep]) -> list[str]:
    """The Load sweep section, one subsection per swept workload; nothing without sweeps."""
    if not found:
        return []
    slo = dict(a.profile.slo)
    frac = float(a.profile.slo_fraction)
    lines = [
        "## Load sweep: speedup against load",
        "",
        (
            f"SLOs per request: {slo_text(slo)} (from the scheduled send). SLO goodput counts requests that are "
            f"right (complete, rubric passed) and within every SLO; a load is sustained when at least {frac:.0%} "
            "of its requests are, and at every lighter level too."
            if slo
            else "No SLO declared: no sustainable load is read off (declare `slo` in the profile for one)."
        )
        + " Efficiency = speedup / mean acceptance length.",
        "",
    ]
    for sw in found:
        peaks = ", ".join(f"{arm} {v:.2f} req/s" for arm, v in sw.peak_rps.items())
        lines += [f"### {sw.workload}", ""]
        if peaks:
            lines += [f"Peak request rate probed (all requests at once): {peaks}.", ""]
        lines += [
            f"**Crossover:** {sw.crossover_text}.",
            "",
            "The crossover is read off one monotone (non-increasing) fit of log speedup against load over every "
            "delivered, judged level, each weighted by its interval, with 95% brackets from a parametric "
            f"bootstrap over the levels; the level-by-level verdicts are in the table. {_level_reading(sw)}",
            "",
        ]
        if slo:  # the capacities need an SLO: without one they would only count right answers
            lines += [
                f"**Max sustainable load (SLO goodput ≥ {frac:.0%}):** {_capacity(sw.goodput_capacity, sw.unit)}.",
                f"**Max load within the latency SLOs (right or not, ≥ {frac:.0%}):** "
                f"{_capacity(sw.latency_capacity, sw.unit)}.",
                "",
            ]
        if sw.skipped:
            lines += [f"Levels without a speed judgement (invalid or not comparable): {', '.join(sw.skipped)}.", ""]
        lines += [
            "| load | speedup [CI] | fitted | speed | quality | mean accept len | efficiency | TPOT p50/p95 ms "
            "base → ngram | TTFT p95 ms base → ngram | sent req/s | completed req/s base / ngram | "
            f"{'SLO goodput' if slo else 'right'} base / ngram | delivered |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        fitted = sw.fitted_speedup or [math.nan] * len(sw.levels)
        for lv, fit in zip(sw.levels, fitted, strict=True):
            b, n = lv.arms["baseline"], lv.arms["ngram"]
            delivered = (
                ("n/a" if lv.open_loop else "—") if lv.delivered is None else ("yes" if lv.delivered else "**no**")
            )
            fit_text = _f(fit) if math.isfinite(fit) else "left out"
            lines.append(
                f"| {load_text(lv.load)} | {_interval(lv.speedup)} | {fit_text} | **{lv.speed_verdict}** | {lv.quality_verdict} | "
                f"{_f(lv.mean_acceptance_length)} | {_f(lv.efficiency)} | {_f(b.tpot_p50_ms, 1)}/{_f(b.tpot_p95_ms, 1)} → "
                f"{_f(n.tpot_p50_ms, 1)}/{_f(n.tpot_p95_ms, 1)} | {_f(b.ttft_p95_ms, 0)} → {_f(n.ttft_p95_ms, 0)} | "
                f"{_f(b.sent_rps)} | {_f(b.completed_rps)} / {_f(n.completed_rps)} | "
                f"{_pct(b.slo_goodput_fraction)} / {_pct(n.slo_goodput_fraction)} | {delivered} |"
            )
        lines.append("")
    lines += [
        "Plots: `plots/sweep_speedup.png` (speedup against load with its CI and the band), "
        "`plots/sweep_latency_throughput.png` (each arm's TPOT p50 and p95 against delivered throughput).",
        "",
    ]
    return lines
