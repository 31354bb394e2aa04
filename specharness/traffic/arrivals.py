"""Open-loop arrival schedules: when each request of a cell is sent, fixed before anything is sent.

:func:`schedule` draws a cell's send offsets from an :class:`ArrivalSpec` (rate, burstiness, seed) as gamma gaps;
:func:`block_seed` derives each cell's seed from the run's; :func:`parse_rates` reads ``--rates``.
Rules: docs/workloads.md#open-loop-arrivals.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass

import numpy as np

from specharness._errors import ConfigError

__all__ = ["ArrivalSpec", "block_seed", "parse_rates", "schedule"]

_RATE_HINT = "a rate is requests per second, positive, or inf (all at once); e.g. --rates 0.5,2,inf"


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class ArrivalSpec:
    """One open-loop cell's arrivals: ``rate_rps`` requests per second (``math.inf``: all at once), gamma gaps of
    shape ``burstiness`` (1 = Poisson), drawn from ``seed``; at most ``max_concurrency`` requests in flight (None:
    no cap; a request that waits for a slot is sent late and counted late). Invalid values raise
    :class:`~specharness.ConfigError` naming the CLI flag."""

    rate_rps: float
    burstiness: float = 1.0
    seed: int = 0
    max_concurrency: int | None = None

    def __post_init__(self) -> None:
        r = self.rate_rps
        if not _is_number(r) or math.isnan(r) or r <= 0:
            raise ConfigError(f"--rates {r!r}: {_RATE_HINT}")
        b = self.burstiness
        if not _is_number(b) or not math.isfinite(b) or b <= 0:
            raise ConfigError(
                f"--burstiness {b!r}: must be a positive finite number (1 = Poisson arrivals, "
                f"below 1 burstier, above 1 more regular)"
            )
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ConfigError(f"--arrival-seed {self.seed!r}: must be a non-negative integer")
        m = self.max_concurrency
        if m is not None and (not isinstance(m, int) or isinstance(m, bool) or m < 1):
            raise ConfigError(f"--max-concurrency {m!r}: must be a positive integer (leave it out for no cap)")
        object.__setattr__(self, "rate_rps", float(r))
        object.__setattr__(self, "burstiness", float(b))

    @property
    def mean_gap_s(self) -> float:
        """Expected gap between sends, 1/rate (0 for rate inf)."""
        return 1.0 / self.rate_rps

    @property
    def gap_cv(self) -> float:
        """Coefficient of variation of the gaps, 1/sqrt(burstiness) (NaN for rate inf: there are no gaps)."""
        return 1.0 / math.sqrt(self.burstiness) if math.isfinite(self.rate_rps) else math.nan


def parse_rates(text: str) -> tuple[float, ...]:
    """``"0.5,2,inf"`` -> ``(0.5, 2.0, inf)``, in the order given; a bad list raises a one-line
    :class:`~specharness.ConfigError` naming ``--rates``. Empty items, NaN, zero, negatives and repeats are refused
    (a repeat would be two cells with one key)."""
    items = [x.strip() for x in text.split(",")]
    if not any(items):
        raise ConfigError(f"--rates {text!r}: no rate given; {_RATE_HINT}")
    rates: list[float] = []
    for item in items:
        if not item:
            raise ConfigError(f"--rates {text!r}: empty item between commas; {_RATE_HINT}")
        try:
            rate = float(item)
        except ValueError:
            raise ConfigError(f"--rates {text!r}: {item!r} is not a number; {_RATE_HINT}") from None
        if math.isnan(rate) or rate <= 0:
            raise ConfigError(f"--rates {text!r}: {item!r} is not a positive rate; {_RATE_HINT}")
        if rate in rates:
            raise ConfigError(f"--rates {text!r}: {item!r} is given twice; each rate is one cell")
        rates.append(rate)
    return tuple(rates)


def schedule(spec: ArrivalSpec, n: int) -> tuple[float, ...]:
    """Send offsets in seconds from the cell's start for ``n`` requests, non-decreasing, the first at 0.

    The n - 1 gaps are i.i.d. Gamma(shape=k, scale=1/(k·rate)) with k = ``spec.burstiness``, drawn by
    ``numpy.random.default_rng(spec.seed).gamma``: mean gap 1/rate, CV 1/sqrt(k) (k = 1: exponential gaps, a Poisson
    process). So the expected span of the schedule is (n - 1)/rate. Rate inf gives n zeros. The same spec and n
    give the same offsets, and ``schedule(spec, m)`` is a prefix of ``schedule(spec, n)`` for m <= n.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"schedule needs a non-negative request count, got {n!r}")
    if n == 0:
        return ()
    if math.isinf(spec.rate_rps):
        return (0.0,) * n
    rng = np.random.default_rng(spec.seed)
    gaps = rng.gamma(shape=spec.burstiness, scale=1.0 / (spec.burstiness * spec.rate_rps), size=n - 1)
    offsets = np.concatenate(([0.0], np.cumsum(gaps)))
    return tuple(float(x) for x in offsets)


def block_seed(base_seed: int, block: int, workload: str, load: int | float) -> int:
    """The arrival seed of one cell: both arms of a block get it, every block (and workload, and load) its own.

    ``load`` is the cell's client count or rate in requests per second (``2`` and ``2.0`` are different loads). The
    seed is the first 63 bits of SHA-256 over a JSON text of the four values (the float as its ``repr``), so it is
    the same in every process and Python version (Python's ``hash()`` of a str is not) and fits a signed 64-bit
    journal or DataFrame column.
    """
    for name, value in (("base_seed", base_seed), ("block", block)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"block_seed: {name} must be an int, got {value!r}")
    if not _is_number(load):
        raise TypeError(f"block_seed: load must be a client count or a rate, got {load!r}")
    text = json.dumps(["specharness-arrivals-v1", base_seed, block, str(workload), repr(load)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1
