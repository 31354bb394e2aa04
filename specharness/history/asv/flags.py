"""The one list of what a release pair changed: every view (``asv compare``, the regressions page, release-compare,
the release page, the release's own page) flags exactly these values, named as ``asv compare`` names them.

A value is flagged when the paired rule (:func:`~specharness.analysis.verdict.pair_change`) calls it regressed or
improved; a failed arm counts as a change: its ``engine_failed`` value (0 on the side that ran, 1 on the side that
failed) is flagged in every cell the arm measured, as ASV marks it ``+``. A value without an interval is not tested
(:func:`pair_value_verdict` says "not tested") and is left out of the review views.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specharness.analysis.verdict import RELEASE_FACTOR, pair_change
from specharness.history.asv.pairfile import PairRecord, PairValue
from specharness.reporting.convention import ratio_text

__all__ = ["FailedArm", "Flag", "failed_arms", "flag_summary", "pair_flags", "pair_value_verdict", "with_failed_values"]


@dataclass(frozen=True, slots=True)
class Flag:
    """One flagged value of a pair record: the later release over the earlier one."""

    benchmark: str  # ASV's benchmark name, e.g. bench_release.ReleasePair.track_time
    params: tuple[str, ...]  # ASV's parameter strings (repr of each)
    verdict: str  # regressed or improved (engine_failed 0 -> 1 is regressed)
    metric: str
    cell: str  # "copy, 1 client(s)" or "all cells"
    arm: str
    estimate: float = math.nan
    low: float = math.nan
    high: float = math.nan

    @property
    def name(self) -> str:
        """The value's name in ``asv compare`` and on the regressions page: ``bench(params)``."""
        return f"{self.benchmark}({', '.join(self.params)})"


@dataclass(frozen=True, slots=True)
class FailedArm:
    """An arm whose engine did not start in a pair run: which release, its reason, the cells it would have measured."""

    arm: str
    tag: str
    side: str  # previous or current
    reason: str
    cells: int


def with_failed_values(record: PairRecord) -> list[PairValue]:
    """The record's values plus one ``engine_failed`` value per cell and arm it measured."""
    failed_by_cell = {(v.workload, v.clients, v.arm): v.failed for v in record.values if not v.overall}
    extra = [PairValue(w, c, a, "engine_failed", failed=f) for (w, c, a), f in sorted(failed_by_cell.items())]
    return [*record.values, *extra]


def pair_value_verdict(value: PairValue, factor: float = RELEASE_FACTOR) -> str:
    """The verdict of one value of the record: regressed / improved / unchanged / not tested (no interval), a failed
    side's values *failed*, and ``engine_failed`` regressed (the later release failed), improved (the earlier one)."""
    if value.metric == "engine_failed":
        return {"current": "regressed", "previous": "improved"}.get(value.failed, "unchanged")
    if value.failed:
        return "failed"
    return pair_change(value.estimate, value.low, value.high, factor)


def pair_flags(record: PairRecord, factor: float = RELEASE_FACTOR) -> tuple[Flag, ...]:
    """Every value of ``record`` the paired rule flags, failed arms as their ``engine_failed`` values."""
    out = []
    for v in with_failed_values(record):
        verdict = pair_value_verdict(v, factor)
        if verdict in ("regressed", "improved"):
            out.append(
                Flag(v.track, v.params(record.pair), verdict, v.metric, v.cell, v.arm, v.estimate, v.low, v.high)
            )
    return tuple(out)


def failed_arms(record: PairRecord) -> list[FailedArm]:
    """The arms whose engine failed in the pair run, each with its release's reason."""
    out = []
    for side in ("previous", "current"):
        if side not in record.failed:
            continue
        arms = sorted({v.arm for v in record.values if v.failed in (side, "both") and not v.overall})
        tag = record.previous if side == "previous" else record.current
        for arm in arms or ["(every arm)"]:
            cells = sum(1 for v in with_failed_values(record) if v.metric == "engine_failed" and v.arm == arm)
            out.append(FailedArm(arm, tag, side, record.failed[side], cells))
    return out


def flag_summary(record: PairRecord, factor: float = RELEASE_FACTOR) -> tuple[int, str]:
    """(how many changes, the changes in words): each failed arm counts once (its ``engine_failed`` in every cell it
    measured), then each flagged value as B over A with its 99% interval, 4 significant digits."""
    items = [
        f"{f.arm} of {f.tag} failed to start (engine_failed "
        + ("0 → 1" if f.side == "current" else f"1 → 0: it starts in {record.current}")
        + f" in its {f.cells} cells)"
        for f in failed_arms(record)
    ]
    items += [
        f"{f.metric} {f.cell} {f.arm} {f.verdict} {ratio_text(f.estimate, f.low, f.high)}"
        for f in pair_flags(record, factor)
        if f.metric != "engine_failed"
    ]
    return len(items), "; ".join(items) or "none"
