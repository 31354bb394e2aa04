"""The one way a reader is told whether B is slower than A: B over A, above 1 B slower (or worse), with its paired
99% interval, 4 significant digits. report.md's pair lines, release-compare, the release pages and the site's
units all print a change through :func:`ratio_text`."""

from __future__ import annotations

import math

__all__ = ["CONVENTION", "ratio", "ratio_text"]

CONVENTION = "B over A, above 1 = B slower or worse, 99% paired interval"


def ratio(x: float) -> str:
    """A ratio to 4 significant digits (``—`` when it is not a number)."""
    return f"{x:.4g}" if math.isfinite(x) else "—"


def ratio_text(estimate: float, low: float, high: float) -> str:
    """``×0.9987 [0.9712, 1.027]``; the interval left out when it is not known."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"×{ratio(estimate)}"
    return f"×{ratio(estimate)} [{ratio(low)}, {ratio(high)}]"
