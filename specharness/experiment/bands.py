"""The no-difference band each kind of machine uses unless a run declares its own, set from that machine's A/A.

Two identical engines differ by a persistent engine-instance offset that no interval from one run can see; the band
is where a speedup counts as "no practical difference". Each entry names the A/A campaign it came from; the rule
(95th percentile of |log A/A point estimate|, rounded up to 1%, at least 5%) is
:func:`specharness.reporting.aa_scorecard.suggest_margin`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["BANDS", "Band", "band_for"]


@dataclass(frozen=True, slots=True)
class Band:
    margin: float
    source: str


BANDS = {
    "cpu": Band(0.10, "2-core CPU A/A: 0.96-1.16 over 40 cells (reports/cpu-aa, 2026-12-03, earlier statistics)"),
    "gpu": Band(0.10, "not yet measured on this GPU: the CPU's band"),
}


def band_for(hardware: dict[str, Any]) -> Band:
    """The band for a run's hardware record (``gpus`` non-empty: the GPU band)."""
    return BANDS["gpu"] if hardware.get("gpus") else BANDS["cpu"]
