"""How the site's pages write a number: one owner for the format."""

from __future__ import annotations

import math

__all__ = ["fmt"]


def fmt(v: float) -> str:
    """Three significant digits, thousands without decimals; an em dash for a missing value."""
    if not math.isfinite(v):
        return "—"
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"
