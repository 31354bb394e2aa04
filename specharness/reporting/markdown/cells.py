"""How report.md writes a value in a table cell: a number, a share, a time, an interval, latency percentiles.

One owner for these formats; the section modules import them (as ``_f``, ``_pct``, ...).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

from specharness.analysis.stats import RatioInterval

__all__ = ["fmt", "interval", "pct", "pcts", "when"]


def fmt(value: float | None, digits: int = 2) -> str:
    """A number to ``digits`` decimals; an em dash when missing (None, NaN), *fail* when infinite."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float) and math.isinf(value):
        return "fail"
    return f"{value:.{digits}f}"


def pct(value: float) -> str:
    """A share as a whole percentage; an em dash when not finite."""
    return "—" if not math.isfinite(value) else f"{100 * value:.0f}%"


def when(ts: float | None) -> str:
    """A Unix time as a UTC date and time; an em dash when missing."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if ts else "—"


def interval(r: RatioInterval) -> str:
    """An estimate with its interval: ``estimate [low, high]``."""
    return f"{fmt(r.estimate)} [{fmt(r.low)}, {fmt(r.high)}]"


def pcts(d: dict[str, float], digits: int = 0) -> str:
    """p50/p95/p99 with the sample size and failures; *fail* where a percentile lands on a failed request."""

    def one(p: str) -> str:
        return "fail" if d.get(f"{p}_failed") else fmt(d[p], digits)

    failed = f", {d['failed']:.0f} failed" if d.get("failed") else ""
    return f"{one('p50')}/{one('p95')}/{one('p99')} (n={d.get('n', math.nan):.0f}{failed})"
