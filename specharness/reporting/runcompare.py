"""Compare two runs (e.g. two vLLM versions): the same metrics side by side with their ratio.

A speedup difference is called significant when the two runs' 95% CIs do not overlap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from specharness.reporting.report import load_report

__all__ = ["MetricChange", "compare_runs", "format_changes"]


@dataclass(frozen=True, slots=True)
class MetricChange:
    cell: str
    metric: str
    value_a: float
    value_b: float
    ratio: float
    significant: bool | None  # None: no CI for this metric


def compare_runs(run_a: Path, run_b: Path) -> list[MetricChange]:
    ra, rb = load_report(run_a), load_report(run_b)
    changes: list[MetricChange] = []
    comps_a = {(c["workload"], c["clients"], c["arm_a"], c["arm_b"]): c for c in ra["comparisons"]}
    for c in rb["comparisons"]:
        key = (c["workload"], c["clients"], c["arm_a"], c["arm_b"])
        if key not in comps_a:
            continue
        a = comps_a[key]
        sig: bool | None = None
        if all(isinstance(x, float) for x in (a["speedup_ci_low"], a["speedup_ci_high"], c["speedup_ci_low"], c["speedup_ci_high"])):
            sig = a["speedup_ci_high"] < c["speedup_ci_low"] or c["speedup_ci_high"] < a["speedup_ci_low"]
        changes.append(_change(f"{key[0]}/c{key[1]} {key[3]} vs {key[2]}", "speedup", a["speedup"], c["speedup"], sig))
    ma, mb = ra["metrics"], rb["metrics"]
    for key in sorted(set(ma) & set(mb)):
        if key.endswith(("/tpot_p50_ms", "/output_tok_s", "/correct_fraction", "/acceptance_rate")):
            cell, _, metric = key.rpartition("/")
            changes.append(_change(cell, metric, ma[key], mb[key], None))
    return changes


def _num(v: object) -> float:
    return float(v) if isinstance(v, (int, float)) else math.nan


def _change(cell: str, metric: str, a: object, b: object, significant: bool | None) -> MetricChange:
    va, vb = _num(a), _num(b)
    return MetricChange(cell, metric, va, vb, vb / va if va else math.nan, significant)


def format_changes(changes: list[MetricChange], label_a: str, label_b: str) -> str:
    rows = [f"{'cell':<40} {'metric':<18} {label_a[:14]:>14} {label_b[:14]:>14} {'ratio':>7}  significant"]
    for c in changes:
        sig = "n/a" if c.significant is None else ("yes" if c.significant else "no")
        rows.append(f"{c.cell:<40} {c.metric:<18} {c.value_a:>14.3f} {c.value_b:>14.3f} {c.ratio:>7.3f}  {sig}")
    return "\n".join(rows)
