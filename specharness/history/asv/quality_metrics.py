"""The values the ASV quality benchmarks track (``benchmarks/bench_quality.py``), each a pure function of a report.

Like :mod:`specharness.history.asv.metrics`, every value is oriented so that a *rise* is bad (ASV flags rises):

``structured_metrics``  per arm (baseline, ngram) and check type (``json_schema``, ``tool_call``, and ``all``
                        pooled): ``invalid_fraction`` (answers that are no usable structured output: no tool call to
                        the function expected, not JSON, or off the schema, over all structured requests; see
                        :class:`specharness.analysis.structured_validity.StructuredValidity`) and ``rejected_fraction``
                        (requests the server rejected or that failed). Keys ``<workload>/<load>/<check>/<name>_<arm>``.
``distribution_metrics`` per workload of a ``specharness sampled`` run (its ``sampled.json``), from the comparisons
                        pooled over every repetition: ``statistics_differing`` (how many of the three statistics —
                        first token, length, pass rate — are flagged *differs* between ngram and baseline, 0 to 3),
                        ``statistics_differing_aa`` (the same for the A/A pair: a rise is a noisier check),
                        ``control_missed`` (1 when the positive control, the baseline at another temperature, was
                        *not* flagged: the check lost the power it must have), and
                        ``detectable_length_difference_tokens`` (the smallest mean output-length difference between
                        ngram and baseline the run could have detected, 80% power: a rise is a loss of power).
                        Keys ``<workload>/<name>``.

A value that cannot be computed is NaN (ASV: "n/a"): a check type the run did not send, a statistic with no data,
failures whose stage was not kept (``--keep-text hash|none``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from specharness.analysis.structured_validity import StructuredValidity
from specharness.history.asv.metrics import asv_key

__all__ = ["ALL_CHECKS", "distribution_metrics", "structured_metrics"]

ALL_CHECKS = "all"  # the pooled row over every structured check type
_KEYS = ("workload", "load", "arm", "check")
_COUNTS = tuple(f.name for f in fields(StructuredValidity) if f.name not in _KEYS)


def _num(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


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
        mde = _num(length.get("mde"))
        out[asv_key(workload, "detectable_length_difference_tokens")] = mde if math.isfinite(mde) else math.nan
    return out
