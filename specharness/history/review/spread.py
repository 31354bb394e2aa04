"""Run-to-run spread: how far the same release moves between repeated ASV runs on one machine. The spread file
itself (reading, writing, what follows from it) is :mod:`specharness.history.asv.spreadfile`'s.

:func:`measure_spread` gives, per tracked value, the change factor, the slowdown's engine-instance offset
(:func:`offset_variance`), the A/A calls and the spread across days; :func:`apply_spread` rebuilds ASV's stats
columns from it.
What each means: docs/release-review.md#run-to-run-spread.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from specharness._errors import ConfigError
from specharness.analysis.stats import ratio_change
from specharness.analysis.verdict import change_verdict
from specharness.history.asv.notes import Note, apply_notes, params_label, read_companion, setups_differ
from specharness.history.asv.spreadfile import _SLOWDOWN, _key

__all__ = ["apply_spread", "measure_spread", "offset_from_moments", "offset_variance"]


def _values(path: Path) -> tuple[dict[tuple[str, tuple[str, ...]], float], dict[str, Any]]:
    """Positive finite values by (benchmark, params), and each benchmark's ``started_at``, via ASV's Results."""
    from asv.results import Results

    result = Results.load(str(path))
    out, started = {}, {}
    for name in result.get_all_result_keys():
        params = result.get_result_params(name)
        started[name] = result.started_at.get(name)
        values = result.get_result_value(name, params)
        for combo, v in zip(itertools.product(*params), values, strict=False):
            if isinstance(v, (int, float)) and math.isfinite(v) and v > 0:
                out[(name, tuple(combo))] = float(v)
    return out, started


OFFSET_UPPER = 0.95  # the one-sided level of the upper bound used when the offset's estimate is not positive


def offset_from_moments(between: float, within: float, runs: int) -> dict[str, Any]:
    """σ_u² from the variance of run means (``between``, k − 1 df: the cells of one run share one engine pair, so
    they add no degrees of freedom) and the mean within-run variance of a run mean (``within``). The estimate is
    between − within; where that is not positive, the one-sided 95% upper bound of the between-run variance,
    between·(k − 1)/χ²(0.05, k − 1), which bounds σ_u² from above (never a floor at 0)."""
    df = runs - 1
    estimate = between - within
    upper = between * df / float(stats.chi2.ppf(1 - OFFSET_UPPER, df)) if df > 0 else math.inf
    used = estimate if estimate > 0 else upper
    return {
        "var_log": used,
        "df": df,
        "estimate_var_log": estimate,
        "upper_var_log": upper,
        "fallback": "upper bound" if estimate <= 0 else "",
        "between_var_log": between,
        "within_var_log": within,
    }


def offset_variance(cells: list[list[list[float]]]) -> dict[str, Any]:
    """σ_u² of the log values from repeated runs: ``cells[c][r]`` holds run r's block values of cell c. Per cell, the
    variance of run means and the mean within-run variance of a run mean (s²_blocks / n), averaged over cells, then
    :func:`offset_from_moments` (df = k − 1). Empty without a cell of k ≥ 2 runs with ≥ 2 blocks each."""
    between, within, k = [], [], 0
    for runs in cells:
        logs = [np.log([v for v in r if v > 0 and math.isfinite(v)]) for r in runs]
        if len(logs) < 2 or any(len(x) < 2 for x in logs):
            continue
        between.append(float(np.var([x.mean() for x in logs], ddof=1)))
        within.append(float(np.mean([x.var(ddof=1) / len(x) for x in logs])))
        k = len(logs)
    if not between:
        return {}
    return offset_from_moments(float(np.mean(between)), float(np.mean(within)), k)


def _offset(notes: list[dict[tuple[str, tuple[str, ...]], Any]]) -> dict[str, Any]:
    keys = set.intersection(*(set(n) for n in notes)) if notes else set()
    cells = [[list(n[key].block_values) for n in notes] for key in sorted(k for k in keys if k[0] == _SLOWDOWN)]
    return offset_variance(cells)


def _one_setup(
    result_files: list[Path], notes: list[dict[tuple[str, tuple[str, ...]], Note]], remeasured: set[str]
) -> None:
    """Refuse repeats measured different ways (the notes of values they measured anew record setups that differ,
    :func:`setups_differ`): their spread would be the setups' difference, not the run-to-run noise every later
    comparison is judged by. Notes ASV kept from older runs (benchmarks not in ``remeasured``) are not looked at."""
    first: tuple[str, Path] | None = None
    for path, by_key in zip(result_files, notes, strict=True):
        for note in by_key.values():
            if note.benchmark not in remeasured:
                continue
            if first is None and note.setup:
                first = (note.setup, path)
            elif first is not None and setups_differ(first[0], note.setup):
                where = f"{path} holds values" if first[1] == path else f"{first[1]} and {path} were"
                raise ConfigError(
                    f"{where} measured with different setups ({first[0]!r} and {note.setup!r}): a run-to-run spread "
                    "needs repeats of one setup; give only the runs of one of them"
                )


def measure_spread(result_files: list[Path], release: str) -> dict[str, Any]:
    """The spread of repeated runs of one release on one machine (docs/release-review.md#run-to-run-spread). Only
    benchmarks every file measured anew count (a value ASV merged in from an older run has the same ``started_at``
    everywhere)."""

    loaded = [_values(p) for p in result_files]
    k = len(loaded)
    runs = [values for values, _ in loaded]
    remeasured = {
        name for name in (loaded[0][1] if loaded else {}) if len({started.get(name) for _, started in loaded}) == k
    }
    keys = sorted(key for key in set.intersection(*(set(r) for r in runs)) if key[0] in remeasured) if runs else []
    per_metric: dict[str, list[float]] = {}
    max_ratio: dict[str, float] = {}
    for name, combo in keys:
        logs = np.log([r[(name, combo)] for r in runs])
        per_metric.setdefault(_key(name), []).append(float(np.var(logs, ddof=1)))
        max_ratio[_key(name)] = round(max(max_ratio.get(_key(name), 1.0), math.exp(float(logs.max() - logs.min()))), 4)
    factors, factor_df = {}, {}
    for metric, variances in per_metric.items():
        df = len(variances) * (k - 1)
        s = math.sqrt(float(np.mean(variances)))
        factors[metric] = round(math.exp(float(stats.t.ppf(0.975, df)) * math.sqrt(2.0) * s), 4)
        factor_df[metric] = df
    notes = [{(n.benchmark, n.params): n for n in read_companion(p)} for p in result_files]
    _one_setup(result_files, notes, remeasured)
    offset = _offset(notes)
    calls: dict[str, Any] = {
        "pairs": 0,
        "called_different_within_run_only": 0,
        "called_different_with_offset": 0,
        "detail": [],
    }
    for i, j in itertools.combinations(range(len(notes)), 2):
        for key in sorted(set(notes[i]) & set(notes[j])):
            a, b = notes[i][key], notes[j][key]
            if key[0] != _SLOWDOWN or len(a.block_values) < 2 or len(b.block_values) < 2:
                continue
            plain = ratio_change(a.block_values, b.block_values)
            full = ratio_change(
                a.block_values,
                b.block_values,
                offset_var=offset.get("var_log", 0.0),
                offset_df=offset.get("df", math.inf),
            )
            calls["pairs"] += 1
            calls["called_different_within_run_only"] += (
                change_verdict(plain.low, plain.high) != "no significant change"
            )
            calls["called_different_with_offset"] += change_verdict(full.low, full.high) != "no significant change"
            calls["detail"].append(
                f"run{i + 1} vs run{j + 1} {params_label(key[1])}: "
                f"{plain.change:.3f} [{plain.low:.3f}, {plain.high:.3f}] within-run only; "
                f"[{full.low:.3f}, {full.high:.3f}] with the offset"
            )
    days = _days(loaded)
    day_sd = _day_spread(keys, runs, days)
    return {
        "runs": k,
        "release": release,
        "days": days,
        **day_sd,
        "rule": f"factor = exp(t(0.975, df) * sqrt(2) * s), s² = log-scale variance over {k} runs pooled over cells",
        "factors": factors,
        "factor_df": factor_df,
        "max_ratio": max_ratio,
        "offsets": {_key(_SLOWDOWN): offset} if offset else {},
        "aa_pairs": calls,
    }


def _days(loaded: list[tuple[dict[tuple[str, tuple[str, ...]], float], dict[str, Any]]]) -> list[str]:
    """The UTC day each repeat started (its earliest ``started_at``)."""
    import time

    out = []
    for _, started in loaded:
        stamps = [v for v in started.values() if isinstance(v, (int, float))]
        out.append(time.strftime("%Y-%m-%d", time.gmtime(min(stamps) / 1000)) if stamps else "")
    return out


def _absolute(metric: str) -> bool:
    """Absolute values (latencies, ms per token, memory): what moves between days; ratios keep their own intervals."""
    return "_ms" in metric or "ms_per_token" in metric or "memory_mib" in metric


def _day_spread(
    keys: list[tuple[str, tuple[str, ...]]], runs: list[dict[tuple[str, tuple[str, ...]], float]], days: list[str]
) -> dict[str, Any]:
    """The spread across days of the absolute values, where the repeats span two days or more: per cell, the mean log
    value of each day; the variance of those day means pooled over cells (df = days − 1: the cells of one day share
    the machine's state that day). Empty when every repeat ran on one day."""
    distinct = sorted({d for d in days if d})
    if len(distinct) < 2:
        return {}
    per_metric: dict[str, list[float]] = {}
    for name, combo in keys:
        if not _absolute(_key(name)):
            continue
        logs = [math.log(r[(name, combo)]) for r in runs]
        means = [float(np.mean([v for v, d in zip(logs, days, strict=True) if d == day])) for day in distinct]
        per_metric.setdefault(_key(name), []).append(float(np.var(means, ddof=1)))
    return {"day_sd_log": {m: math.sqrt(float(np.mean(v))) for m, v in per_metric.items()}, "day_df": len(distinct) - 1}


def apply_spread(results_dir: Path, spread: dict[str, Any]) -> list[Path]:
    """Rebuild the stats columns of every ASV result file in ``results_dir`` (one machine's folder) from ``spread``
    (``specharness spread --apply``); returns the files rewritten."""
    from asv.results import Results

    done = []
    for path in sorted(results_dir.glob("*.json")):
        if path.name != "machine.json":  # ASV's own; every other .json there is a result
            result = Results.load(str(path))
            apply_notes(result, read_companion(path), spread)
            result.save(str(results_dir.parent))
            done.append(path)
    return done
