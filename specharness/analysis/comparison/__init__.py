"""Arm B against arm A in one (workload, clients) cell: pair the requests, compare the same work, judge both ways.

Rules: docs/method.md#the-speed-estimate-pair-by-pair. Submodules, each importing only those above it:
- ``records``: the rules, pair counts, each pair's work, what the estimate stands on, both verdicts (the records)
- ``classify``: how the pairs split (:func:`classify`) and the old rules' per-block speedups over them
- ``work``: each pair's work: common prefixes (:func:`prefix_work`) or time per output token (:func:`sampled_work`)
- ``logs``: per-block log speedups from the pairs' work (:func:`speed_block_logs`)
- ``speed``: the speed estimate and verdict (:func:`speed_from_pairs`; pairs cut at the cap never carry a *helps*)
- ``compare``: :func:`compare_arms`, both verdicts and the throughput interval for one cell

``_classify`` and ``_block_log_speedups`` are the old private names of ``classify.classify`` and
``classify.block_log_speedups``, kept for the simulation and the tests that import them from here.
"""

from __future__ import annotations

from specharness.analysis.comparison.classify import block_log_speedups as _block_log_speedups
from specharness.analysis.comparison.classify import classify as _classify
from specharness.analysis.comparison.compare import compare_arms
from specharness.analysis.comparison.logs import speed_block_logs
from specharness.analysis.comparison.records import ComparisonRules, PairCounts, PairedComparison, PairWork, SpeedWork
from specharness.analysis.comparison.speed import speed_from_pairs
from specharness.analysis.comparison.work import prefix_work, sampled_work, time_to_token_s
from specharness.analysis.pairing import pair_requests

__all__ = [
    "ComparisonRules",
    "PairCounts",
    "PairWork",
    "PairedComparison",
    "SpeedWork",
    "_block_log_speedups",
    "_classify",
    "compare_arms",
    "pair_requests",
    "prefix_work",
    "sampled_work",
    "speed_block_logs",
    "speed_from_pairs",
    "time_to_token_s",
]
