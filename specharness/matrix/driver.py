"""A matrix run as a recipe: plan the jobs, join Ray, start a worker per slot, fan the jobs out, bring the results
back, check the A/A pair, file, write the summary.

:func:`run_matrix` is the whole run (``specharness matrix FILE``); :func:`plan_matrix` the jobs and, with Ray, the
slots, without running anything (``--plan``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import ray

from specharness.engines.releases import installed_release
from specharness.matrix.fanout import Slot, connect, fan_out, start_slots, stop_slots
from specharness.matrix.interference import AAReading, aa_reading, interference_verdict
from specharness.matrix.merge import Cell, collect_cells, file_cells
from specharness.matrix.pinning import SlotPlan, plan_slots
from specharness.matrix.plan import AA_ALONE_KEY, AA_KEY, Job, plan_jobs
from specharness.matrix.spec import MatrixSpec
from specharness.matrix.summary import MatrixRun, write_summary
from specharness.matrix.worker import JobOutcome

__all__ = ["MatrixPlan", "most_at_once", "plan_matrix", "run_matrix"]


@dataclass(frozen=True, slots=True)
class MatrixPlan:
    """The jobs of a matrix and the slots they would run on."""

    jobs: tuple[Job, ...]
    slots: tuple[SlotPlan, ...]


def _own_release() -> str:
    release = installed_release()
    return release.tag if release is not None else "harness"


def plan_matrix(spec: MatrixSpec, address: str = "") -> MatrixPlan:
    """The jobs (checked) and the slots of the cluster (Ray joined or started, then let go if this call started
    it)."""
    jobs = plan_jobs(spec, _own_release())
    started = connect(address or spec.address)
    try:
        return MatrixPlan(jobs, tuple(plan_slots(ray.nodes(), spec.cores_per_job, len(jobs))))
    finally:
        if started:
            ray.shutdown()


def most_at_once(outcomes: Sequence[JobOutcome]) -> int:
    """The most attempts that ran at the same time."""
    edges = sorted([(o.started_unix_s, 1) for o in outcomes] + [(o.ended_unix_s, -1) for o in outcomes])
    best = now = 0
    for _, step in edges:
        now += step
        best = max(best, now)
    return best


def _reading(cells: Sequence[Cell], key: str) -> tuple[AAReading | None, str]:
    cell = next((c for c in cells if c.job.key == key), None)
    if cell is None:
        return None, 'the matrix file sets aa = "off"'
    if cell.outcome.status != "done" or cell.run_dir is None:
        return None, f"the A/A pair {cell.outcome.status}: {cell.outcome.reason or 'no run folder came back'}"
    return aa_reading(cell.run_dir, key), ""


def run_matrix(
    spec: MatrixSpec,
    out: Path,
    *,
    address: str = "",
    command: Sequence[str] = (),
    say: Callable[[str], None] = lambda _: None,
) -> MatrixRun:
    """Run every job of ``spec`` on Ray (``address``, else the file's, else Ray started here) and write the results
    into ``out`` (``jobs/<job>/`` each: its run folder ``run/`` and its log); ``command`` replaces ``specharness``
    for the jobs (a stand-in, in unit tests only)."""
    t0 = time.time()  # the matrix's wall time: Ray's start and the workers' included
    jobs = plan_jobs(spec, _own_release())
    out.mkdir(parents=True, exist_ok=True)
    started_ray = connect(address or spec.address)
    scratch = os.path.join(tempfile.gettempdir(), f"specharness-matrix-{os.getpid()}-{int(time.time())}")
    options: dict[str, object] = {
        "command": tuple(command),
        "machine": spec.machine,
        "shared_caches": spec.shared_caches,
    }
    slots: list[Slot] = []
    try:
        slots = start_slots(plan_slots(ray.nodes(), spec.cores_per_job, len(jobs)), scratch, **options)
        for slot in slots:
            say(f"slot {slot.plan.key}: {slot.pinning}")

        def fan(some: list[Job], on: list[Slot]) -> list[JobOutcome]:
            return fan_out(some, on, timeout_s=spec.job_timeout_s, scratch=scratch, worker_options=options, say=say)

        alone = [j for j in jobs if j.alone]  # the A/A reading without the others, before them
        outcomes = fan(alone, slots[:1]) if alone else []
        outcomes += fan([j for j in jobs if not j.alone], slots)
    finally:
        stop_slots(slots)
        if started_ray:
            ray.shutdown()
        shutil.rmtree(scratch, ignore_errors=True)  # this host's job folders (a lost worker leaves its own)
    wall_s = time.time() - t0
    cells = collect_cells(jobs, outcomes, out / "jobs")
    concurrent, why_none = _reading(cells, AA_KEY)
    alone_reading = _reading(cells, AA_ALONE_KEY)[0] if spec.aa == "both" else None
    at_once = most_at_once([o for o in outcomes if not any(j.alone and j.key == o.job for j in jobs)])
    verdict = interference_verdict(concurrent, why_none, at_once)
    cells = file_cells(cells, spec.results, spec.machine, verdict.may_file, verdict.text)
    result = MatrixRun(
        source=str(spec.source),
        cells=tuple(cells),
        aa_concurrent=concurrent,
        aa_alone=alone_reading,
        interference=verdict,
        slots=tuple(s.pinning for s in slots),
        wall_s=wall_s,
        jobs_wall_s=sum(c.outcome.wall_s for c in cells if c.outcome.ended_unix_s),
    )
    write_summary(result, out)
    return result
