"""report.md's load-delivered table for open-loop runs: sent and completed rates, requests on time and late,
lateness, whether the load was delivered, and the harness's CPU share, per cell and arm."""

from __future__ import annotations

import math

from specharness.analysis.analyse import Analysis
from specharness.reporting.answer import load_text
from specharness.reporting.markdown.cells import fmt as _f
from specharness.reporting.markdown.cells import pct as _pct

__all__ = ["delivery_lines"]


def delivery_lines(a: Analysis) -> list[str]:
    """The Load delivered table, per cell and arm; nothing when no cell ran open loop."""
    rows = [(k, s) for k, s in a.summaries.items() if s.delivery]
    if not rows:
        return []
    prof = a.profile
    lines = [
        "## Load delivered (open loop)",
        "",
        f"Arrivals: gamma gaps of shape {prof.burstiness:g} (1 = Poisson), seed "
        f"{prof.arrival_seed}, the same schedule for both arms of a block; max concurrency "
        f"{prof.max_concurrency or 'none'}. A request is on time when sent within "
        f"{1000 * float(prof.late_tolerance_s):g} ms of its scheduled time; a cell is delivered "
        f"when at least {float(prof.min_on_time_fraction):.0%} are. Latency under SLOs counts from "
        "the scheduled send.",
        "",
        "| workload | load | arm | sent req/s | completed req/s | on time | worst cell on time | late | p95 / max "
        "lateness ms | delivered | harness CPU |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (workload, load, arm), s in rows:
        d = s.delivery
        lines.append(
            f"| {workload} | {load_text(load)} | {arm} | {_f(d.get('sent_rps'))} | {_f(d.get('completed_rps'))} | "
            f"{_pct(d.get('on_time_fraction', math.nan))} | {_pct(d.get('worst_cell_on_time_fraction', math.nan))} | "
            f"{d.get('late_requests', 0):.0f} | {_f(d.get('p95_lateness_ms'), 1)} / {_f(d.get('max_lateness_ms'), 1)} | "
            f"{_delivered_text(d.get('delivered', math.nan))} | {_pct(s.harness_cpu_fraction)} |"
        )
    return [*lines, ""]


def _delivered_text(flag: float) -> str:
    if not math.isfinite(flag):
        return "n/a (all at once: as fast as the client sends)"
    return "yes" if flag else "**NO: the load was not delivered**"
