"""The spread file, ``results/<machine>/spread.jsonl`` (one JSON line; not ``.json``, which ASV would read as a
result): reading and writing it, and what each tracked value's interval, offset and regression threshold follow from
it. Measuring the spread from repeated runs is :mod:`specharness.history.asv.spread`'s job."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from scipy import stats

__all__ = [
    "SPREAD_FILE",
    "load_spread",
    "offset_of",
    "primary_factor",
    "regression_thresholds",
    "spread_factor",
    "spread_missing",
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
        within = float(day), float(spread.get("day_df", 1))
    return within if within[1] >= MIN_SPREAD_DF else None


MIN_SPREAD_DF = 2  # a spread from fewer degrees of freedom (two runs, or two days) gives no interval: not estimable


def spread_missing(spread: dict[str, Any], benchmark: str) -> str:
    """Why :func:`spread_sd` gives nothing for ``benchmark``, in words: none measured, or too few runs (or days)."""
    if spread_factor(spread, benchmark) is None:
        return "no run-to-run spread measured"
    runs = int(spread.get("runs", 0) or 0)
    day = (spread.get("day_sd_log") or {}).get(_key(benchmark))
    days = int(spread.get("day_df", 0) or 0) + 1
    if runs >= MIN_SPREAD_DF + 1 and isinstance(day, (int, float)):
        return f"day-to-day spread not estimable from {days} days"
    return f"run-to-run spread not estimable from {runs} runs"


def spread_source(spread: dict[str, Any], benchmark: str) -> str:
    """What :func:`spread_sd` read for ``benchmark``, in words for evidence lines."""
    sd = spread_sd(spread, benchmark)
    if sd is None:
        return spread_missing(spread, benchmark)
    day = (spread.get("day_sd_log") or {}).get(_key(benchmark))
    if isinstance(day, (int, float)) and sd[0] == float(day):
        return f"day-to-day sd {sd[0]:.3f} (log) over {len(spread.get('days', []))} days, df {sd[1]:.0f}"
    return f"run-to-run sd {sd[0]:.3f} (log) from {spread.get('runs', '?')} runs of {spread.get('release', '?')}"


def offset_of(spread: dict[str, Any], benchmark: str) -> tuple[float, float]:
    """(σ_u², its degrees of freedom) for a benchmark's slowdown; (0, 0) where none was measured, or where it rests on
    fewer than :data:`MIN_SPREAD_DF` degrees of freedom (not estimable)."""
    entry = spread.get("offsets", {}).get(_key(benchmark)) or {}
    var, df = entry.get("var_log"), entry.get("df")
    if isinstance(var, (int, float)) and isinstance(df, (int, float)) and df >= MIN_SPREAD_DF:
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
