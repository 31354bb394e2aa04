"""Recompute the values of committed ASV results from the experiment journals they came from.

A method change (a new statistic, a new verdict rule) must not need the engines again when the journals are kept:
the run folder is rebuilt into ``report.json`` and every ``PairedNgram.track_*`` value of the ASV result file is
replaced by :func:`specharness.history.metrics.asv_metrics` of it, cell by cell (NaN where the run had no such cell).
The benchmark version hashes are kept: the values are those of the same run, recomputed.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from specharness.history.asvnotes import Note, value_note
from specharness.history.metrics import asv_intervals, asv_key, asv_metrics, load_metrics, paired_key

__all__ = ["LOAD_PREFIX", "PAIRED_PREFIX", "paired_notes", "recompute_load", "recompute_paired"]

PAIRED_PREFIX = "bench_paired.PairedNgram.track_"
LOAD_PREFIX = "bench_load.LoadSweep.track_"


def recompute_paired(result: dict[str, Any], report: dict[str, Any]) -> list[str]:
    """Replace every PairedNgram value of one ASV result file (its parsed JSON) from ``report``; returns the
    benchmarks rewritten. Values that cannot be computed become NaN (ASV shows "n/a"; null would read "failed")."""
    metrics = asv_metrics(report)
    columns = result["result_columns"]
    at_result, at_params = columns.index("result"), columns.index("params")
    changed = []
    for name, row in result["results"].items():
        if not name.startswith(PAIRED_PREFIX) or not row:
            continue
        metric = name[len(PAIRED_PREFIX):]
        values = []
        for workload, clients in itertools.product(*row[at_params]):
            value = metrics.get(paired_key(workload.strip(chr(39)), clients, metric), math.nan)
            values.append(value if isinstance(value, float) and math.isfinite(value) else math.nan)
        row[at_result] = values
        changed.append(name)
    return changed


def recompute_load(result: dict[str, Any], report: dict[str, Any]) -> list[str]:
    """Replace every LoadSweep value of one ASV result file from ``report`` (its sweeps); returns the benchmarks
    rewritten. Values that cannot be computed become NaN."""
    metrics = load_metrics(report)
    columns = result["result_columns"]
    at_result, at_params = columns.index("result"), columns.index("params")
    changed = []
    for name, row in result["results"].items():
        if not name.startswith(LOAD_PREFIX) or not row:
            continue
        metric = name[len(LOAD_PREFIX):]
        values = []
        for (workload,) in itertools.product(*row[at_params]):
            value = metrics.get(asv_key(workload.strip(chr(39)), "load", metric), math.nan)
            values.append(value if isinstance(value, float) and math.isfinite(value) else math.nan)
        row[at_result] = values
        changed.append(name)
    return changed


def paired_notes(report: dict[str, Any], commit: str, source: str) -> list[Note]:
    """The notes a PairedNgram run leaves (slowdown interval, blocks, verdicts), rebuilt from its report."""
    notes = []
    for key, iv in asv_intervals(report).items():
        workload, load, metric = key.split("/")
        if not load.startswith("c"):
            continue
        notes.append(value_note(PAIRED_PREFIX + metric, (workload, int(load[1:])), commit, iv, source=source))
    return notes
