"""Answers that must not change, per vLLM release: structured-output validity and the sampled distribution check.

The experiments and their designs live in specharness.history.asv.quality_suite, the values in
specharness.history.asv.quality_metrics; every value is oriented so that a rise is a regression.
"""

from specharness.history.asv.method import METHOD_VERSION
from specharness.history.asv.metrics import asv_key
from specharness.history.asv.quality_suite import (
    SAMPLED_GRID,
    STRUCTURED_GRID,
    sampled_experiment,
    structured_experiment,
)

from .common import SETUP_TIMEOUT_S, lookup, started


class StructuredOutput:
    """The built-in structured workload (JSON-schema answers and forced tool calls), baseline vs ngram, greedy, per
    check type (``all`` pools both)."""

    params = (STRUCTURED_GRID,)
    param_names = ("check",)
    timeout = SETUP_TIMEOUT_S
    version = METHOD_VERSION
    number = 1
    repeat = 1

    def setup_cache(self):
        return started(self, structured_experiment())

    def _get(self, cache, check, name):
        return lookup(cache, asv_key(cache.get("prefix", ""), check, name), self, f"track_{name}", (check,))

    def track_invalid_fraction_ngram(self, cache, check):
        """Share of ngram's structured requests whose output is unusable: no tool call to the function expected,
        not JSON, or off the schema (an answer cut at max_tokens included)."""
        return self._get(cache, check, "invalid_fraction_ngram")

    track_invalid_fraction_ngram.unit = "fraction (higher is worse)"

    def track_invalid_fraction_baseline(self, cache, check):
        """The same share for the baseline (the engine's own constrained decoding, without speculation)."""
        return self._get(cache, check, "invalid_fraction_baseline")

    track_invalid_fraction_baseline.unit = "fraction (higher is worse)"

    def track_rejected_fraction_ngram(self, cache, check):
        """Share of ngram's structured requests the server rejected (HTTP 4xx) or that failed or did not finish."""
        return self._get(cache, check, "rejected_fraction_ngram")

    track_rejected_fraction_ngram.unit = "fraction (higher is worse)"

    def track_rejected_fraction_baseline(self, cache, check):
        """The same share for the baseline."""
        return self._get(cache, check, "rejected_fraction_baseline")

    track_rejected_fraction_baseline.unit = "fraction (higher is worse)"


class SampledDistribution:
    """The distribution check under sampling (specharness sampled): ngram against the baseline, with an A/A pair and
    a positive control (the baseline at another temperature) in the same run, per workload."""

    params = (SAMPLED_GRID,)
    param_names = ("workload",)
    timeout = SETUP_TIMEOUT_S
    version = METHOD_VERSION
    number = 1
    repeat = 1

    def setup_cache(self):
        return started(self, sampled_experiment())

    def _get(self, cache, workload, name):
        return lookup(cache, asv_key(workload, name), self, f"track_{name}", (workload,))

    def track_statistics_differing(self, cache, workload):
        """How many of first token, output length and pass rate differ between ngram and baseline (0 to 3; each
        test at 0.05/3, pooled over the run's repetitions)."""
        return self._get(cache, workload, "statistics_differing")

    track_statistics_differing.unit = "statistics (higher is worse)"

    def track_statistics_differing_aa(self, cache, workload):
        """The same count for the A/A pair (two baseline streams): a rise is a check that cries wolf."""
        return self._get(cache, workload, "statistics_differing_aa")

    track_statistics_differing_aa.unit = "statistics (higher is worse)"

    def track_control_missed(self, cache, workload):
        """1 when the positive control (the baseline at another temperature) was not flagged: the check lost the
        power it must have; 0 when it was."""
        return self._get(cache, workload, "control_missed")

    track_control_missed.unit = "1 = missed (higher is worse)"

    def track_detectable_length_difference_tokens(self, cache, workload):
        """The smallest mean output-length difference between ngram and baseline the run could detect (80% power):
        a rise is a loss of power (a 'no difference detected' then rules out less)."""
        return self._get(cache, workload, "detectable_length_difference_tokens")

    track_detectable_length_difference_tokens.unit = "tokens (higher is worse)"
