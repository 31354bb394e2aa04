"""Every value the ASV suite tracks, from one function over a run's ``report.json``.

ASV flags every *rise* as a regression and has no "higher is better", so each value is oriented so that a rise is
bad: slowdown (1 / same-work speedup; its interval travels in ASV's stats columns, see :func:`asv_intervals`), goodput loss (baseline goodput / ngram goodput),
latency percentiles and ms per token per arm, rejection rate (1 - acceptance), verify steps per token
(1 / mean acceptance length), incorrect fraction, peak memory. Keys are ``<workload>/<load>/<name>`` (load ``c<clients>`` or ``r<rate>``); a cell a
profile did not run is absent, and a lookup of it gives NaN ("n/a" in ASV).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from specharness.numbers import number
from specharness.records import load_label

__all__ = [
    "Interval",
    "asv_intervals",
    "asv_key",
    "asv_metrics",
    "configuration_values",
    "group_metrics",
    "load_metrics",
    "lookup",
    "paired_key",
    "sweep_key",
]


def asv_key(*parts: object) -> str:
    """The one spelling of a tracked value's key: ``workload/load/…/name`` (load ``c<clients>``, ``r<rate>`` or
    ``load``); every writer and reader (lookups, recompute, the benchmarks) builds keys here."""
    return "/".join(str(p) for p in parts)


def paired_key(workload: str, clients: int | str, name: str) -> str:
    """A paired cell's key: ``copy/c4/slowdown``."""
    return asv_key(workload, load_label(int(clients), ""), name)


def sweep_key(k: int, lookup_max: int) -> str:
    """A speculative configuration's key in the config sweep's cache: ``k4-max4``."""
    return f"k{k}-max{lookup_max}"


def _inv(v: Any) -> float:
    return 1.0 / v if isinstance(v, (int, float)) and v and math.isfinite(v) else math.nan


def asv_metrics(report: dict[str, Any], candidate: str = "ngram", reference: str = "baseline") -> dict[str, float]:
    """The tracked values of one run, keyed ``workload/cN/name``."""
    out: dict[str, float] = {}
    for s in report["summaries"]:
        k, arm = asv_key(s["workload"], load_label(s["clients"], s.get("rate", ""))), s["arm"]
        if arm not in (candidate, reference):
            continue
        for name, value in (
            ("tpot_p50_ms", s["tpot_ms"]["p50"]),
            ("tpot_p95_ms", s["tpot_ms"]["p95"]),
            ("ttft_p50_ms", s["ttft_ms"]["p50"]),
            ("ttft_p95_ms", s["ttft_ms"]["p95"]),
            ("ms_per_token", 1000.0 * _inv(s["output_tok_s"])),
            ("incorrect_fraction", 1.0 - number(s["correct_fraction"])),
            (
                "peak_memory_mib",
                s["peak_memory_mib"].get("peak_gpu_used_mib", s["peak_memory_mib"].get("peak_rss_mib")),
            ),
        ):
            out[asv_key(k, f"{name}_{arm}")] = number(value)
        if arm == candidate:
            out[asv_key(k, "rejection_rate")] = 1.0 - number(s["acceptance"].get("acceptance_rate"))
            out[asv_key(k, "verify_steps_per_token")] = _inv(s["acceptance"].get("mean_acceptance_length"))
    for c in report["comparisons"]:
        if (c["arm_a"], c["arm_b"]) != (reference, candidate):
            continue
        k, s = asv_key(c["workload"], load_label(c["clients"], c.get("rate", ""))), c["speedup"]
        out[asv_key(k, "slowdown")] = _inv(s["estimate"])
        out[asv_key(k, "goodput_loss")] = _inv(c["goodput_ratio"])
    return out


@dataclass(frozen=True, slots=True)
class Interval:
    """A tracked value's confidence interval, oriented like the value, and the blocks behind it (per-block values
    too, for the release-to-release test)."""

    low: float
    high: float
    confidence: float
    blocks: int
    block_values: tuple[float, ...] = ()
    speed_verdict: str = ""
    quality_verdict: str = ""


def asv_intervals(report: dict[str, Any], candidate: str = "ngram", reference: str = "baseline") -> dict[str, Interval]:
    """The intervals of the tracked paired ratios, keyed like :func:`asv_metrics`: the slowdown's is 1 / the
    same-work speedup's CI (ends swapped), over the blocks the comparison kept."""
    out: dict[str, Interval] = {}
    for c in report["comparisons"]:
        if (c["arm_a"], c["arm_b"]) != (reference, candidate):
            continue
        k, s = asv_key(c["workload"], load_label(c["clients"], c.get("rate", ""))), c["speedup"]
        low, high = _inv(s["high"]), _inv(s["low"])
        if math.isfinite(low) and math.isfinite(high):
            blocks = tuple(_inv(v) for v in c.get("block_speedups") or ())
            out[asv_key(k, "slowdown")] = Interval(
                low,
                high,
                float(s.get("confidence", 0.95)),
                int(s.get("blocks", 0)),
                tuple(b for b in blocks if math.isfinite(b)),
                str(c.get("speed", {}).get("verdict", "")),
                str(c.get("quality", {}).get("verdict", "")),
            )
    return out


def load_metrics(report: dict[str, Any]) -> dict[str, float]:
    """The tracked values of a load sweep, keyed ``workload/load/name``, each oriented so that a rise is bad:

    ``crossover_gap_s``     1 / the heaviest offered rate (requests/s) at which ngram still helps: the mean gap
                            between requests where speculation stops paying. A rise = ngram stops helping at a
                            lighter load. 0 when it helps at every level, all at once included; twice the lightest
                            level's gap when it helps at none (the report says so), so that case reads as a rise.
    ``capacity_loss``       baseline / ngram max sustainable load under the SLO goodput rule (NaN when either arm
                            sustains not even the lightest level).
    ``capacity_loss_latency`` the same under the latency SLOs alone (right or not). When one arm held every level,
                            all at once included, its capacity counts as the heaviest finite rate: the value is then
                            a bound (an upper bound on the loss when ngram held every level).
    ``peak_rate_loss``      baseline / ngram peak request rate from the sweep's probe.
    """
    out: dict[str, float] = {}
    for sw in report.get("sweeps", []):
        k = asv_key(sw["workload"], "load")
        helps = number(sw.get("helps_up_to"))
        lightest = min(
            (number(lv["offered"]) for lv in sw.get("levels", []) if math.isfinite(number(lv["offered"]))),
            default=math.nan,
        )
        if sw.get("helps_everywhere") or helps == math.inf:
            gap = 0.0
        elif math.isfinite(helps):
            gap = _inv(helps)
        else:  # helps at no level: twice the lightest level's gap, so the series rises instead of going n/a
            gap = 2.0 * _inv(lightest)
        out[asv_key(k, "crossover_gap_s")] = gap
        out[asv_key(k, "capacity_loss")] = _inv(sw["goodput_capacity"]["ratio"])
        out[asv_key(k, "capacity_loss_latency")] = _inv(sw["latency_capacity"]["ratio"])
        peaks = sw.get("peak_rps", {})
        out[asv_key(k, "peak_rate_loss")] = number(peaks.get("baseline")) * _inv(peaks.get("ngram"))
    return out


def group_metrics(report: dict[str, Any], candidate: str = "ngram", reference: str = "baseline") -> dict[str, float]:
    """Per-group values of a workload with groups (``report["group_decisions"]``), keyed
    ``workload/load/group/name``, oriented so that a rise is bad: ``slowdown`` (1 / the group's same-work speedup),
    ``rejection_rate`` (1 - the group's acceptance from per-request draft counts) and ``incorrect_fraction`` (of the
    candidate). The pooled row is the group ``(all)``. A small group's values are kept (its report says it claims no
    verdict)."""
    out: dict[str, float] = {}
    for d in report.get("group_decisions", []):
        if (d["arm_a"], d["arm_b"]) != (reference, candidate):
            continue
        k = asv_key(d["workload"], d["load"], d["group"])
        out[asv_key(k, "slowdown")] = _inv(d["speedup"]["estimate"])
        out[asv_key(k, "rejection_rate")] = 1.0 - number(d.get("acceptance_rate"))
        out[asv_key(k, "incorrect_fraction")] = 1.0 - number(d.get("correct_fraction_b"))
    return out


def configuration_values(
    report: dict[str, Any], reference: str, other: str
) -> tuple[dict[str, float], dict[str, Interval]]:
    """A configuration pair's values, keyed ``workload/cN/metric``: every paired change of ``other`` over
    ``reference`` (above 1: the other configuration is worse) and its 99% interval, as the run's report holds them
    (``changes``); the interval is the one ASV's columns carry."""
    values: dict[str, float] = {}
    intervals: dict[str, Interval] = {}
    for ch in report.get("changes") or []:
        if (ch["arm_a"], ch["arm_b"]) != (reference, other):
            continue
        key = asv_key(ch["workload"], ch["load"], ch["metric"])
        values[key] = number(ch["estimate"])
        low, high = number(ch["low"]), number(ch["high"])
        if math.isfinite(low) and math.isfinite(high):
            intervals[key] = Interval(low, high, float(ch["confidence"]), int(ch["blocks"]))
    return values, intervals


def lookup(cache: dict[str, Any], key: str) -> float:
    """One tracked value from a ``setup_cache`` result (``{"metrics": asv_metrics(...)}``); NaN when absent."""
    value = cache["metrics"].get(key)
    return float(value) if isinstance(value, (int, float)) else math.nan
