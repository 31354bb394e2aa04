"""The speculative configuration as its own series: num_speculative_tokens x prompt_lookup_max (copy, 1 client)."""

from specharness.history.asv.metrics import paired_key, sweep_key
from specharness.history.asv.suite import sweep_experiments

from .common import LOOKUP_MAX, METHOD_VERSION, SETUP_TIMEOUT_S, SPEC_TOKENS, lookup, started


class NgramConfigSweep:
    params = (SPEC_TOKENS, LOOKUP_MAX)
    param_names = ("num_speculative_tokens", "prompt_lookup_max")
    timeout = SETUP_TIMEOUT_S
    version = METHOD_VERSION
    number = 1
    repeat = 1

    def setup_cache(self):
        return started(self, sweep_experiments())

    def _get(self, cache, k, lookup_max, tail):
        return lookup(
            cache[sweep_key(k, lookup_max)], paired_key("copy", 1, tail), self, f"track_{tail}", (k, lookup_max)
        )

    def track_slowdown(self, cache, k, lookup_max):
        return self._get(cache, k, lookup_max, "slowdown")

    track_slowdown.unit = "ratio (higher is worse)"

    def track_rejection_rate(self, cache, k, lookup_max):
        return self._get(cache, k, lookup_max, "rejection_rate")

    track_rejection_rate.unit = "fraction (higher is worse)"

    def track_tpot_p50_ms_ngram(self, cache, k, lookup_max):
        return self._get(cache, k, lookup_max, "tpot_p50_ms_ngram")

    track_tpot_p50_ms_ngram.unit = "ms (higher is worse)"
