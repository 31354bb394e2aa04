"""A kind of machine's A/A record built from A/A runs made on it (``specharness aa-record``).

The runs are the built-in A/A (``--profile aa`` or ``control``: baseline against baseline-b) or declared twins (an
arms file whose twin has ``twin_of`` and no ``client_slowdown``), either or both, all of one kind of machine
(:func:`~specharness.experiment.bands.machine_kind`). The record holds the per-cell engine-instance offset's estimate
and 95% upper limit (:func:`~specharness.reporting.aa_scorecard.offset_evidence`), from which the band follows, and
the A/A identity records (:func:`~specharness.analysis.aa_identity_record.measure_aa_identity`); its sources name the
runs. :func:`~specharness.experiment.machine_record.write_record` files it where every later run finds it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import scipy.stats as sps

from specharness._errors import ConfigError
from specharness.analysis.aa_identity_record import measure_aa_identity
from specharness.analysis.analyse import Analysis, analyse
from specharness.analysis.changes import peak_memory
from specharness.experiment.bands import machine_kind
from specharness.experiment.design import control_pairs
from specharness.experiment.machine_record import Band, MachineRecord, band_from_offset
from specharness.experiment.rundir import read_manifest
from specharness.records import CellRecord
from specharness.reporting.aa_scorecard import ControlCell, offset_evidence, run_labels, score_control_runs
from specharness.reporting.release_scorecard import score_release_controls
from specharness.reporting.report import report_json

__all__ = ["build_record", "memory_offset", "memory_offset_logs"]


def _runs_text(run_dirs: Sequence[Path], manifests: Sequence[dict[str, Any]]) -> str:
    days = sorted({time.strftime("%Y-%m-%d", time.gmtime(float(m.get("started_unix_s") or 0))) for m in manifests})
    return f"{' to '.join(dict.fromkeys([days[0], days[-1]]))}, {', '.join(str(d) for d in run_dirs)}"


def _engines(reports: Sequence[dict[str, Any]]) -> str:
    versions = sorted({str(e.get("vllm_version")) for r in reports for e in r.get("engines") or []})
    return f"vLLM {', '.join(versions)}" if versions else "vLLM (version not recorded)"


def _aa_cells(run_dirs: list[Path], manifests: Sequence[dict[str, Any]], reports: dict[Path, Any]) -> list[ControlCell]:
    """Every run's A/A cells (built-in or declared twins, each run by its own design), labelled one run each."""
    cells = []
    load = reports.__getitem__
    for run_dir, label, manifest in zip(run_dirs, run_labels(run_dirs), manifests, strict=True):
        declared = bool(manifest["config"]["profile"].get("arm_specs"))
        found = (
            score_release_controls([run_dir], load=load).aa_speed
            if declared
            else score_control_runs([run_dir], load=load).aa
        )
        cells += [replace(c, run=label) for c in found]
    return cells


def _kept_up(limit: float) -> float:
    """An upper limit as a record keeps it: to 3 places, never rounded down."""
    return math.ceil(limit * 1000 - 1e-9) / 1000


def memory_offset_logs(analysis: Analysis) -> list[float]:
    """One run's A/A peak-memory log ratios, one per A/A pair of engines (twin over the arm it copies): the mean over
    the cells and blocks both ran of the log ratio of the servers' peak RSS, the estimand of a peak-memory change over
    all cells (:func:`~specharness.analysis.changes.paired_changes`), valid cells only. None on a GPU, whose used memory
    is the device's. Each twin counts as one pair: two twins of one arm share that arm's engine, so a design with
    several would overstate the degrees of freedom (the built-in A/A and the release controls have one)."""
    by_cell: dict[tuple[str, str, int, str], list[CellRecord]] = {}
    for cell in analysis.contents.cells:
        if cell.valid:
            by_cell.setdefault((cell.workload, cell.load, cell.block, cell.arm), []).append(cell)
    peaks = {key: v for key, cells in by_cell.items() if math.isfinite(v := peak_memory(cells)) and v > 0}
    out = []
    for a, b in sorted(control_pairs(analysis.profile)[0]):
        logs = [
            math.log(peaks[(w, lo, k, b)] / v)
            for (w, lo, k, arm), v in peaks.items()
            if arm == a and (w, lo, k, b) in peaks
        ]
        if logs:
            out.append(sum(logs) / len(logs))
    return out


def memory_offset(logs: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """The peak-memory engine-instance offset sd of A/A log ratios (each the difference of two engines, mean 0 by
    design: sd² = mean of squares, n degrees of freedom) and its one-sided upper confidence limit by the chi-square
    distribution, kept as a record keeps it (:func:`_kept_up`); NaN for fewer than 2."""
    n = len(logs)
    if n < 2:
        return math.nan, math.nan
    var = sum(d * d for d in logs) / n
    upper = math.sqrt(n * var / float(sps.chi2.ppf(1 - confidence, n)))
    return math.sqrt(var), _kept_up(upper)


def build_record(run_dirs: list[Path]) -> MachineRecord:
    """The record the runs support; runs of several kinds of machine, or too few to estimate an offset between engine
    pairs (fewer than 2), are a :class:`ConfigError`."""
    manifests = [read_manifest(d) for d in run_dirs]
    kinds = {d: machine_kind(m.get("hardware") or {}) for d, m in zip(run_dirs, manifests, strict=True)}
    kind = kinds[run_dirs[0]]
    other = next((d for d in run_dirs if kinds[d] != kind), None)
    if other is not None:
        raise ConfigError(
            f"aa-record: {other} ran on {kinds[other]!r}, {run_dirs[0]} on {kind!r}; record one kind of machine at a time"
        )
    analyses = {d: analyse(d, m) for d, m in zip(run_dirs, manifests, strict=True)}  # each run analysed once
    reports = {d: report_json(a) for d, a in analyses.items()}
    cells = _aa_cells(run_dirs, manifests, reports)
    if not cells:
        raise ConfigError(
            "aa-record: the runs hold no A/A pair; give runs of --profile aa or of an arms file with a twin"
        )
    evidence = offset_evidence(cells)
    if not math.isfinite(evidence.sd_upper):
        raise ConfigError(
            f"aa-record: {evidence.runs} run(s) cannot estimate the offset between engine pairs; give 2 runs or more "
            "(5 or more for a useful limit)"
        )
    upper = _kept_up(evidence.sd_upper)
    margin = band_from_offset(upper)
    where = _runs_text(run_dirs, manifests)
    engines = _engines(list(reports.values()))
    false = sum(c.false_verdict for c in cells)
    memory_logs = [d for a in analyses.values() for d in memory_offset_logs(a)]
    memory_sd, memory_upper = memory_offset(memory_logs)
    memory_text = (
        f"; peak-memory offset sd {memory_sd:.4f}, 95% upper limit {memory_upper:.3f} from {len(memory_logs)} A/A "
        "engine pairs (memory_offset)"
        if math.isfinite(memory_upper)
        else ""
    )
    band = Band(
        margin,
        f"{kind} A/A, {engines}, {len(cells)} cells in {evidence.runs} runs ({where}): {false} false verdicts; "
        f"per-cell engine-instance offset sd {evidence.sd:.3f}, 95% upper limit {upper:.3f} "
        f"(specharness aa-record, offset_evidence), so the band is {margin:.0%}{memory_text}",
        offset_sd_upper=upper,
        aa_runs=evidence.runs,
        memory_sd_upper=memory_upper,
    )
    profiles = [m["config"]["profile"] for m in manifests]
    workloads = ", ".join(dict.fromkeys(w for p in profiles for w in p.get("workloads") or []))
    caps = sorted({int(p.get("max_tokens_cap") or 0) for p in profiles})
    identity_source = (
        f"{kind} A/A, {engines}, workloads {workloads} at max_tokens {', '.join(map(str, caps))}, "
        f"{evidence.runs} runs ({where})"
    )
    identity = measure_aa_identity(run_dirs, kind, identity_source, analyses.__getitem__)  # one a client count and cap
    return MachineRecord(kind, band, tuple(identity), round(evidence.sd, 3))
