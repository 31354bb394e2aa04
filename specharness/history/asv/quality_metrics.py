"""The values the ASV quality benchmarks track (``benchmarks/bench_quality.py``), each a pure function of a report.

:func:`structured_metrics` (invalid and rejected fractions per arm and check type) and :func:`distribution_metrics`
(statistics flagged, the control's miss, the detectable length difference), every value oriented so that a rise is
bad. Keys and meanings: docs/asv-site.md#the-quality-benchmarks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from specharness.analysis.structured_validity import StructuredValidity
from specharness.history.asv.metrics import asv_key
from specharness.numbers import number

__all__ = ["ALL_CHECKS", "distribution_metrics", "structured_metrics"]

ALL_CHECKS = "all"  # the pooled row over every structured check type
_KEYS = ("workload", "load", "arm", "check")
_COUNTS = tuple(f.name for f in fields(StructuredValidity) if f.name not in _KEYS)


def structured_metrics(
    report: Mapping[str, Any], candidate: str = "ngram", reference: str = "baseline"
) -> dict[str, float]:
    """The structured-validity values of one paired run. ``report["structured_validity"]`` holds one
    :meth:`~specharness.analysis.structured_validity.StructuredValidity.to_dict` per (workload, load, arm, check type)
    (:func:`specharness.history.asv.quality_suite.structured_report` builds it from a run folder); the fractions are
    :class:`~specharness.analysis.structured_validity.StructuredValidity`'s own, the ``all`` row over the summed counts."""
    pooled: dict[tuple[str, str, str, str], dict[str, int]] = {}
    for row in report.get("structured_validity", []):
        if row["arm"] not in (candidate, reference):
            continue
        for check in (row["check"], ALL_CHECKS):
            into = pooled.setdefault((row["workload"], row["load"], row["arm"], check), dict.fromkeys(_COUNTS, 0))
            for name in _COUNTS:
                into[name] += int(row.get(name, 0))
    out: dict[str, float] = {}
    for (workload, load, arm, check), counts in pooled.items():
        v = StructuredValidity(workload=workload, load=load, arm=arm, check=check, **counts)
        out[asv_key(workload, load, check, f"invalid_fraction_{arm}")] = v.invalid_fraction
        out[asv_key(workload, load, check, f"rejected_fraction_{arm}")] = v.rejected_fraction
    return out


def distribution_metrics(sampled: Mapping[str, Any]) -> dict[str, float]:
    """The distribution-check values of one ``specharness sampled`` run, from its ``sampled.json``
    (:func:`specharness.reporting.sampled_report.write_sampled_report`). A comparison that was "not compared" (no
    case in common, e.g. every request of a stream failed) gives NaN, never a reassuring 0."""
    out: dict[str, float] = {}
    for workload, entry in sampled.get("workloads", {}).items():
        verdicts = {
            stream: (entry.get(stream) or {}).get("overall") or {} for stream in ("ngram", "baseline-aa", "baseline-t")
        }

        def differing(overall: Mapping[str, Any]) -> float:
            compared = overall.get("verdict") in ("differs", "no difference detected")
            return float(len(overall.get("differs_on") or ())) if compared else math.nan

        control = verdicts["baseline-t"].get("verdict")
        length = verdicts["ngram"].get("length") or {}
        out[asv_key(workload, "statistics_differing")] = differing(verdicts["ngram"])
        out[asv_key(workload, "statistics_differing_aa")] = differing(verdicts["baseline-aa"])
        out[asv_key(workload, "control_missed")] = {"differs": 0.0, "no difference detected": 1.0}.get(
            str(control), math.nan
        )
        mde = number(length.get("mde"))
        out[asv_key(workload, "detectable_length_difference_tokens")] = mde if math.isfinite(mde) else math.nan
    return out
