"""Numbers read from JSON and written for people: one owner for each rule."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["number"]


def number(value: Any) -> float:
    """A JSON number as a float; NaN for null (orjson writes NaN as null), a bool, or anything else."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
