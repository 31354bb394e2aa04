"""The jobs' results brought back: each job's run folder unpacked into the matrix folder, its pair record made, and
the records filed into the machine series of the machine that ran them.

:func:`collect_cells` gives every job one :class:`Cell` (its last attempt, never a gap); :func:`file_cells` files the
release pairs meant for the series with :func:`~specharness.history.asv.pairs.refile_pairs`, the function
``specharness pair-record`` files with, one machine series at a time.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from specharness._errors import SpecharnessError
from specharness.history.asv.pairfile import PairRecord, record_from_run
from specharness.history.asv.pairs import refile_pairs
from specharness.matrix.plan import Job
from specharness.matrix.worker import JobOutcome

__all__ = ["Cell", "collect_cells", "file_cells", "unpack"]


@dataclass(frozen=True, slots=True)
class Cell:
    """One job of the matrix after the fan-out: its last attempt, where its run folder is now, its pair record (a
    release pair that ran), and what became of its filing."""

    job: Job
    outcome: JobOutcome
    attempts: tuple[JobOutcome, ...]
    job_dir: Path | None
    record: PairRecord | None = None
    filing: str = ""

    @property
    def run_dir(self) -> Path | None:
        return self.job_dir / "run" if self.job_dir is not None and (self.job_dir / "run").is_dir() else None


def unpack(outcome: JobOutcome, into: Path) -> Path | None:
    """Unpack an attempt's archive (its run folder and log) into ``into``; None when it sent none."""
    if not outcome.archive:
        return None
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(outcome.archive), mode="r:gz") as tar:
        tar.extractall(into, filter="data")
    return into


def collect_cells(jobs: Sequence[Job], outcomes: Sequence[JobOutcome], jobs_dir: Path) -> list[Cell]:
    """One cell per job, from its attempts: the last attempt's run folder unpacked into ``jobs_dir/<job>`` (an
    earlier attempt's into ``<job>.attempt<n>``), the pair record of a release pair whose run folder came back. A job
    with no attempt (it cannot happen: :func:`~specharness.matrix.fanout.fan_out` gives every job an outcome) is a
    failed cell saying so."""
    cells = []
    for job in jobs:
        tries = tuple(o for o in outcomes if o.job == job.key)
        if not tries:
            missing = JobOutcome(job.key, 0, "failed", "no attempt was recorded", "", "", "", "")
            cells.append(Cell(job, missing, (), None))
            continue
        for earlier in tries[:-1]:
            unpack(earlier, jobs_dir / f"{job.folder}.attempt{earlier.attempt}")
        last = tries[-1]
        job_dir = unpack(last, jobs_dir / job.folder)
        cell = Cell(job, last, tuple(replace(t, archive=b"") for t in tries), job_dir)
        last = replace(last, archive=b"")
        if job.kind == "release pair" and cell.run_dir is not None:
            try:
                cell = replace(cell, record=record_from_run(cell.run_dir))
            except SpecharnessError as exc:
                cell = replace(cell, filing=f"no pair record: {exc}")
        if cell.record is not None and cell.record.failed:  # the run went on without a release's engine
            down = "; ".join(f"{side} release's engine failed: {why}" for side, why in cell.record.failed.items())
            last = replace(last, reason=down)
        cells.append(replace(cell, outcome=last))
    return cells


def file_cells(cells: Sequence[Cell], results: Path, machine: str, may_file: bool, why_not: str) -> list[Cell]:
    """File the pair records of the done release pairs meant for the series (``Job.filed``) into
    ``results/<machine>`` (``machine``: the matrix file's, else the one that ran each), one call of
    :func:`~specharness.history.asv.pairs.refile_pairs` per machine series; every cell says what became of it."""
    out = list(cells)
    by_machine: dict[str, list[int]] = {}
    for i, cell in enumerate(out):
        if cell.filing:
            continue
        if not cell.job.filed:
            reason = (
                "not filed: a configuration pair has no pair record (ASV's ConfigurationPair files one)"
                if cell.job.kind == "configuration pair"
                else ""
                if cell.job.kind == "A/A"
                else "not filed: the series holds one configuration per pair (field 'file' names it)"
            )
            out[i] = replace(cell, filing=reason)
        elif cell.outcome.status != "done" or cell.record is None:
            out[i] = replace(cell, filing=f"not filed: the job {cell.outcome.status}")
        elif not may_file:
            out[i] = replace(cell, filing=f"not filed: {why_not}")
        else:
            by_machine.setdefault(machine or cell.outcome.machine, []).append(i)
    for name, indexes in by_machine.items():
        folder = results / name
        records = [r for i in indexes if (r := out[i].record) is not None]
        if not [p for p in folder.glob("*.json") if p.name != "machine.json"]:  # checked first: refile appends
            filing = f"not filed: {folder} has no ASV result file to take the machine from (asv run there once)"
            for i in indexes:
                out[i] = replace(out[i], filing=filing)
            continue
        try:
            refile_pairs(folder, records)
            filing = f"filed into {folder}"
        except SpecharnessError as exc:
            filing = f"not filed: {exc}"
        for i in indexes:
            out[i] = replace(out[i], filing=filing)
    return out
