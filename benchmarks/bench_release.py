"""Release pairs: at each release on the ledger, that release against the one before it in one paired run.

Baseline against baseline and ngram against ngram, side by side on one machine at one time, so a change carries no
day-to-day or run-to-run offset. Each value is this release's share of the pair (``r^(1/2)`` for the later release,
``r^(-1/2)`` for the earlier one, ``r`` the later over the earlier for the same work): ``asv compare A B`` then shows
``r`` itself with the paired 99% interval's halves in its columns (specharness.history.asv.pairs, which writes both
releases' values from the pair's record as ASV saves the result). Every value rises when the later release is worse.
``ReleasePairOverall`` holds each value over all the pair run's cells (each block's mean log ratio over the cells: the
release's change as one number, usually narrower than a cell's when the cells are about as noisy); it runs nothing
itself: the plugin writes its values from the same record when ASV saves ``ReleasePair``'s result.

``ConfigurationPair`` (defined when SPECHARNESS_ASV_CONFIGURATION names an arms file) is the same paired run for two
configurations of one release, at each release: the second over the first, its interval in ASV's columns.
"""

from specharness.history.asv.metrics import asv_key
from specharness.history.asv.pairfile import ledger_pairs
from specharness.history.asv.suite import configuration_file, configuration_pair_experiment, release_pair_experiment

from .common import (
    CLIENTS,
    METHOD_VERSION,
    SETUP_TIMEOUT_S,
    WORKLOADS,
    lookup,
    overall_placeholder,
    pair_lookup,
    started,
)


class ReleasePair:
    params = (ledger_pairs(), WORKLOADS, CLIENTS, ["baseline", "ngram"])
    param_names = ("pair", "workload", "clients", "arm")
    timeout = SETUP_TIMEOUT_S
    version = METHOD_VERSION
    number = 1
    repeat = 1

    def setup_cache(self):
        return started(self, release_pair_experiment())

    def track_time(self, cache, pair, workload, clients, arm):
        """Time for the same work (the run's same-work estimate: the common prefixes of greedy answers), this
        release's share of the pair."""
        return pair_lookup(cache, pair, workload, clients, arm, "time")

    track_time.unit = "share of the pair (higher is worse)"

    def track_ttft_p50(self, cache, pair, workload, clients, arm):
        return pair_lookup(cache, pair, workload, clients, arm, "ttft_p50")

    track_ttft_p50.unit = "share of the pair (higher is worse)"

    def track_ttft_p95(self, cache, pair, workload, clients, arm):
        return pair_lookup(cache, pair, workload, clients, arm, "ttft_p95")

    track_ttft_p95.unit = "share of the pair (higher is worse)"

    def track_tpot_p50(self, cache, pair, workload, clients, arm):
        return pair_lookup(cache, pair, workload, clients, arm, "tpot_p50")

    track_tpot_p50.unit = "share of the pair (higher is worse)"

    def track_tpot_p95(self, cache, pair, workload, clients, arm):
        return pair_lookup(cache, pair, workload, clients, arm, "tpot_p95")

    track_tpot_p95.unit = "share of the pair (higher is worse)"

    def track_goodput_loss(self, cache, pair, workload, clients, arm):
        """Correct complete output tokens per second, inverted (the earlier release's over this one's)."""
        return pair_lookup(cache, pair, workload, clients, arm, "goodput_loss")

    track_goodput_loss.unit = "share of the pair (higher is worse)"

    def track_peak_memory(self, cache, pair, workload, clients, arm):
        """Peak GPU used memory in the cell, or the server's RSS where no GPU is visible."""
        return pair_lookup(cache, pair, workload, clients, arm, "peak_memory")

    track_peak_memory.unit = "share of the pair (higher is worse)"

    def track_verify_steps_per_token(self, cache, pair, workload, clients, arm):
        """1 / mean acceptance length of the ngram engines (n/a for baseline)."""
        return pair_lookup(cache, pair, workload, clients, arm, "verify_steps_per_token")

    track_verify_steps_per_token.unit = "share of the pair (higher is worse)"

    def track_engine_failed(self, cache, pair, workload, clients, arm):
        """1 on the side of a pair whose engine failed to start (its other values then read "failed"), else 0."""
        return pair_lookup(cache, pair, workload, clients, arm, "engine_failed")

    track_engine_failed.unit = "1 = engine failed (higher is worse)"


class ReleasePairOverall:
    """Each value of a release pair over all the pair run's cells, this release's share of the pair (as
    ``ReleasePair``); written by the plugin from the pair's record, so every method here reads n/a until then."""

    params = (ledger_pairs(), ["baseline", "ngram"])
    param_names = ("pair", "arm")
    version = METHOD_VERSION
    number = 1
    repeat = 1

    def track_time(self, pair, arm):
        return overall_placeholder()

    track_time.unit = "share of the pair (higher is worse)"

    def track_ttft_p50(self, pair, arm):
        return overall_placeholder()

    track_ttft_p50.unit = "share of the pair (higher is worse)"

    def track_ttft_p95(self, pair, arm):
        return overall_placeholder()

    track_ttft_p95.unit = "share of the pair (higher is worse)"

    def track_tpot_p50(self, pair, arm):
        return overall_placeholder()

    track_tpot_p50.unit = "share of the pair (higher is worse)"

    def track_tpot_p95(self, pair, arm):
        return overall_placeholder()

    track_tpot_p95.unit = "share of the pair (higher is worse)"

    def track_goodput_loss(self, pair, arm):
        return overall_placeholder()

    track_goodput_loss.unit = "share of the pair (higher is worse)"

    def track_peak_memory(self, pair, arm):
        return overall_placeholder()

    track_peak_memory.unit = "share of the pair (higher is worse)"

    def track_verify_steps_per_token(self, pair, arm):
        return overall_placeholder()

    track_verify_steps_per_token.unit = "share of the pair (higher is worse)"


if configuration_file() is not None:

    class ConfigurationPair:
        """Two configurations of one release (SPECHARNESS_ASV_CONFIGURATION: an arms file, e.g. two speculative
        configurations or two vLLM options) in one paired run at each release: every value of the second over the
        first (above 1: the second is worse), with its paired 99% interval in ASV's columns. Without the variable
        this class is not defined."""

        params = (WORKLOADS, CLIENTS)
        param_names = ("workload", "clients")
        timeout = SETUP_TIMEOUT_S
        version = METHOD_VERSION
        number = 1
        repeat = 1

        def setup_cache(self):
            return started(self, configuration_pair_experiment())

        def _get(self, cache, workload, clients, metric):
            key = asv_key(workload, f"c{clients}", metric)
            return lookup(cache, key, self, f"track_{metric}", (workload, clients))

        def track_time(self, cache, workload, clients):
            """Time for the same work, the second configuration over the first."""
            return self._get(cache, workload, clients, "time")

        track_time.unit = "ratio (higher is worse)"

        def track_ttft_p50(self, cache, workload, clients):
            return self._get(cache, workload, clients, "ttft_p50")

        track_ttft_p50.unit = "ratio (higher is worse)"

        def track_tpot_p50(self, cache, workload, clients):
            return self._get(cache, workload, clients, "tpot_p50")

        track_tpot_p50.unit = "ratio (higher is worse)"

        def track_goodput_loss(self, cache, workload, clients):
            return self._get(cache, workload, clients, "goodput_loss")

        track_goodput_loss.unit = "ratio (higher is worse)"

        def track_peak_memory(self, cache, workload, clients):
            return self._get(cache, workload, clients, "peak_memory")

        track_peak_memory.unit = "ratio (higher is worse)"
