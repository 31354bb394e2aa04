"""Compare two runs (e.g. two vLLM versions): every comparison's speedup and verdicts, and per-arm metrics.

A speedup change is tested on the two runs' block data (Welch's t on block log speedups,
:func:`specharness.analysis.stats.ratio_change`) and judged by :func:`specharness.analysis.verdict.change_verdict`
(the one change verdict, shared with release-compare), significant only when its whole interval also lies outside
the no-difference band of run B: the block data of two runs do not see the engine-instance offset between
their engine pairs, which is what the band absorbs. Per-arm absolute metrics carry no interval across runs and are
shown with their ratio only ("n/a": absolute latencies move between runs and machines, see the README).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specharness.analysis.stats import ratio_change
from specharness.analysis.verdict import DEFAULT_MARGIN, band_edges, change_verdict
from specharness.numbers import number
from specharness.records import load_label
from specharness.reporting.report import load_report

__all__ = ["MetricChange", "compare_runs", "format_changes"]

_ARM_METRICS = (
    ("tpot_ms", "p50", "tpot_p50_ms"),
    ("ttft_ms", "p50", "ttft_p50_ms"),
    ("output_tok_s", None, "output_tok_s"),
    ("correct_fraction", None, "correct_fraction"),
)


@dataclass(frozen=True, slots=True)
class MetricChange:
    cell: str
    metric: str
    value_a: float
    value_b: float
    ratio: float
    significant: bool | None  # None: no test for this metric
    detail: str = ""


def _load(row: dict[str, Any]) -> str:
    return load_label(row["clients"], row.get("rate", ""))


def compare_runs(run_a: Path, run_b: Path) -> list[MetricChange]:
    ra, rb = load_report(run_a), load_report(run_b)
    changes: list[MetricChange] = []
    comps_a = {(c["workload"], _load(c), c["arm_a"], c["arm_b"]): c for c in ra["comparisons"]}
    for c in rb["comparisons"]:
        key = (c["workload"], _load(c), c["arm_a"], c["arm_b"])
        a = comps_a.get(key)
        if a is None:
            continue
        cell = f"{key[0]}/c{key[1]} {key[3]} vs {key[2]}"
        test = ratio_change(a["block_speedups"], c["block_speedups"])
        down, up = band_edges(float(rb["manifest"]["config"]["profile"].get("equivalence_margin") or DEFAULT_MARGIN))
        beyond_band = test.low > up or test.high < down  # the band absorbs the engine-instance offset between runs
        verdict = change_verdict(test.low, test.high, significant=test.significant and beyond_band)
        sig = None if verdict == "not tested" else verdict in ("regressed", "improved")
        detail = (
            f"change {test.change:.3f} [{test.low:.3f}, {test.high:.3f}], Welch p={test.pvalue:.3f}; verdicts "
            f"{a['speed']['verdict']}/{a['quality']['verdict']} -> {c['speed']['verdict']}/{c['quality']['verdict']}"
        )
        va, vb = number(a["speedup"]["estimate"]), number(c["speedup"]["estimate"])
        changes.append(MetricChange(cell, "speedup", va, vb, vb / va if va else math.nan, sig, detail))
    arms_a = {(s["workload"], _load(s), s["arm"]): s for s in ra["summaries"]}
    for s in rb["summaries"]:
        a = arms_a.get((s["workload"], _load(s), s["arm"]))
        if a is None:
            continue
        for field, sub, name in _ARM_METRICS:
            va = number(a[field][sub] if sub else a[field])
            vb = number(s[field][sub] if sub else s[field])
            changes.append(
                MetricChange(f"{s['workload']}/{_load(s)}/{s['arm']}", name, va, vb, vb / va if va else math.nan, None)
            )
    return changes


def format_changes(changes: list[MetricChange], label_a: str, label_b: str) -> str:
    rows = [f"{'cell':<40} {'metric':<18} {label_a[:14]:>14} {label_b[:14]:>14} {'ratio':>7}  significant"]
    for c in changes:
        sig = "n/a" if c.significant is None else ("yes" if c.significant else "no")
        rows.append(
            f"{c.cell:<40} {c.metric:<18} {c.value_a:>14.3f} {c.value_b:>14.3f} {c.ratio:>7.3f}  {sig}"
            f"{'  ' + c.detail if c.detail else ''}"
        )
    return "\n".join(rows)
