"""What a matrix run writes: ``matrix.jsonl`` (every attempt of every job, one JSON line each) and ``matrix.md`` (the
answer first: every cell's status, where it ran and what became of its filing, then the interference check and the
wall time against the jobs' own).

:func:`write_summary` writes both; :data:`MATRIX_SCHEMA` versions the JSONL lines (1: the first).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from specharness.matrix.interference import AAReading, Interference
from specharness.matrix.merge import Cell

__all__ = ["MATRIX_JSONL", "MATRIX_MD", "MATRIX_SCHEMA", "MatrixRun", "write_summary"]

MATRIX_SCHEMA = 1
MATRIX_JSONL = "matrix.jsonl"
MATRIX_MD = "matrix.md"


@dataclass(frozen=True, slots=True)
class MatrixRun:
    """A matrix run's outcome: its cells, the A/A readings (beside the others, and alone when asked), the
    interference verdict, and its times."""

    source: str
    cells: tuple[Cell, ...]
    aa_concurrent: AAReading | None
    aa_alone: AAReading | None
    interference: Interference
    slots: tuple[str, ...]  # each slot's pinning in words
    wall_s: float
    jobs_wall_s: float  # the sum of the last attempts' wall times: the jobs run one after another, at best

    @property
    def complete(self) -> bool:
        """Every cell done, and every one meant for the series filed."""
        return all(c.outcome.status == "done" and (not c.job.filed or c.filing.startswith("filed")) for c in self.cells)


def _line(cell: Cell) -> dict[str, object]:
    return {
        "schema": MATRIX_SCHEMA,
        "entry": "cell",
        "job": cell.job.key,
        "configuration": cell.job.configuration,
        "pair_kind": cell.job.kind,
        "releases": list(cell.job.releases),
        "status": cell.outcome.status,
        "reason": cell.outcome.reason,
        "attempts": [
            {k: v for k, v in asdict(a).items() if k not in ("archive", "output_tail")} for a in cell.attempts
        ],
        "run_dir": str(cell.run_dir or ""),
        "filing": cell.filing,
    }


def _markdown(run: MatrixRun) -> str:
    rows = [
        "| job | pair | status | ran on | wall s | attempts | run folder | filing |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in run.cells:
        status = c.outcome.status + (f": {c.outcome.reason}" if c.outcome.reason else "")
        ran = f"{c.outcome.machine or c.outcome.node_ip} ({c.outcome.slot})" if c.outcome.slot else "—"
        wall = f"{c.outcome.wall_s:.0f}" if c.outcome.ended_unix_s else "—"
        row = [c.job.key, c.job.kind, status, ran, wall, str(len(c.attempts)), str(c.run_dir or "—"), c.filing or "—"]
        rows.append("| " + " | ".join(x.replace("|", "/") for x in row) + " |")
    aa = [f"- **Interference**: {run.interference.text}."]
    if run.aa_concurrent is not None:
        aa.append(f"- A/A pair beside the other jobs: {run.aa_concurrent.text()}.")
    if run.aa_alone is not None:
        aa.append(f"- A/A pair alone, before them: {run.aa_alone.text()}.")
    times = (
        f"- **Wall time**: {run.wall_s:.0f} s for {len(run.cells)} jobs on {len(run.slots)} slot(s); the jobs' own "
        f"wall times add up to {run.jobs_wall_s:.0f} s."
    )
    slots = "\n".join(f"  - {s}" for s in run.slots)
    return "\n".join(
        [f"# Matrix: {run.source}", "", *rows, "", *aa, times, "- Slots:", slots, ""],
    )


def write_summary(run: MatrixRun, out: Path) -> None:
    """``matrix.jsonl`` and ``matrix.md`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(_line(c)) for c in run.cells]
    for name, reading in (("concurrent", run.aa_concurrent), ("alone", run.aa_alone)):
        if reading is not None:
            lines.append(json.dumps({"schema": MATRIX_SCHEMA, "entry": "aa", "when": name, **asdict(reading)}))
    verdict = {"schema": MATRIX_SCHEMA, "entry": "interference", **asdict(run.interference)}
    lines.append(json.dumps({**verdict, "wall_s": round(run.wall_s, 1), "jobs_wall_s": round(run.jobs_wall_s, 1)}))
    (out / MATRIX_JSONL).write_text("\n".join(lines) + "\n")
    (out / MATRIX_MD).write_text(_markdown(run))
