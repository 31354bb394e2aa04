"""Production load: a saturation sweep (open-loop Poisson levels from light to past saturation) per workload.

Every value is oriented so that a rise is a regression (see specharness.history.asv.metrics.load_metrics).
"""

from specharness.history.asv.metrics import asv_key
from specharness.history.asv.suite import load_sweep_experiment

from .common import METHOD_VERSION, SETUP_TIMEOUT_S, WORKLOADS, lookup, started


class LoadSweep:
    params = (WORKLOADS,)
    param_names = ("workload",)
    timeout = SETUP_TIMEOUT_S
    version = METHOD_VERSION
    number = 1
    repeat = 1

    def setup_cache(self):
        return started(self, load_sweep_experiment())

    def track_crossover_gap_s(self, cache, workload):
        """1 / the heaviest rate at which ngram still helps (s between requests); a rise: it stops paying sooner."""
        return lookup(cache, asv_key(workload, "load", "crossover_gap_s"), self, "track_crossover_gap_s", (workload,))

    track_crossover_gap_s.unit = "seconds"

    def track_capacity_loss(self, cache, workload):
        """baseline / ngram max sustainable load under the SLO goodput rule (above 1: ngram sustains less)."""
        return lookup(cache, asv_key(workload, "load", "capacity_loss"), self, "track_capacity_loss", (workload,))

    track_capacity_loss.unit = "ratio (higher is worse)"

    def track_capacity_loss_latency(self, cache, workload):
        """baseline / ngram max load within the latency SLOs, right or not (above 1: ngram sustains less)."""
        return lookup(
            cache, asv_key(workload, "load", "capacity_loss_latency"), self, "track_capacity_loss_latency", (workload,)
        )

    track_capacity_loss_latency.unit = "ratio (higher is worse)"

    def track_peak_rate_loss(self, cache, workload):
        """baseline / ngram peak request rate, all requests at once (above 1: ngram peaks lower)."""
        return lookup(cache, asv_key(workload, "load", "peak_rate_loss"), self, "track_peak_rate_loss", (workload,))

    track_peak_rate_loss.unit = "ratio (higher is worse)"
