"""A forest plot as inline SVG (no scripts): one row per ratio, its 99% interval as a line and its estimate as a dot,
on a log axis with 1 and the ±rule (×1/factor, ×factor) drawn; coloured by the paired rule's verdict."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

from specharness.analysis.verdict import RELEASE_FACTOR
from specharness.reporting.convention import ratio_text

__all__ = ["ForestRow", "forest_svg"]

COLOURS = {"regressed": "#c0392b", "improved": "#1e8449", "unchanged": "#34495e"}
TICKS = (0.25, 0.5, 0.67, 0.8, 0.9, 0.95, 1.0, 1.05, 1.1, 1.25, 1.5, 2.0, 4.0)
LABEL_W, PLOT_W, ROW_H, TOP, BOTTOM = 330, 520, 15, 34, 36


@dataclass(frozen=True, slots=True)
class ForestRow:
    """One ratio of the plot: its label, estimate and interval, and the verdict that colours it."""

    label: str
    estimate: float
    low: float
    high: float
    verdict: str


def _range(rows: list[ForestRow], factor: float) -> tuple[float, float]:
    lows = [r.low for r in rows if r.low > 0] + [1 / (factor * 1.03)]
    highs = [r.high for r in rows if r.high > 0] + [factor * 1.03]
    lo, hi = math.log(min(lows)), math.log(max(highs))
    pad = (hi - lo) * 0.04
    return lo - pad, hi + pad


def forest_svg(rows: list[ForestRow], title: str, factor: float = RELEASE_FACTOR) -> str:
    """The plot of ``rows`` (those with a finite interval), titled; ``""`` when there is none to draw."""
    rows = [r for r in rows if all(math.isfinite(x) and x > 0 for x in (r.estimate, r.low, r.high))]
    if not rows:
        return ""
    lo, hi = _range(rows, factor)
    height = TOP + ROW_H * len(rows) + BOTTOM

    def x(v: float) -> float:
        return LABEL_W + (math.log(v) - lo) / (hi - lo) * PLOT_W

    bottom = TOP + ROW_H * len(rows)
    parts = [
        f"<svg class='forest' xmlns='http://www.w3.org/2000/svg' width='{LABEL_W + PLOT_W + 20}' height='{height}' "
        f"role='img' aria-label='{html.escape(title)}'>",
        f"<text x='4' y='16' font-size='13' font-weight='bold'>{html.escape(title)}</text>",
        f"<rect class='rule' x='{x(1 / factor):.1f}' y='{TOP - 4}' width='{x(factor) - x(1 / factor):.1f}' "
        f"height='{bottom - TOP + 8}' fill='#f4e3a1' opacity='0.6'/>",
        f"<line x1='{x(1.0):.1f}' x2='{x(1.0):.1f}' y1='{TOP - 6}' y2='{bottom + 4}' stroke='#555'/>",
    ]
    placed: list[float] = []
    for tick in sorted(TICKS, key=lambda t: (t != 1.0, abs(math.log(t)))):  # 1 first, then outwards
        if not lo <= math.log(tick) <= hi or any(abs(x(tick) - p) < 30 for p in placed):
            continue  # off the axis, or too close to a label already drawn
        placed.append(x(tick))
        parts.append(
            f"<line x1='{x(tick):.1f}' x2='{x(tick):.1f}' y1='{bottom + 4}' y2='{bottom + 9}' stroke='#555'/>"
            f"<text x='{x(tick):.1f}' y='{bottom + 21}' font-size='10' text-anchor='middle'>{tick:g}</text>"
        )
    parts.append(
        f"<text x='{LABEL_W + PLOT_W / 2:.0f}' y='{height - 2}' font-size='10' text-anchor='middle'>B over A (log "
        f"axis; above 1 B slower or worse); shaded: within ×{factor:g}, never called a change</text>"
    )
    for i, r in enumerate(rows):
        y = TOP + ROW_H * i + ROW_H / 2
        colour = COLOURS.get(r.verdict, COLOURS["unchanged"])
        tip = html.escape(f"{r.label}: {ratio_text(r.estimate, r.low, r.high)} (99%), {r.verdict}")
        parts.append(
            f"<g class='row {html.escape(r.verdict)}'><title>{tip}</title>"
            f"<text x='{LABEL_W - 6}' y='{y + 4:.1f}' font-size='10.5' text-anchor='end'>{html.escape(r.label)}</text>"
            f"<line x1='{x(r.low):.1f}' x2='{x(r.high):.1f}' y1='{y:.1f}' y2='{y:.1f}' stroke='{colour}' "
            f"stroke-width='2'/><circle cx='{x(r.estimate):.1f}' cy='{y:.1f}' r='3.2' fill='{colour}'/></g>"
        )
    parts.append("</svg>")
    return "".join(parts)
