"""Arm B against arm A in one (workload, clients) cell: pair the requests, compare the same work, judge both ways.

Rules: docs/method.md#the-speed-estimate-pair-by-pair. Submodules, each importing only those above it:
- ``records``: the rules, pair counts, each pair's work, what the estimate stands on, both verdicts (the records)
- ``classify``: how the pairs split (:func:`classify`) and the old rules' per-block speedups over them
- ``work``: each pair's work: common prefixes (:func:`prefix_work`) or time per output token (:func:`sampled_work`)
- ``logs``: per-block log speedups from the pairs' work (:func:`speed_block_logs`)
- ``speed``: the speed estimate and verdict (:func:`speed_from_pairs`; pairs cut at the cap never carry a *helps*)
- ``compare``: :func:`compare_arms`, both verdicts and the throughput interval for one cell
"""

from __future__ import annotations

from specharness.analysis.comparison.compare import compare_arms
from specharness.analysis.comparison.logs import speed_block_logs
from specharness.analysis.comparison.records import ComparisonRules, PairCounts, PairedComparison, PairWork, SpeedWork
from specharness.analysis.comparison.speed import speed_from_pairs
from specharness.analysis.comparison.work import prefix_work, sampled_work, time_to_token_s

__all__ = [
    "ComparisonRules",
    "PairCounts",
    "PairWork",
    "PairedComparison",
    "SpeedWork",
    "compare_arms",
    "prefix_work",
    "sampled_work",
    "speed_block_logs",
    "speed_from_pairs",
    "time_to_token_s",
]
