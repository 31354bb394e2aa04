"""The interference check: did the jobs running beside it move the matrix's A/A pair beyond the machine's band?

:func:`aa_reading` reads the A/A pair's run (``baseline`` against its identical twin ``baseline-b``) into an
:class:`AAReading`: each cell's speedup with its interval and verdict, and the band the run judged against.
:func:`interference_verdict` says whether the matrix may file its results: only when every A/A cell's estimate lies
inside the band [1/(1+m), 1+m]; an A/A pair that failed or has no estimate cannot vouch for the others.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from specharness.analysis.verdict import DEFAULT_MARGIN, band_edges
from specharness.numbers import number
from specharness.reporting.report import load_report

__all__ = ["AACell", "AAReading", "Interference", "aa_reading", "interference_verdict"]

_TWINS = ("baseline", "baseline-b")


@dataclass(frozen=True, slots=True)
class AACell:
    """One cell of the A/A pair: the twin's speedup over the baseline (1 when nothing differs)."""

    cell: str  # "copy, c1"
    estimate: float
    low: float
    high: float
    confidence: float
    verdict: str

    def text(self) -> str:
        return f"{self.cell} {self.estimate:.3g} [{self.low:.3g}, {self.high:.3g}] ({self.verdict})"


@dataclass(frozen=True, slots=True)
class AAReading:
    """The A/A pair's reading in one run: its cells and the machine's band (margin m)."""

    job: str
    margin: float
    cells: tuple[AACell, ...]

    @property
    def band(self) -> tuple[float, float]:
        return band_edges(self.margin)

    @property
    def outside(self) -> tuple[AACell, ...]:
        """The cells whose estimate is missing or lies outside the band."""
        low, high = self.band
        return tuple(c for c in self.cells if not (math.isfinite(c.estimate) and low <= c.estimate <= high))

    def text(self) -> str:
        low, high = self.band
        cells = "; ".join(c.text() for c in self.cells) or "no cell"
        return f"{cells}; band [{low:.3g}, {high:.3g}]"


@dataclass(frozen=True, slots=True)
class Interference:
    """Whether the matrix may file its results, and the sentence that says why."""

    may_file: bool
    text: str


def aa_reading(run_dir: Path, job: str) -> AAReading:
    """The A/A reading of a run folder (its report, rebuilt from the journal when missing)."""
    report = load_report(run_dir)
    margin = number(report["manifest"]["config"]["profile"].get("equivalence_margin")) or DEFAULT_MARGIN
    cells = []
    for c in report.get("comparisons") or []:
        if (c["arm_a"], c["arm_b"]) != _TWINS:
            continue
        speed = c.get("speedup") or {}
        cells.append(
            AACell(
                cell=f"{c['workload']}, {c.get('load') or 'c' + str(c['clients'])}",
                estimate=number(speed.get("estimate")),
                low=number(speed.get("low")),
                high=number(speed.get("high")),
                confidence=number(speed.get("confidence")),
                verdict=str((c.get("speed") or {}).get("verdict", "")),
            )
        )
    return AAReading(job, margin if math.isfinite(margin) else DEFAULT_MARGIN, tuple(cells))


def interference_verdict(concurrent: AAReading | None, why_none: str, jobs_at_once: int) -> Interference:
    """Whether the matrix may file: ``concurrent`` is the A/A pair's reading beside the other jobs (None when it has
    none: ``why_none`` says why); ``jobs_at_once`` the most jobs that ran at the same time."""
    if jobs_at_once <= 1:
        return Interference(True, "one job at a time: nothing ran beside another, no interference to check")
    if concurrent is None:
        return Interference(False, f"interference unchecked ({why_none}): not filed")
    if not concurrent.cells:
        return Interference(False, "the A/A pair has no cell to read: interference unknown, not filed")
    moved = concurrent.outside
    if moved:
        cells = "; ".join(c.text() for c in moved)
        low, high = concurrent.band
        return Interference(
            False,
            f"the concurrent jobs moved the A/A pair beyond the band [{low:.3g}, {high:.3g}] ({cells}): not filed",
        )
    return Interference(
        True, f"the A/A pair's estimate stayed within the band beside the other jobs: {concurrent.text()}"
    )
