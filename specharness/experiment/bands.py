"""The no-difference band each kind of machine uses unless a run declares its own, set from that machine's A/A.

Two identical engines differ by a persistent engine-instance offset that no interval from one run can see; the band
is where a speedup counts as "no practical difference". Each entry names the A/A campaign it came from; the rule
(cover 95% of the instance offsets the A/A shows beyond its cells' own noise, at least 5%) is
:func:`specharness.reporting.aa_scorecard.suggest_margin`; a band is only ever widened from that, never narrowed
below what a campaign's false-verdict count supports.
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
    "cpu": Band(0.10, "2-core CPU A/A, vLLM CPU 0.32.0, 40 cells in 5 runs (2026-12-04, reports/cpu-aa/20261204): 0 "
                "false verdicts, points 0.92-1.05, offsets between runs within their noise; kept at 10% since 5 engine "
                "pairs cannot rule out offsets of a few percent"),
    "gpu": Band(0.10, "H200 A/A, vLLM 0.26.0, 18 cells (2026-12-04, reports/gpu-h200-vllm0.26.0/20261204): 0 false "
                "verdicts; point spread 0.91-1.18 all within the cells' own noise (offset spread 0), so the band stays "
                "at 10% and the H200 needs more blocks (12 decided a known 0.80 effect, 4 did not)"),
}


def band_for(hardware: dict[str, Any]) -> Band:
    """The band for a run's hardware record (``gpus`` non-empty: the GPU band)."""
    return BANDS["gpu"] if hardware.get("gpus") else BANDS["cpu"]
