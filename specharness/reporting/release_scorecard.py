"""The release review's controls over several runs: a release against itself (A/A) and against itself slowed by a
known factor (the client-side hold of ``client_slowdown``), judged by the paired rule the release review uses.

Each run has a reference arm, its identical twin (``twin_of``, no slowdown) and twins slowed by known factors; the
arms are found from the run's declared specs (:func:`~specharness.experiment.design.control_pairs`). For every cell
and value (time for the same work, TPOT p50, …) the twin over the reference is judged by
:func:`~specharness.history.asv.pairs.pair_change` on its paired 99% interval (:mod:`specharness.analysis.changes`):
a change called between identical engines is a false verdict; a known slowdown called *regressed* is a detection.
The speed verdict of the same-work comparison (helps, hurts, equivalent, inconclusive) is counted beside it. The
smallest change a run can call at 80% power (:func:`~specharness.analysis.changes.detectable_ratio`, from each A/A
cell's standard error and degrees of freedom) is reported as the median over cells. The values over all of a run's
cells (:data:`~specharness.analysis.changes.ALL_CELLS`) are scored apart, one per run.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from specharness._errors import RunDirError
from specharness.analysis.changes import ALL_CELLS, detectable_ratio
from specharness.analysis.verdict import DEFAULT_MARGIN, RELEASE_FACTOR, pair_change
from specharness.experiment.design import Profile, control_pairs
from specharness.numbers import number
from specharness.reporting.aa_scorecard import ControlCell, control_cell, offset_evidence, run_labels
from specharness.reporting.report import load_report

__all__ = ["ReleaseControlCell", "ReleaseScorecard", "score_release_controls"]

POWER = 0.80


@dataclass(frozen=True, slots=True)
class ReleaseControlCell:
    """One value of one control pair in one cell: the twin over the reference with its 99% interval, the factor the
    twin was slowed by (1.0: the A/A twin), the paired rule's verdict and the same-work speed verdict."""

    run: str
    workload: str
    load: str
    metric: str
    slowdown: float
    estimate: float
    low: float
    high: float
    blocks: int
    verdict: str
    speed: str = ""
    se_log: float = math.nan  # the log estimate's standard error, as its interval used it
    t_df: float = math.nan

    @property
    def detectable(self) -> float:
        """The smallest ratio this cell would call at 80% power (:func:`detectable_ratio`)."""
        return detectable_ratio(self.se_log, self.t_df, POWER)

    @property
    def over_cells(self) -> bool:
        """Whether this is the value over all the run's cells rather than one cell's."""
        return self.workload == ALL_CELLS and self.load == ALL_CELLS


@dataclass(slots=True)
class ReleaseScorecard:
    cells: list[ReleaseControlCell] = field(default_factory=list)
    factor: float = RELEASE_FACTOR
    aa_speed: list[ControlCell] = field(default_factory=list)  # the A/A pairs' same-work comparisons (offsets)
    band: float = 0.0  # the runs' equivalence band (the widest declared)

    def of(self, metric: str, slowdown: float, over_cells: bool = False) -> list[ReleaseControlCell]:
        """One value of one control, per cell (or, ``over_cells``, the runs' values over all their cells)."""
        return [
            c
            for c in self.cells
            if c.metric == metric and math.isclose(c.slowdown, slowdown) and c.over_cells == over_cells
        ]

    @property
    def slowdowns(self) -> list[float]:
        return sorted({c.slowdown for c in self.cells if c.slowdown != 1.0})

    @property
    def runs(self) -> int:
        return len({c.run for c in self.cells})

    def _table(self, metrics: Sequence[str], over_cells: bool) -> list[str]:
        unit = "runs" if over_cells else "cells"
        lines = [
            f"| value | control | {unit} | regressed | improved | unchanged | median ratio | median 99% CI width | "
            "smallest change called at 80% power (median) | speed verdicts |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for metric in metrics:
            for slowdown in (1.0, *self.slowdowns):
                cells = self.of(metric, slowdown, over_cells)
                if not cells:
                    continue
                count = {v: sum(c.verdict == v for c in cells) for v in ("regressed", "improved", "unchanged")}
                widths = [c.high / c.low for c in cells if c.low > 0 and math.isfinite(c.high)]
                power = [c.detectable for c in cells if math.isfinite(c.detectable)]
                speeds = _counts(c.speed for c in cells if c.speed)
                label = "A/A (the release against itself)" if slowdown == 1.0 else f"known slowdown ×{slowdown:g}"
                lines.append(
                    f"| {metric} | {label} | {len(cells)} | {count['regressed']} | {count['improved']} | "
                    f"{count['unchanged']} | {_median([c.estimate for c in cells]):.3f} | {_median(widths):.3f} | "
                    f"{'×' + format(_median(power), '.3f') if slowdown == 1.0 and power else '—'} | {speeds or '—'} |"
                )
        return lines

    def to_markdown(self) -> str:
        metrics = sorted({c.metric for c in self.cells}, key=lambda m: (m != "time", m))
        lines = [
            f"Paired rule: a value changed when its 99% interval excludes 1 and its ratio lies beyond ×{self.factor:g}; "
            f"{self.runs} runs.",
            "",
            *self._table(metrics, over_cells=False),
        ]
        if any(c.over_cells for c in self.cells):
            lines += [
                "",
                "Over all of each run's cells (one value per run: each block's mean log ratio over the cells, the "
                "engine-instance offset allowance once):",
                "",
                *self._table(metrics, over_cells=True),
            ]
        aa_time = self.of("time", 1.0)
        if aa_time:
            equivalent = sum(c.speed == "equivalent" for c in aa_time)
            false = sum(c.speed in ("helps", "hurts") for c in aa_time)
            lines += [
                "",
                f"**A/A, time for the same work:** equivalent in {equivalent} of {len(aa_time)} cells "
                f"({equivalent / len(aa_time):.0%}), false speed verdicts {false} ({false / len(aa_time):.0%}); the "
                f"paired rule called {sum(c.verdict != 'unchanged' for c in aa_time)} changes.",
            ]
        if self.aa_speed:
            lines.append(
                f"**Engine-instance offset** between the reference and its identical twin, over {self.runs} runs: "
                f"{offset_evidence(self.aa_speed).text()} (the runs' intervals held the machine's recorded "
                f"allowance, sd {math.sqrt(max(c.offset_var for c in self.aa_speed)):.3f})."
            )
        for over_cells, unit in ((False, "cells"), (True, "runs, over all their cells")):
            for metric in ("time", "tpot_p50"):
                aa = self.of(metric, 1.0, over_cells)
                if over_cells and aa:
                    inside = sum(1 / (1 + self.band) <= c.low and c.high <= 1 + self.band for c in aa)
                    lines.append(
                        f"**A/A, {metric}, over all of each run's cells:** the 99% interval inside the ±{self.band:.0%} "
                        f"band in {inside} of {len(aa)} runs; the paired rule called "
                        f"{sum(c.verdict != 'unchanged' for c in aa)} changes."
                    )
                for slowdown in self.slowdowns:
                    cells = self.of(metric, slowdown, over_cells)
                    if cells:
                        hit = sum(c.verdict == "regressed" for c in cells)
                        lines.append(
                            f"**Known slowdown ×{slowdown:g}, {metric}:** regressed in {hit} of {len(cells)} {unit} "
                            f"({hit / len(cells):.0%}); the interval holds ×{slowdown:g} in "
                            f"{sum(c.low <= slowdown <= c.high for c in cells)} of {len(cells)}."
                        )
        return "\n".join(lines) + "\n"


def _counts(words: Any) -> str:
    found: dict[str, int] = {}
    for w in words:
        found[w] = found.get(w, 0) + 1
    return ", ".join(f"{w} {n}" for w, n in sorted(found.items()))


def _median(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.median(finite)) if finite else math.nan


def score_release_controls(
    run_dirs: list[Path], factor: float = RELEASE_FACTOR, load: Callable[[Path], dict[str, Any]] = load_report
) -> ReleaseScorecard:
    """Every control value of the given runs (module docstring); a run without a declared twin is an error."""
    card = ReleaseScorecard(factor=factor)
    for run_dir, label in zip(run_dirs, run_labels(run_dirs), strict=True):
        report: dict[str, Any] = load(run_dir)
        profile = Profile.from_dict(report["manifest"]["config"]["profile"])
        card.band = max(card.band, profile.equivalence_margin or DEFAULT_MARGIN)
        aa, effect = control_pairs(profile)
        if not (aa or effect) or not report.get("changes"):
            raise RunDirError(f"{run_dir}: no declared twin (twin_of) among its arms; run an arms file with controls")
        slowdown = {a.name: a.client_slowdown for a in profile.arm_specs}
        speed = {
            (c["workload"], c["load"], c["arm_a"], c["arm_b"]): c["speed"]["verdict"] for c in report["comparisons"]
        }
        card.aa_speed += [control_cell(label, c) for c in report["comparisons"] if (c["arm_a"], c["arm_b"]) in aa]
        for ch in report["changes"]:
            pair = (ch["arm_a"], ch["arm_b"])
            if pair not in aa | effect:
                continue
            card.cells.append(
                ReleaseControlCell(
                    run=label,
                    workload=ch["workload"],
                    load=ch["load"],
                    metric=ch["metric"],
                    slowdown=slowdown.get(ch["arm_b"], 1.0),
                    estimate=number(ch["estimate"]),
                    low=number(ch["low"]),
                    high=number(ch["high"]),
                    blocks=int(ch["blocks"]),
                    verdict=pair_change(number(ch["estimate"]), number(ch["low"]), number(ch["high"]), factor),
                    speed=speed.get((ch["workload"], ch["load"], *pair), "") if ch["metric"] == "time" else "",
                    se_log=number(ch.get("se_log")),
                    t_df=number(ch.get("t_df")),
                )
            )
    return card
