"""Paired baseline vs prompt-lookup (ngram) experiment on real vLLM servers, per workload and client count.

Every value is oriented so that a rise is a regression (see specharness.history.asv.suite).
"""

from specharness.history.asv.metrics import paired_key
from specharness.history.asv.suite import grid_experiment

from .common import CLIENTS, METHOD_VERSION, SETUP_TIMEOUT_S, WORKLOADS, lookup, started


class PairedNgram:
    params = (WORKLOADS, CLIENTS)
    param_names = ("workload", "clients")
    timeout = SETUP_TIMEOUT_S
    version = METHOD_VERSION
    number = 1
    repeat = 1

    def setup_cache(self):
        return started(self, grid_experiment())

    def _get(self, cache, workload, clients, tail):
        return lookup(cache, paired_key(workload, clients, tail), self, f"track_{tail}", (workload, clients))

    def track_engine_failed(self, cache, workload, clients):
        """1 when this release's engines failed to start or warm up (every other value then reads "failed"; the
        reason is in the result's notes and on the release page), else 0. A rise is the worst regression there is."""
        return 1.0 if cache.get("failed") else 0.0

    track_engine_failed.unit = "1 = engine failed (higher is worse)"

    def track_slowdown(self, cache, workload, clients):
        """1 / the same-work speedup (ngram time / baseline time for the same complete, correct requests); its 95% CI
        over blocks is in ASV's stats columns, so ``asv compare`` calls overlapping intervals not significant."""
        return self._get(cache, workload, clients, "slowdown")

    track_slowdown.unit = "ratio (higher is worse)"

    def track_goodput_loss(self, cache, workload, clients):
        """baseline goodput / ngram goodput (correct complete output tokens per second)."""
        return self._get(cache, workload, clients, "goodput_loss")

    track_goodput_loss.unit = "ratio (higher is worse)"

    def track_tpot_p50_ms_ngram(self, cache, workload, clients):
        return self._get(cache, workload, clients, "tpot_p50_ms_ngram")

    track_tpot_p50_ms_ngram.unit = "ms (higher is worse)"

    def track_tpot_p50_ms_baseline(self, cache, workload, clients):
        return self._get(cache, workload, clients, "tpot_p50_ms_baseline")

    track_tpot_p50_ms_baseline.unit = "ms (higher is worse)"

    def track_tpot_p95_ms_ngram(self, cache, workload, clients):
        return self._get(cache, workload, clients, "tpot_p95_ms_ngram")

    track_tpot_p95_ms_ngram.unit = "ms (higher is worse)"

    def track_tpot_p95_ms_baseline(self, cache, workload, clients):
        return self._get(cache, workload, clients, "tpot_p95_ms_baseline")

    track_tpot_p95_ms_baseline.unit = "ms (higher is worse)"

    def track_ttft_p50_ms_ngram(self, cache, workload, clients):
        return self._get(cache, workload, clients, "ttft_p50_ms_ngram")

    track_ttft_p50_ms_ngram.unit = "ms (higher is worse)"

    def track_ttft_p50_ms_baseline(self, cache, workload, clients):
        return self._get(cache, workload, clients, "ttft_p50_ms_baseline")

    track_ttft_p50_ms_baseline.unit = "ms (higher is worse)"

    def track_ttft_p95_ms_ngram(self, cache, workload, clients):
        return self._get(cache, workload, clients, "ttft_p95_ms_ngram")

    track_ttft_p95_ms_ngram.unit = "ms (higher is worse)"

    def track_ttft_p95_ms_baseline(self, cache, workload, clients):
        return self._get(cache, workload, clients, "ttft_p95_ms_baseline")

    track_ttft_p95_ms_baseline.unit = "ms (higher is worse)"

    def track_ms_per_token_ngram(self, cache, workload, clients):
        return self._get(cache, workload, clients, "ms_per_token_ngram")

    track_ms_per_token_ngram.unit = "ms (higher is worse)"

    def track_ms_per_token_baseline(self, cache, workload, clients):
        return self._get(cache, workload, clients, "ms_per_token_baseline")

    track_ms_per_token_baseline.unit = "ms (higher is worse)"

    def track_rejection_rate(self, cache, workload, clients):
        """1 - acceptance rate of the ngram drafts."""
        return self._get(cache, workload, clients, "rejection_rate")

    track_rejection_rate.unit = "fraction (higher is worse)"

    def track_verify_steps_per_token(self, cache, workload, clients):
        """1 / mean acceptance length of the ngram arm."""
        return self._get(cache, workload, clients, "verify_steps_per_token")

    track_verify_steps_per_token.unit = "verify steps per token (higher is worse)"

    def track_incorrect_fraction_ngram(self, cache, workload, clients):
        return self._get(cache, workload, clients, "incorrect_fraction_ngram")

    track_incorrect_fraction_ngram.unit = "fraction (higher is worse)"

    def track_incorrect_fraction_baseline(self, cache, workload, clients):
        return self._get(cache, workload, clients, "incorrect_fraction_baseline")

    track_incorrect_fraction_baseline.unit = "fraction (higher is worse)"

    def track_peak_memory_mib_ngram(self, cache, workload, clients):
        """Peak GPU used memory during the cell, or the server's RSS where no GPU is visible."""
        return self._get(cache, workload, clients, "peak_memory_mib_ngram")

    track_peak_memory_mib_ngram.unit = "MiB (higher is worse)"

    def track_peak_memory_mib_baseline(self, cache, workload, clients):
        return self._get(cache, workload, clients, "peak_memory_mib_baseline")

    track_peak_memory_mib_baseline.unit = "MiB (higher is worse)"
