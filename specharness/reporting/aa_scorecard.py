"""The controls' scorecard over several runs: the A/A control (baseline vs an identical baseline-b) and the
known-effect control (baseline vs baseline-slow, whose every request is made a declared factor slower).

A/A cells are counted by outcome — equivalent (right), inconclusive (no decision), not comparable, and false verdicts
(helps or hurts, or quality fails, between identical engines) — with each cell's CI width. Known-effect cells count
detections ("hurts") against the stated power. The no-difference band a machine should use is derived from the
spread of its A/A point estimates beyond their own noise (:func:`suggest_margin`). Reads only ``report.json`` files (rebuilt from a journal when missing).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as sps

from specharness._errors import RunDirError
from specharness.experiment.machine_record import BAND_FLOOR, band_from_offset
from specharness.numbers import number
from specharness.reporting.report import load_report

__all__ = [
    "ControlCell",
    "ControlScore",
    "OffsetEvidence",
    "control_cell",
    "instance_offset_sd",
    "offset_evidence",
    "run_labels",
    "score_control_runs",
    "suggest_margin",
]


AA_TWIN = "baseline-b"
SLOW_TWIN = "baseline-slow"


@dataclass(frozen=True, slots=True)
class ControlCell:
    """One control comparison cell (baseline vs a twin)."""

    run: str
    workload: str
    clients: int
    twin: str
    estimate: float
    low: float
    high: float
    speed: str
    quality: str
    blocks: int
    df: int = 0
    confidence: float = 0.95
    offset_var: float = 0.0  # the offset variance the cell's interval already held (taken out again in se_log)
    t_df: float = math.nan  # the t degrees of freedom its interval used (its blocks' df when no offset was added)

    @property
    def se_log(self) -> float:
        """The standard error of the cell's log estimate from its blocks alone: from its own interval, degrees of
        freedom and level, less any engine-instance offset variance the interval held (no circular widening)."""
        df = self.t_df if math.isfinite(self.t_df) else self.df
        if not (self.low > 0 and math.isfinite(self.high) and df >= 1):
            return math.nan
        se = math.log(self.high / self.low) / 2 / float(sps.t.ppf(1 - (1 - self.confidence) / 2, df))
        return math.sqrt(max(se**2 - self.offset_var, 0.0))

    @property
    def width(self) -> float:
        return self.high / self.low if self.low > 0 and math.isfinite(self.high) else math.nan

    @property
    def false_verdict(self) -> bool:
        """For identical engines: a speed verdict of helps or hurts, or a quality verdict of fails."""
        return self.speed in ("helps", "hurts") or self.quality == "fails"


@dataclass(slots=True)
class ControlScore:
    cells: list[ControlCell] = field(default_factory=list)
    known_slowdown: float = math.nan

    @property
    def aa(self) -> list[ControlCell]:
        return [c for c in self.cells if c.twin == AA_TWIN]

    @property
    def known(self) -> list[ControlCell]:
        return [c for c in self.cells if c.twin == SLOW_TWIN]

    def count(self, verdict: str) -> int:
        return sum(c.speed == verdict for c in self.aa)

    @property
    def false_verdicts(self) -> int:
        return sum(c.false_verdict for c in self.aa)

    @property
    def detected(self) -> int:
        return sum(c.speed == "hurts" for c in self.known)

    def to_markdown(self) -> str:
        lines = [
            "| run | workload | clients | comparison | speedup [CI] | blocks | CI width | speed | quality |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for c in self.cells:
            lines.append(
                f"| {c.run} | {c.workload} | {c.clients} | {c.twin} vs baseline | {c.estimate:.3f} "
                f"[{c.low:.3f}, {c.high:.3f}] | {c.blocks} | {c.width:.3f} | {c.speed} | {c.quality} |"
            )
        aa = self.aa
        n = len(aa)
        widths = [c.width for c in aa if math.isfinite(c.width)]
        lines += [
            "",
            f"**A/A (identical engines), {n} cells:** equivalent {self.count('equivalent')}, inconclusive "
            f"{self.count('inconclusive')}, not comparable {self.count('not comparable')}, false verdicts "
            f"{self.false_verdicts} (helps {self.count('helps')}, hurts {self.count('hurts')}, quality fails "
            f"{sum(c.quality == 'fails' for c in aa)}); CI width (high/low) median "
            f"{np.median(widths) if widths else math.nan:.3f}, max {max(widths) if widths else math.nan:.3f}; "
            f"point estimates {min((c.estimate for c in aa), default=math.nan):.3f}–"
            f"{max((c.estimate for c in aa), default=math.nan):.3f}; instance-offset spread per cell (log sd, run "
            f"and cell offsets beyond the cells' own noise, {len({c.run for c in aa})} runs) "
            f"{instance_offset_sd(aa):.3f}; suggested "
            f"band ±{suggest_margin(aa):.0%} (covers 95% of such offsets, rounded up to 1%, at least 5%); "
            f"from the upper limit: {offset_evidence(aa).text()} (:func:`offset_evidence`: the speed interval "
            f"adds that offset variance and the band covers 95% of such offsets, at least ±{BAND_FLOOR:.0%}).",
        ]
        if self.known:
            k = len(self.known)
            by_clients = ", ".join(
                f"{sum(c.speed == 'hurts' for c in self.known if c.clients == n)} of "
                f"{sum(c.clients == n for c in self.known)} at {n} client{'s' if n > 1 else ''}"
                for n in sorted({c.clients for c in self.known})
            )
            covered = sum(c.low <= 1 / self.known_slowdown <= c.high for c in self.known)
            lines.append(
                f"**Known effect** (baseline-slow: every request's times {self.known_slowdown:.2f}× longer, a "
                f"true speedup of {1 / self.known_slowdown:.3f}), {k} cells: detected as hurts in "
                f"{self.detected} of {k} ({by_clients}); the interval holds the true value in {covered} of {k}; "
                f"other verdicts: {', '.join(sorted({c.speed for c in self.known if c.speed != 'hurts'})) or 'none'}."
            )
        return "\n".join(lines) + "\n"


def _by_run(cells: list[ControlCell]) -> dict[str, list[ControlCell]]:
    by_run: dict[str, list[ControlCell]] = {}
    for c in cells:
        if c.estimate > 0 and math.isfinite(c.se_log):
            by_run.setdefault(c.run, []).append(c)
    return by_run


@dataclass(frozen=True, slots=True)
class _MeanSquares:
    """The A/A record as a two-way layout: cells within runs. ``between`` (df ``runs - 1``) is ``cells`` times the
    variance of the runs' mean log estimates; ``within`` (df ``within_df``) the pooled variance of the cells' log
    estimates about their run's mean; ``noise`` the mean of the cells' own squared standard errors."""

    runs: int
    cells: float
    between: float
    within: float
    within_df: int
    noise: float

    @property
    def offset_var(self) -> float:
        """The per-cell offset variance (method of moments): a cell's estimate varies with the run's shared offset
        (sigma_run²), its own cell's offset (sigma_cell²) and its noise; E[between / cells] = sigma_run² +
        (sigma_cell² + noise) / cells and E[within] = sigma_cell² + noise, so sigma_run² + sigma_cell² =
        between / cells + (1 - 1 / cells) · within - noise."""
        return self.between / self.cells + (1.0 - 1.0 / self.cells) * self.within - self.noise

    def offset_var_upper(self, confidence: float) -> float:
        """The one-sided upper confidence limit of :attr:`offset_var` by the modified large-sample method (Graybill
        and Wang): each mean square's term grows by its chi-square factor H = df / chi²_{1-confidence}(df) - 1; the
        cells' noise is taken as known (its own estimation error is not added)."""

        def h(df: int) -> float:
            return df / float(sps.chi2.ppf(1.0 - confidence, df)) - 1.0 if df > 0 else 0.0

        terms = [
            (self.between / self.cells) * h(self.runs - 1),
            (1.0 - 1.0 / self.cells) * self.within * h(self.within_df),
        ]
        return self.offset_var + math.sqrt(sum(t * t for t in terms))

    def over_cells_var_upper(self, confidence: float) -> float:
        """The one-sided upper limit of the offset a run's mean over its cells carries, sigma_run² + sigma_cell² /
        cells (the cells share the run's offset and average their own): E[between / cells] = sigma_run² +
        (sigma_cell² + noise) / cells, so the estimate is (between - noise) / cells, and its limit grows the between
        term by its chi-square factor (the noise taken as known), at least 0."""
        df = self.runs - 1
        h = df / float(sps.chi2.ppf(1.0 - confidence, df)) - 1.0 if df > 0 else math.inf
        return max(0.0, (self.between * (1.0 + h) - self.noise) / self.cells)


def _mean_squares(cells: list[ControlCell]) -> _MeanSquares | None:
    by_run = _by_run(cells)
    if len(by_run) < 2:
        return None
    logs = [np.log([c.estimate for c in cs]) for cs in by_run.values()]
    per_run = float(len(logs) / sum(1.0 / len(x) for x in logs))  # harmonic: E[var(means)] holds mean(1 / n_r)
    within_df = sum(len(x) - 1 for x in logs)
    within = sum(float(np.sum((x - x.mean()) ** 2)) for x in logs) / within_df if within_df else 0.0
    return _MeanSquares(
        runs=len(by_run),
        cells=per_run,
        between=per_run * float(np.var([x.mean() for x in logs], ddof=1)),
        within=within,
        within_df=within_df,
        noise=float(np.mean([c.se_log**2 for cs in by_run.values() for c in cs])),
    )


def instance_offset_sd(cells: list[ControlCell]) -> float:
    """The spread of engine-instance offsets between identical engines as one cell sees it, on the log scale: the
    run's shared offset and its own cell's together (:attr:`_MeanSquares.offset_var`, at least 0). Needs 2 runs; the
    cells of one run share its engine pair, so one run is no evidence of offsets between engine pairs."""
    squares = _mean_squares(cells)
    return math.nan if squares is None else math.sqrt(max(0.0, squares.offset_var))


@dataclass(frozen=True, slots=True)
class OffsetEvidence:
    """What an A/A record says about engine-instance offsets: the spread's estimate and its upper confidence limit
    (log sd), from how many runs, and the band that follows (:func:`offset_evidence`)."""

    runs: int
    sd: float
    sd_upper: float
    confidence: float
    margin: float
    over_cells_sd_upper: float = math.nan  # the limit for a run's mean over its cells (sigma_run² + sigma_cell²/cells)
    cells_per_run: float = math.nan  # the record's cells per run (harmonic mean) that limit is for

    @property
    def var_upper(self) -> float:
        """The offset variance the speed interval adds (log scale)."""
        return self.sd_upper**2 if math.isfinite(self.sd_upper) else math.nan

    def text(self) -> str:
        return (
            f"engine-instance offset sd {self.sd:.3f} (log), {self.confidence:.0%} upper limit {self.sd_upper:.3f} "
            f"from {self.runs} A/A runs; band ±{self.margin:.0%}"
        )


def offset_evidence(cells: list[ControlCell], confidence: float = 0.95, floor: float = BAND_FLOOR) -> OffsetEvidence:
    """The per-cell offset spread (:func:`instance_offset_sd`) with its one-sided upper confidence limit, and the band.

    Offsets may differ by cell as well as by run (docs/method.md#bands-and-offset-allowances-per-machine-kind): the
    limit is that of sigma_run² + sigma_cell² from the record's mean squares, by the modified large-sample method,
    less the cells' own noise, at least 0. The speed interval adds that variance (the offset no run can see, at what
    the record cannot rule out). The band follows from the same limit: it covers 95% of such offsets,
    exp(1.96·tau_upper) - 1 rounded up to 1%, never under ``floor``; a record of few runs (a large upper limit) makes
    "equivalent" hard, as it should."""
    squares = _mean_squares(cells)
    if squares is None:
        return OffsetEvidence(len(_by_run(cells)), math.nan, math.nan, confidence, math.nan)
    sd_upper = math.sqrt(max(0.0, squares.offset_var_upper(confidence)))
    margin = band_from_offset(sd_upper, floor)
    over = math.sqrt(squares.over_cells_var_upper(confidence))
    return OffsetEvidence(
        squares.runs, math.sqrt(max(0.0, squares.offset_var)), sd_upper, confidence, margin, over, squares.cells
    )


def suggest_margin(cells: list[ControlCell]) -> float:
    """The band an A/A campaign supports: wide enough for 95% of engine-instance offsets (exp(1.96 tau) - 1, tau from
    :func:`instance_offset_sd`), rounded up to the next 1%, never under 5%. Noise inside a cell is what its interval
    is for; the band is for what no interval from one run can see."""
    tau = instance_offset_sd(cells)
    if not math.isfinite(tau):
        return math.nan
    return band_from_offset(tau, floor=0.05)


def run_labels(run_dirs: list[Path]) -> list[str]:
    """One label a run, the unit the offset's spread is estimated over: each folder's name, or its path where two
    runs share a name (run1 of two campaigns are two runs)."""
    names = [d.name for d in run_dirs]
    return names if len(set(names)) == len(names) else [str(d) for d in run_dirs]


def score_control_runs(run_dirs: list[Path], load: Callable[[Path], dict[str, Any]] = load_report) -> ControlScore:
    """Every control cell of the given runs; a run with neither control twin is an error."""
    score = ControlScore()
    for run_dir, label in zip(run_dirs, run_labels(run_dirs), strict=True):
        report: dict[str, Any] = load(run_dir)
        prof = report["manifest"]["config"]["profile"]
        arms = set(prof["arms"])
        if "baseline" not in arms or not ({AA_TWIN, SLOW_TWIN} & arms):
            raise RunDirError(
                f"{run_dir}: arms {sorted(arms)} hold no control pair; run it with --profile aa or control"
            )
        score.known_slowdown = float(prof.get("known_slowdown", math.nan))
        for c in report["comparisons"]:
            if c["arm_a"] != "baseline" or c["arm_b"] not in (AA_TWIN, SLOW_TWIN):
                continue
            score.cells.append(control_cell(label, c))
    return score


def control_cell(run: str, c: dict[str, Any]) -> ControlCell:
    """One control comparison of a ``report.json`` (its same-work speedup and verdicts) as a :class:`ControlCell`."""
    s = c["speedup"]
    return ControlCell(
        run=run,
        workload=c["workload"],
        clients=c["clients"],
        twin=c["arm_b"],
        estimate=number(s["estimate"]),
        low=number(s["low"]),
        high=number(s["high"]),
        speed=c["speed"]["verdict"],
        quality=c["quality"]["verdict"],
        blocks=int(s["blocks"]),
        df=int(s.get("df", 0)),
        confidence=float(s.get("confidence", 0.95)),
        offset_var=float(s.get("offset_var") or 0.0),
        t_df=number(s.get("t_df")),
    )
