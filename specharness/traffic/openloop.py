"""Send a cell's requests open-loop: each at its scheduled offset, whatever the earlier ones are doing.

:func:`run_open_loop` knows nothing of HTTP: the caller's ``send(seq, item, scheduled_s, lateness_s)`` sends and
records one request. Times come from the event loop's clock (``loop.time()``), measured from one start instant, so
a late wake-up never shifts the sends after it (no drift). A send is never early and never dropped; a request that
waits for a ``max_concurrency`` slot, or for a busy event loop, is sent late and counted late in
:class:`OpenLoopStats`.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

__all__ = [
    "DEFAULT_LATE_TOLERANCE_S",
    "DEFAULT_MIN_ON_TIME_FRACTION",
    "OpenLoopStats",
    "SendFn",
    "delivered",
    "run_open_loop",
]

T = TypeVar("T")

SendFn = Callable[[int, T, float, float], Awaitable[None]]
"""``send(seq, item, scheduled_s, lateness_s)``: send and record request ``seq``; ``scheduled_s`` is its offset from
the cell's start and ``lateness_s`` how late it is being sent (>= 0), both to be journaled on its record."""

DEFAULT_LATE_TOLERANCE_S = 0.005
DEFAULT_MIN_ON_TIME_FRACTION = 0.95


STRAY_LATENESS_FACTOR = 4.0  # one late request up to this many tolerances late is a stray wake-up, not a lag


def delivered(
    late_requests: int,
    requests: int,
    max_lateness_s: float,
    late_tolerance_s: float = DEFAULT_LATE_TOLERANCE_S,
    min_on_time_fraction: float = DEFAULT_MIN_ON_TIME_FRACTION,
) -> bool:
    """The one rule for "the cell's load was delivered": at most ``1 - min_on_time_fraction`` of its requests late;
    or a single late request no more than ``STRAY_LATENESS_FACTOR`` tolerances late (20 ms by default), so one stray
    wake-up (a GC pause) in a small cell does not fail it while a client that keeps falling behind, or one far-late
    send, does. No requests: not delivered."""
    if requests <= 0:
        return False
    if late_requests <= math.floor((1.0 - min_on_time_fraction) * requests + 1e-9):
        return True
    return late_requests == 1 and max_lateness_s <= STRAY_LATENESS_FACTOR * late_tolerance_s


@dataclass(frozen=True, slots=True)
class OpenLoopStats:
    """How faithfully a schedule was delivered: per request the scheduled and the actual send offset (seconds from
    the cell's start, event-loop clock), and what follows from them.

    ``lateness_s`` = actual - scheduled per request (never negative: a send is never early). A request is *on time*
    when its lateness is at most ``late_tolerance_s``. ``p95_lateness_s`` is numpy's linear-interpolation 95th
    percentile. ``delivered`` says the offered load was the scheduled one (:func:`delivered`): at least
    ``min_on_time_fraction`` of the requests on time, or a single stray late request. The default 0.95 tolerates the odd late wake-up every client machine has (a GC pause, the loop
    busy parsing many streams at once) while failing a client that cannot keep the rate, or a ``max_concurrency``
    cap that binds: lateness that is systematic, not occasional. Latency then measured from the actual send
    understates what users at the scheduled rate would see (coordinated omission). With no requests the fractions
    and lateness figures are NaN and ``delivered`` is False.
    """

    scheduled_s: tuple[float, ...]
    actual_s: tuple[float, ...]
    late_tolerance_s: float = DEFAULT_LATE_TOLERANCE_S
    min_on_time_fraction: float = DEFAULT_MIN_ON_TIME_FRACTION
    peak_in_flight: int = 0
    requests: int = field(init=False)
    scheduled_duration_s: float = field(init=False)
    lateness_s: tuple[float, ...] = field(init=False)
    on_time_fraction: float = field(init=False)
    late_requests: int = field(init=False)
    max_lateness_s: float = field(init=False)
    p95_lateness_s: float = field(init=False)
    delivered: bool = field(init=False)

    def __post_init__(self) -> None:
        scheduled = tuple(float(x) for x in self.scheduled_s)
        actual = tuple(float(x) for x in self.actual_s)
        if len(scheduled) != len(actual):
            raise ValueError(f"{len(scheduled)} scheduled times but {len(actual)} actual times")
        if not (math.isfinite(self.late_tolerance_s) and self.late_tolerance_s >= 0):
            raise ValueError(f"late_tolerance_s must be a finite number >= 0, got {self.late_tolerance_s!r}")
        if not 0.0 <= self.min_on_time_fraction <= 1.0:
            raise ValueError(f"min_on_time_fraction must lie in [0, 1], got {self.min_on_time_fraction!r}")
        lateness = tuple(a - s for s, a in zip(scheduled, actual, strict=True))
        early = [i for i, x in enumerate(lateness) if not x >= 0.0]
        if early:
            raise ValueError(f"request {early[0]} was sent before its scheduled time (or a time is NaN)")
        n = len(lateness)
        on_time = sum(x <= self.late_tolerance_s for x in lateness)
        fraction = on_time / n if n else math.nan
        values = {
            "scheduled_s": scheduled,
            "actual_s": actual,
            "requests": n,
            "scheduled_duration_s": max(scheduled, default=0.0),
            "lateness_s": lateness,
            "on_time_fraction": fraction,
            "late_requests": n - on_time,
            "max_lateness_s": max(lateness, default=math.nan),
            "p95_lateness_s": float(np.percentile(lateness, 95)) if n else math.nan,
            "delivered": delivered(
                n - on_time, n, max(lateness, default=math.nan), self.late_tolerance_s, self.min_on_time_fraction
            ),
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)

    @property
    def sent_rps(self) -> float:
        """The rate actually sent: (n - 1) / the span between the first and the last send (NaN with fewer than two
        requests or every request sent at once)."""
        span = max(self.actual_s, default=0.0) - min(self.actual_s, default=0.0)
        return (self.requests - 1) / span if self.requests > 1 and span > 0 else math.nan

    def figures(self) -> dict[str, float | bool]:
        """The cell-level delivery figures a journal keeps (the per-request times live on the request records)."""
        return {
            "requests": self.requests,
            "on_time_fraction": self.on_time_fraction,
            "late_requests": self.late_requests,
            "max_lateness_s": self.max_lateness_s,
            "p95_lateness_s": self.p95_lateness_s,
            "delivered": self.delivered,
            "scheduled_duration_s": self.scheduled_duration_s,
            "sent_rps": self.sent_rps,
            "peak_in_flight": self.peak_in_flight,
            "late_tolerance_s": self.late_tolerance_s,
            "min_on_time_fraction": self.min_on_time_fraction,
        }


async def run_open_loop(
    items: Sequence[T],
    offsets: Sequence[float],
    send: SendFn[T],
    *,
    max_concurrency: int | None = None,
    late_tolerance_s: float = DEFAULT_LATE_TOLERANCE_S,
    min_on_time_fraction: float = DEFAULT_MIN_ON_TIME_FRACTION,
) -> OpenLoopStats:
    """Call ``send(seq, items[seq], offsets[seq], lateness_s)`` for every item, in order, each no earlier than
    ``offsets[seq]`` seconds after the start, and wait for all of them.

    Each send starts at start + offset (one clock origin: a late wake-up does not delay the sends after it). With
    ``max_concurrency`` at most that many sends are in flight; the next request waits for a slot, in order, and is
    sent late. Nothing is dropped. Cancelling the caller cancels every send in flight, waits for them to finish
    (so their records are written) and re-raises :class:`asyncio.CancelledError`; sends not yet started are not
    started. A send that raises cancels the others the same way and its exception propagates (several at once:
    an :class:`ExceptionGroup`).
    """
    n = len(items)
    if len(offsets) != n:
        raise ValueError(f"{n} items but {len(offsets)} offsets")
    scheduled = tuple(float(x) for x in offsets)
    previous = 0.0
    for seq, offset in enumerate(scheduled):
        if not (math.isfinite(offset) and offset >= previous):
            raise ValueError(f"offset {seq} ({offset!r}) must be finite, >= 0 and not before the one before it")
        previous = offset
    if max_concurrency is not None and (isinstance(max_concurrency, bool) or max_concurrency < 1):
        raise ValueError(f"max_concurrency must be a positive integer or None, got {max_concurrency!r}")
    # validate the stats arguments before sending anything
    OpenLoopStats((), (), late_tolerance_s=late_tolerance_s, min_on_time_fraction=min_on_time_fraction)

    loop = asyncio.get_running_loop()
    slots = asyncio.Semaphore(max_concurrency) if max_concurrency is not None else None
    actual: list[float] = [math.nan] * n
    in_flight = peak = 0
    start = loop.time()

    async def one(seq: int) -> None:
        nonlocal in_flight, peak
        try:
            actual[seq] = loop.time() - start  # when the send begins: includes any event-loop delay
            in_flight += 1
            peak = max(peak, in_flight)
            try:
                await send(seq, items[seq], scheduled[seq], actual[seq] - scheduled[seq])
            finally:
                in_flight -= 1
        finally:
            if slots is not None:
                slots.release()

    try:
        async with asyncio.TaskGroup() as group:
            for seq, offset in enumerate(scheduled):
                # compare in the same arithmetic as the lateness, so a send is never early, not even by rounding
                while (delay := offset - (loop.time() - start)) > 0:
                    await asyncio.sleep(delay)
                if slots is not None:
                    await slots.acquire()
                group.create_task(one(seq))
    except BaseExceptionGroup as errors:
        if len(errors.exceptions) == 1:
            raise errors.exceptions[0] from None
        raise
    return OpenLoopStats(
        scheduled,
        tuple(actual),
        late_tolerance_s=late_tolerance_s,
        min_on_time_fraction=min_on_time_fraction,
        peak_in_flight=peak,
    )
