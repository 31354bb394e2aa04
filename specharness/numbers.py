"""Numbers read from JSON and written for people: one owner for each rule (reading a JSON number, the site's
number format)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["fmt", "number"]


def number(value: Any) -> float:
    """A JSON number as a float; NaN for null (orjson writes NaN as null), a bool, or anything else."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def fmt(v: float) -> str:
    """Three significant digits, thousands without decimals; an em dash for a missing value."""
    if not math.isfinite(v):
        return "—"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"
