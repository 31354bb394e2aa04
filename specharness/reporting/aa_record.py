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
from specharness.experiment.design import Profile, build_arms, control_pairs
from specharness.experiment.machine_record import Band, MachineRecord, band_from_offset
from specharness.experiment.rundir import read_manifest
from specharness.records import CellRecord
from specharness.reporting.aa_scorecard import (
    AA_TWIN,
    ControlCell,
    control_cell,
    offset_evidence,
    run_labels,
    score_control_runs,
)
from specharness.reporting.release_scorecard import score_release_controls
from specharness.reporting.report import report_json

__all__ = ["build_record", "engine_pair_contrasts", "memory_offset", "memory_offset_logs"]


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


def _twin_cells(run_dirs: list[Path], reports: dict[Path, Any]) -> list[ControlCell]:
    """Every run's twin cells, A/A and slowed alike, each slowed twin's known factor taken out (its same-work speedup
    times the factor): every twin is an engine of the arm it copies, so each is an A/A engine pair."""
    cells = []
    for run_dir, label in zip(run_dirs, run_labels(run_dirs), strict=True):
        report = reports[run_dir]
        profile = Profile.from_dict(report["manifest"]["config"]["profile"])
        aa, effect = control_pairs(profile)
        factors = {a.name: a.client_slowdown for a in build_arms(profile)}
        for c in report["comparisons"]:
            if (c["arm_a"], c["arm_b"]) in aa | effect:
                cell, f = control_cell(label, c), factors.get(c["arm_b"], 1.0)
                cells.append(replace(cell, estimate=cell.estimate * f, low=cell.low * f, high=cell.high * f))
    return cells


def engine_pair_contrasts(cells: Sequence[ControlCell]) -> list[ControlCell]:
    """A run's twins of one arm as independent A/A engine pairs (issue 49, item 3.1). Within a run and cell, twin j's
    log offset is d_j = u_j - u_0 (its engine's offset less the shared arm's, plus noise): the J twins share u_0,
    so as J pairs they would correlate. The Helmert contrasts of the J + 1 engines (0, d_1, ..., d_J), h_k =
    sqrt(2k / (k + 1)) · (mean(e_0..e_{k-1}) - e_k), each vary as one A/A pair (2 sigma²) and are independent, so
    each joins the record as a pair of its own run (``<run>:pair<k>``); with one twin h_1 is that twin's pair. Each
    carries its noise in its interval, from the engines' own (half a pair's each)."""
    groups: dict[tuple[str, str, int], list[ControlCell]] = {}
    for c in cells:
        if c.estimate > 0 and math.isfinite(c.se_log):
            groups.setdefault((c.run, c.workload, c.clients), []).append(c)
    out = []
    for (run, _, _), twins in groups.items():
        twins = sorted(twins, key=lambda c: (c.twin != AA_TWIN, c.twin))
        logs = [0.0] + [math.log(c.estimate) for c in twins]
        # each engine's own noise, half a pair's (the arm's own: half the mean of its pairs'): the contrasts are
        # contrasts of engines, and the arm's noise, shared by every d_j, cancels as its offset does
        pair_noise = [c.se_log**2 for c in twins]
        noise = [sum(pair_noise) / len(pair_noise) / 2.0] + [v / 2.0 for v in pair_noise]
        for k, h in enumerate(_helmert(logs[1:]), start=1):
            scale = 2.0 * k / (k + 1)
            se = math.sqrt(scale * (sum(noise[:k]) / k**2 + noise[k]))
            twin = twins[k - 1]
            df = twin.t_df if math.isfinite(twin.t_df) else float(twin.df)
            t = float(sps.t.ppf(1 - (1 - twin.confidence) / 2, df))
            out.append(
                replace(
                    twin,
                    run=f"{run}:pair{k}",
                    twin=f"contrast{k}",
                    estimate=math.exp(h),
                    low=math.exp(h - t * se),
                    high=math.exp(h + t * se),
                    offset_var=0.0,
                    t_df=df,
                )
            )
    return out


def _kept_up(limit: float) -> float:
    """An upper limit as a record keeps it: to 3 places, never rounded down."""
    return math.ceil(limit * 1000 - 1e-9) / 1000


def memory_offset_logs(analysis: Analysis) -> list[float]:
    """One run's A/A peak-memory log ratios, one per A/A pair of engines (twin over the arm it copies): the mean over
    the cells and blocks both ran of the log ratio of the servers' peak RSS, the estimand of a peak-memory change over
    all cells (:func:`~specharness.analysis.changes.paired_changes`), valid cells only. None on a GPU, whose used memory
    is the device's. Every twin, A/A or slowed (a client's slowdown leaves the server's memory as it is), is an engine
    of the arm it copies; twins of one arm share its engine, so they enter as independent contrasts (``_helmert``),
    one per twin."""
    by_cell: dict[tuple[str, str, int, str], list[CellRecord]] = {}
    for cell in analysis.contents.cells:
        if cell.valid:
            by_cell.setdefault((cell.workload, cell.load, cell.block, cell.arm), []).append(cell)
    peaks = {key: v for key, cells in by_cell.items() if math.isfinite(v := peak_memory(cells)) and v > 0}
    aa, effect = control_pairs(analysis.profile)
    by_arm: dict[str, list[float]] = {}
    for a, b in sorted(aa) + sorted(effect):  # a client's slowdown leaves the server's memory as it is
        logs = [
            math.log(peaks[(w, lo, k, b)] / v)
            for (w, lo, k, arm), v in peaks.items()
            if arm == a and (w, lo, k, b) in peaks
        ]
        if logs:
            by_arm.setdefault(a, []).append(sum(logs) / len(logs))
    return [h for twins in by_arm.values() for h in _helmert(twins)]


def _helmert(twins: Sequence[float]) -> list[float]:
    """The independent contrasts of an arm's engine (0) and its twins' log offsets (:func:`engine_pair_contrasts`),
    each varying as one A/A pair."""
    logs = [0.0, *twins]
    return [math.sqrt(2.0 * k / (k + 1)) * (sum(logs[:k]) / k - logs[k]) for k in range(1, len(logs))]


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
    pairs = engine_pair_contrasts(_twin_cells(run_dirs, reports))
    evidence = offset_evidence(pairs)
    if not math.isfinite(evidence.sd_upper) or len(run_dirs) < 2:  # a run's pairs share its day and machine state
        raise ConfigError(
            f"aa-record: {len(run_dirs)} run(s) cannot estimate the offset between engine pairs; give 2 runs or more "
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
        f"{kind} A/A, {engines}, {len(cells)} cells in {len(run_dirs)} runs ({where}): {false} false verdicts; "
        f"{evidence.runs} engine pairs (every twin, slowed ones with their factor taken out, as independent contrasts "
        "of the engines of one run: engine_pair_contrasts); "
        f"per-cell engine-instance offset sd {evidence.sd:.3f}, 95% upper limit {upper:.3f} "
        f"(specharness aa-record, offset_evidence), so the band is {margin:.0%}; over a run's "
        f"{evidence.cells_per_run:.3g} cells, upper limit {_kept_up(evidence.over_cells_sd_upper):.3f}{memory_text}",
        offset_sd_upper=upper,
        aa_runs=len(run_dirs),
        memory_sd_upper=memory_upper,
        over_cells_sd_upper=_kept_up(evidence.over_cells_sd_upper),
        offset_sd=round(evidence.sd, 3),
    )
    profiles = [m["config"]["profile"] for m in manifests]
    workloads = ", ".join(dict.fromkeys(w for p in profiles for w in p.get("workloads") or []))
    caps = sorted({int(p.get("max_tokens_cap") or 0) for p in profiles})
    identity_source = (
        f"{kind} A/A, {engines}, workloads {workloads} at max_tokens {', '.join(map(str, caps))}, "
        f"{len(run_dirs)} runs ({where})"
    )
    identity = measure_aa_identity(run_dirs, kind, identity_source, analyses.__getitem__)  # one a client count and cap
    models = {str((m.get("model") or {}).get("name")) for m in manifests}
    if len(models) != 1:
        raise ConfigError(f"aa-record: the runs served {', '.join(sorted(models))}; record one model at a time")
    traffic = tuple(dict.fromkeys(w for m in manifests for w in m.get("workloads") or []))
    return MachineRecord(kind, band, tuple(identity), round(evidence.sd, 3), model=models.pop(), workloads=traffic)
