"""Run-to-run spread: how far the same release moves between repeated ASV runs on one machine. This module owns the
spread file, ``results/<machine>/spread.jsonl`` (one JSON line; not ``.json``, which ASV would read as a result).

Absolute values (latencies, ms per token, memory) carry no interval of their own, and engine instances differ by
an offset the blocks within one run cannot see. Repeat one release's ASV run k ≥ 3 times; :func:`measure_spread`
gives, per tracked value (``Class.method``):

- **factor**: with ``s²`` the log-scale variance over runs pooled over the parameter cells (df = cells × (k − 1);
  assumes the cells share one variance on the log scale), two future runs of one release differ in log by
  N(0, 2s²); a ratio beyond ``exp(t(0.975, df) · √2 · s)`` is a change at the 5% level. ``asv compare`` gets it as
  the value's interval (value ×/÷ √factor: two intervals overlap unless the values differ by more than the factor),
  ``release-compare`` flags absolute values beyond it, and ``asv.conf.json``'s regression thresholds copy it.
- **slowdown offset**: the engine-instance offset variance σ_u² of the log slowdown, from the repeats' per-block
  values: the variance of run means minus the within-run part (mean of s²_blocks / n), averaged over cells, with
  df = k − 1 (the cells of a run share one engine pair); where that estimate is not positive, its one-sided 95%
  upper bound instead. :func:`specharness.analysis.stats.ratio_change` adds 2·σ_u² to its standard error.
- **A/A calls**: every pair of repeats compared by that test (without and with the offset): how often two runs of
  the same release were called different.
- **days**: the day each repeat ran; where they span two days or more, the spread across days of each absolute value
  (``day_sd_log``, df = days − 1), which :func:`spread_sd` then uses when it is the larger. Ratios keep their
  within-run intervals.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from specharness.analysis.stats import ratio_change
from specharness.analysis.verdict import change_verdict
from specharness.history.asvnotes import params_label, read_companion

__all__ = [
    "SPREAD_FILE",
    "apply_spread",
    "load_spread",
    "measure_spread",
    "offset_from_moments",
    "offset_of",
    "offset_variance",
    "primary_factor",
    "regression_thresholds",
    "spread_factor",
    "spread_sd",
    "spread_source",
    "write_spread",
]

SPREAD_FILE = "spread.jsonl"
_SLOWDOWN = "bench_paired.PairedNgram.track_slowdown"


def _key(benchmark: str) -> str:
    """``bench_paired.PairedNgram.track_slowdown`` → ``PairedNgram.slowdown``."""
    parts = benchmark.split(".")
    return f"{parts[-2]}.{parts[-1].removeprefix('track_')}" if len(parts) >= 2 else benchmark


def load_spread(results_dir: Path, machine: str) -> dict[str, Any]:
    """The machine's spread, or ``{}``."""
    try:
        data = json.loads((results_dir / machine / SPREAD_FILE).read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def write_spread(path: Path, spread: dict[str, Any]) -> None:
    path.write_text(json.dumps(spread) + "\n")


MIN_FACTOR = 1.01  # below this a value did not measurably move over the repeats (a count of right answers, GPU
# memory that is allocated up front): no spread to judge by; compare and the thresholds fall back to ASV's factor


def spread_factor(spread: dict[str, Any], benchmark: str) -> float | None:
    """The measured factor for an ASV benchmark name, or None where it is under :data:`MIN_FACTOR`."""
    value = spread.get("factors", {}).get(_key(benchmark))
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) and value >= MIN_FACTOR else None


def spread_sd(spread: dict[str, Any], benchmark: str) -> tuple[float, float] | None:
    """(s, df): the run-to-run standard deviation of one run's log value and its degrees of freedom, read back from
    the measured factor = exp(t(0.975, df_f)·√2·s) (df_f = the pooled df the factor was computed with: the file's
    ``factor_df``, else (runs − 1) × 4 cells, the CPU grid); df = runs − 1 (runs share the machine's state). None
    without a measured factor."""
    factor = spread_factor(spread, benchmark)
    runs = int(spread.get("runs", 0) or 0)
    if factor is None or runs < 2:
        return None
    df_f = float((spread.get("factor_df") or {}).get(_key(benchmark)) or (runs - 1) * 4)
    within = math.log(factor) / (float(stats.t.ppf(0.975, df_f)) * math.sqrt(2.0)), float(runs - 1)
    day = (spread.get("day_sd_log") or {}).get(_key(benchmark))
    if isinstance(day, (int, float)) and day > within[0]:  # repeats on two days or more moved further: use that
        return float(day), float(spread.get("day_df", 1))
    return within


def spread_source(spread: dict[str, Any], benchmark: str) -> str:
    """What :func:`spread_sd` read for ``benchmark``, in words for evidence lines."""
    sd = spread_sd(spread, benchmark)
    if sd is None:
        return "no spread measured"
    day = (spread.get("day_sd_log") or {}).get(_key(benchmark))
    if isinstance(day, (int, float)) and sd[0] == float(day):
        return f"day-to-day sd {sd[0]:.3f} (log) over {len(spread.get('days', []))} days, df {sd[1]:.0f}"
    return f"run-to-run sd {sd[0]:.3f} (log) from {spread.get('runs', '?')} runs of {spread.get('release', '?')}"


def offset_of(spread: dict[str, Any], benchmark: str) -> tuple[float, float]:
    """(σ_u², its degrees of freedom) for a benchmark's slowdown; (0, 0) where none was measured."""
    entry = spread.get("offsets", {}).get(_key(benchmark)) or {}
    var, df = entry.get("var_log"), entry.get("df")
    if isinstance(var, (int, float)) and isinstance(df, (int, float)) and df > 0:
        return float(var), float(df)
    return 0.0, 0.0


def primary_factor(spread: dict[str, Any], cells: int = 4, alpha: float = 0.05) -> float | None:
    """The smallest slowdown ratio the primary test (release-compare, Holm over ``cells``) could call a change even
    with noiseless blocks: exp(t(1 − α/(2·cells), df)·√(2σ_u²)), σ_u² and df the measured offset's. None without one."""
    var, df = offset_of(spread, _SLOWDOWN)
    if df <= 0:
        return None
    return math.exp(float(stats.t.ppf(1 - alpha / (2 * cells), df)) * math.sqrt(2 * var))


def regression_thresholds(spread: dict[str, Any], branch: str, cells: int = 4) -> dict[str, float]:
    """The ``regressions_thresholds`` entries for ``asv.conf.json`` (ASV cannot read this file): factor − 1 for each
    measured value above 1, on ``branch`` only (ASV matches ``<benchmark>(<params>)@<branch>``); the slowdown's is
    at least :func:`primary_factor` − 1, so that the regressions page flags no cell the primary test cannot call."""
    out = {}
    primary = primary_factor(spread, cells)
    for key, factor in sorted(spread.get("factors", {}).items()):
        if isinstance(factor, (int, float)) and factor >= MIN_FACTOR:
            if key == _key(_SLOWDOWN) and primary is not None:
                factor = max(factor, min(primary, 1e6))
            cls, method = key.split(".", 1)
            out[rf".*\.{cls}\.track_{method}\b.*@{branch}$"] = round(factor - 1.0, 2)
    return out


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


def measure_spread(result_files: list[Path], release: str) -> dict[str, Any]:
    """The spread of repeated runs of one release on one machine (see the module docstring). Only benchmarks every
    file measured anew count (a value ASV merged in from an older run has the same ``started_at`` everywhere)."""

    loaded = [_values(p) for p in result_files]
    k = len(loaded)
    runs = [values for values, _ in loaded]
    remeasured = {name for name in (loaded[0][1] if loaded else {})
                  if len({started.get(name) for _, started in loaded}) == k}  # fmt: skip
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
    offset = _offset(notes)
    calls: dict[str, Any] = {"pairs": 0, "called_different_within_run_only": 0, "called_different_with_offset": 0,
                             "detail": []}  # fmt: skip
    for i, j in itertools.combinations(range(len(notes)), 2):
        for key in sorted(set(notes[i]) & set(notes[j])):
            a, b = notes[i][key], notes[j][key]
            if key[0] != _SLOWDOWN or len(a.block_values) < 2 or len(b.block_values) < 2:
                continue
            plain = ratio_change(a.block_values, b.block_values)
            full = ratio_change(a.block_values, b.block_values, offset_var=offset.get("var_log", 0.0),
                                offset_df=offset.get("df", math.inf))  # fmt: skip
            calls["pairs"] += 1
            calls["called_different_within_run_only"] += (
                change_verdict(plain.low, plain.high) != "no significant change"
            )
            calls["called_different_with_offset"] += change_verdict(full.low, full.high) != "no significant change"
            calls["detail"].append(f"run{i + 1} vs run{j + 1} {params_label(key[1])}: "
                                   f"{plain.change:.3f} [{plain.low:.3f}, {plain.high:.3f}] within-run only; "
                                   f"[{full.low:.3f}, {full.high:.3f}] with the offset")  # fmt: skip
    days = _days(loaded)
    day_sd = _day_spread(keys, runs, days)
    return {"runs": k, "release": release, "days": days, **day_sd,
            "rule": f"factor = exp(t(0.975, df) * sqrt(2) * s), s² = log-scale variance over {k} runs pooled over cells",
            "factors": factors, "factor_df": factor_df, "max_ratio": max_ratio, "offsets": {_key(_SLOWDOWN): offset} if offset else {},
            "aa_pairs": calls}  # fmt: skip


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

    from specharness.history.asvnotes import apply_notes, read_companion

    done = []
    for path in sorted(results_dir.glob("*.json")):
        if path.name != "machine.json":  # ASV's own; every other .json there is a result
            result = Results.load(str(path))
            apply_notes(result, read_companion(path), spread)
            result.save(str(results_dir.parent))
            done.append(path)
    return done
