"""Recompute the values of committed ASV results from the experiment journals they came from.

A method change (a new statistic, a new verdict rule) must not need the engines again when the journals are kept:
the run folder is rebuilt into ``report.json`` and every ``PairedNgram.track_*`` value of the ASV result file is
replaced by :func:`specharness.history.asv.metrics.asv_metrics` of it, cell by cell (NaN where the run had no such cell).
The benchmark version hashes are kept: the values are those of the same run, recomputed.
"""

from __future__ import annotations

import itertools
import json
import math
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from specharness._errors import ConfigError
from specharness.experiment.rundir import MANIFEST, copy_run
from specharness.history.asv.metrics import asv_intervals, asv_key, asv_metrics, load_metrics, paired_key
from specharness.history.asv.notes import Note, apply_notes, read_companion, update_companion, value_note
from specharness.history.asv.suite import project_relative
from specharness.reporting.report import write_report

__all__ = ["LOAD_PREFIX", "PAIRED_PREFIX", "paired_notes", "recompute_load", "recompute_paired", "recompute_result"]

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
        metric = name[len(PAIRED_PREFIX) :]
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
        metric = name[len(LOAD_PREFIX) :]
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


def _kept_provenance(fresh: list[Note], old: list[Note]) -> list[Note]:
    """Recomputed notes keep what the value was measured with and by (the old note's ``setup`` and ``harness``):
    recomputing re-analyses the same measurement."""
    before = {(n.benchmark, n.params): n for n in old}
    return [
        replace(n, setup=o.setup, harness=o.harness) if (o := before.get((n.benchmark, n.params))) else n for n in fresh
    ]


def recompute_result(result_path: Path, run_dir: Path) -> tuple[int, int]:
    """``specharness recompute-asv``: rebuild ``run_dir``'s report from its journal (``journal.jsonl`` or
    ``journal.jsonl.xz``), rewrite the ASV result file's values from it, put the slowdown's interval into ASV's stats
    columns and rewrite the companion notes for the cells the run measured (what the ASV plugin does live). Returns
    (benchmarks recomputed, intervals noted)."""
    from asv.results import Results

    if not (run_dir / MANIFEST).is_file():
        raise ConfigError(f"{run_dir}: no {MANIFEST}; give a run folder (or its copy under reports/)")
    if not result_path.is_file():
        raise ConfigError(f"{result_path}: no such ASV result file; give results/<machine>/<commit>-<env>.json")
    with tempfile.TemporaryDirectory() as tmp:
        run = copy_run(run_dir, Path(tmp) / run_dir.name)
        report = write_report(run, plots=False)
    result = json.loads(result_path.read_text())
    changed = recompute_paired(result, report) + recompute_load(result, report)
    result_path.write_text(json.dumps(result, indent=None, separators=(", ", ": ")))
    loaded = Results.load(str(result_path))
    fresh = paired_notes(report, loaded.commit_hash, f"recomputed from {project_relative(run_dir)}")
    used = apply_notes(loaded, _kept_provenance(fresh, read_companion(result_path)))
    loaded.save(str(result_path.parent.parent))
    update_companion(result_path, used)
    return len(changed), len(used)
