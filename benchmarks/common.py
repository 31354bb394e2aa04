"""Grids and the lookup the benchmark classes share (the logic lives in specharness.history.asv.suite).

``lookup`` is the one way a ``track_*`` method reads its value: from the ``setup_cache`` result, leaving a note
with the value's interval for the ASV plugin (specharness.history.asv.plugin), and failing the way ASV shows as
"failed" when the release's engine could not start or warm up.
"""

import os

from specharness.history.asv.method import METHOD_VERSION
from specharness.history.asv.metrics import lookup as _metric
from specharness.history.asv.notes import reset_notes, value_note, write_note
from specharness.history.asv.pairfile import pair_value_key
from specharness.history.asv.suite import ASV_GRID, SWEEP_GRID

WORKLOADS, CLIENTS = ASV_GRID
SPEC_TOKENS, LOOKUP_MAX = SWEEP_GRID
SETUP_TIMEOUT_S = 5400

__all__ = [
    "CLIENTS",
    "LOOKUP_MAX",
    "METHOD_VERSION",
    "SETUP_TIMEOUT_S",
    "SPEC_TOKENS",
    "WORKLOADS",
    "ReleaseFailed",
    "lookup",
    "overall_placeholder",
    "pair_lookup",
    "started",
]


class ReleaseFailed(RuntimeError):
    """The release's engine failed to start or warm up: every value of the experiment is a failure, not a number."""


def _asv_class(bench):
    """ASV's name of a benchmark class: ``bench_paired.PairedNgram``."""
    return f"{type(bench).__module__.removeprefix('benchmarks.')}.{type(bench).__name__}"


def _asv_name(bench, method):
    return f"{_asv_class(bench)}.{method}"


def _commit():
    """The commit this value belongs to; None in an existing environment, where ASV_COMMIT names a branch head and
    ``--set-commit-hash`` the commit the result is saved under (one commit per run there)."""
    return None if os.environ.get("ASV_ENV_TYPE") == "existing" else os.environ.get("ASV_COMMIT")


def started(bench, result):
    """Call at the end of ``setup_cache``: forget the class's notes of an earlier experiment in this environment."""
    reset_notes(_asv_class(bench))
    return result


def lookup(cache, key, bench=None, method="", params=()):
    """The tracked value for ``key``; with ``bench``/``method``/``params`` given, note its interval (or the
    release's failure) for ASV's stats columns. A failed release raises :class:`ReleaseFailed` (ASV: "failed")."""
    failed = cache.get("failed")
    if bench is not None:
        write_note(
            value_note(
                _asv_name(bench, method),
                tuple(params),
                _commit(),
                (cache.get("intervals") or {}).get(key),
                source=cache.get("run_dir", ""),
                failed=failed,
                harness=cache.get("harness", ""),
                setup=cache.get("setup", ""),
            )
        )
    if failed:
        raise ReleaseFailed(failed)
    return _metric(cache, key)


def overall_placeholder():
    """A ``ReleasePairOverall`` value before the plugin writes the pair record's (NaN: ASV's n/a)."""
    return float("nan")


def pair_lookup(cache, pair, workload, clients, arm, metric):
    """A release pair's value for this release (NaN for another pair, or where this release's engine failed in the
    pair: ``track_engine_failed`` says so); the whole pair run failing is :class:`ReleaseFailed` (ASV: "failed").
    The plugin writes both releases' values and intervals from the pair's record (specharness.history.asv.pairs), so
    no note is left here."""
    if cache.get("failed") and cache.get("pair") == pair:
        raise ReleaseFailed(cache["failed"])
    value = cache.get("metrics", {}).get(pair_value_key(pair, workload, clients, arm, metric), float("nan"))
    return float("nan") if value is None else value
