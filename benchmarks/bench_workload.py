"""Your own traffic as its own series: the workload file named in SPECHARNESS_ASV_WORKLOAD, decided per group.

    SPECHARNESS_ASV_WORKLOAD=mine.jsonl asv run --bench UserWorkload ...

Without the variable this module defines no benchmark. Every value is oriented so that a rise is a regression
(see specharness.history.asv.metrics.group_metrics); the group ``(all)`` is the pooled cell.
"""

from specharness.history.asv.metrics import asv_key
from specharness.history.asv.suite import user_groups, user_workload_experiment

from .common import METHOD_VERSION, SETUP_TIMEOUT_S, lookup, started

_GROUPS = user_groups()

if _GROUPS:

    class UserWorkload:
        params = (_GROUPS,)
        param_names = ("group",)
        timeout = SETUP_TIMEOUT_S
        version = METHOD_VERSION
        number = 1
        repeat = 1

        def setup_cache(self):
            return started(self, user_workload_experiment())

        def _get(self, cache, group, tail):
            return lookup(cache, asv_key(cache.get("prefix", ""), group, tail), self, f"track_{tail}", (group,))

        def track_slowdown(self, cache, group):
            """1 / the group's same-work speedup of ngram over baseline (above 1: ngram is slower)."""
            return self._get(cache, group, "slowdown")

        track_slowdown.unit = "ratio (higher is worse)"

        def track_rejection_rate(self, cache, group):
            """1 - the group's acceptance rate (per-request draft counts; n/a where the engine reports none)."""
            return self._get(cache, group, "rejection_rate")

        track_rejection_rate.unit = "fraction (higher is worse)"

        def track_incorrect_fraction(self, cache, group):
            """Share of the group's ngram answers that are not right."""
            return self._get(cache, group, "incorrect_fraction")

        track_incorrect_fraction.unit = "fraction (higher is worse)"
