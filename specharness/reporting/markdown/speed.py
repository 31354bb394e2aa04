"""report.md's speed table: per comparison the same-work speedup with its interval, blocks and width, the order
effect, how the pairs split, the identical-only and cases-resampled intervals, and the engine-instance offset."""

from __future__ import annotations

import math

from specharness.analysis.analyse import Analysis
from specharness.analysis.comparison import PairedComparison
from specharness.analysis.comparison.speed import CASE_INTERVAL_MIN_CASES, INSTANCES_SOURCE
from specharness.reporting.answer import load_text
from specharness.reporting.markdown.cells import fmt as _f
from specharness.reporting.markdown.cells import interval as _interval
from specharness.reporting.markdown.cells import pct as _pct

__all__ = ["speed_lines"]


def _order(c: PairedComparison) -> str:
    r = c.speedup
    if not math.isfinite(r.order_effect):
        return "—"
    return f"{_f(r.order_effect, 3)} [{_f(r.order_effect_low, 3)}, {_f(r.order_effect_high, 3)}]"


def speed_lines(a: Analysis) -> list[str]:
    """The Speed table and the engine-instance offset its intervals carry."""
    lines = [
        "## Speed: time for the same work",
        "",
        "| workload | load | comparison | speedup [CI] | blocks (df) | CI width | order effect [CI] | "
        "pairs | in estimate (censored) | short prefix | covered tokens | identical | identical-only speedup [CI] | "
        "cut at cap: time share, speedup without [CI] | failed (baseline time) | history diverged | "
        "these prompts alone [CI] | steady throughput ratio [CI] | per-block speedups |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in a.comparisons:
        n = c.pair_counts
        w = c.work
        if w is None:  # no work recorded
            work = f"{n.same_work} (0) | — | — | — | — | — | {n.failed} | {n.history_diverged} | — "
        elif not a.rules.greedy:  # sampled: time per output token, pair by pair
            work = (
                f"{n.in_estimate} ({n.censored}) | — | {_pct(w.covered_token_share)} | "
                f"{_pct(w.identical_share)} | — | {n.divergent} pairs, not timed | {n.failed} "
                f"({_pct(w.excluded_time_share)}) | "
                f"{n.history_diverged} | — "
            )
        else:
            over = (
                _interval(w.these_prompts) if w.population else f"— ({w.cases} cases, needs {CASE_INTERVAL_MIN_CASES})"
            )
            work = (
                f"{n.in_estimate} ({n.censored}) | {n.short_prefix} | {_pct(w.covered_token_share)} | "
                f"{_pct(w.identical_share)} | {_interval(w.identical)} | {_pct(w.capped_time_share)}, "
                f"{_interval(w.without_capped)} | {n.failed} ({_pct(w.excluded_time_share)}) | "
                f"{n.history_diverged} | {over} "
            )
        lines.append(
            f"| {c.workload} | {load_text(c.load)} | {c.arm_b} vs {c.arm_a} | {_interval(c.speedup)} | {c.speedup.blocks} "
            f"({c.speedup.df}) | {_f(c.speedup.width, 3)} | {_order(c)} | {n.pairs} | {work}| "
            f"{_interval(c.throughput)} | "
            f"{', '.join(_f(v) for v in c.block_speedups)} |"
        )
    offsets = {(w.offset_sd, w.offset_source) for c in a.comparisons if (w := c.work) is not None}
    for sd, source in sorted(offsets):
        if source == INSTANCES_SOURCE:
            lines += ["", f"Every interval is over the run's {a.profile.instances} engine instances: {source}."]
            continue
        lines += [
            "",
            f"Every interval adds an engine-instance offset of sd {sd:.3f} (log scale, the 95% upper limit "
            f"the machine's A/A record allows: {source or 'none recorded'}).",
        ]
    return lines
