"""The stopping rule of ``--until-decided``: which cells still need blocks.

A cell is undecided while any of its comparisons has the speed verdict "inconclusive" (at the per-look confidence
of :func:`specharness.analysis.analyse.rules_for`, Bonferroni over the run's possible looks, so the chance of any
wrong verdict over all looks stays at most 5% however the looks depend on each other). "not comparable" and
"invalid" cells are not helped by more blocks and stop.
"""

from __future__ import annotations

from pathlib import Path

from specharness.analysis.analyse import analyse
from specharness.experiment.rundir import read_manifest

__all__ = ["undecided_cells"]


def undecided_cells(run_dir: Path) -> set[tuple[str, str]]:
    """(workload, load label) cells of a run whose speed verdict is still inconclusive."""
    a = analyse(run_dir, read_manifest(run_dir))
    return {(c.workload, c.load) for c in a.comparisons if c.speed.verdict == "inconclusive"}
