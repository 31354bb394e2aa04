"""System throughput on the wall clock, steady state only: the ramp-up (until every client has a request out) and
the drain (after the last request was sent) are left out, since neither is the load the cell declares."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from specharness.records import RequestRecord

__all__ = ["SteadyWindow", "steady_throughput"]


@dataclass(frozen=True, slots=True)
class SteadyWindow:
    """Output tokens delivered inside the steady window, and the window's length (NaN when there is none)."""

    tokens: int
    seconds: float

    @property
    def tok_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else math.nan


def steady_throughput(requests: Sequence[RequestRecord], clients: int) -> SteadyWindow:
    """Tokens whose chunks arrived between the ``clients``-th send and the last send of one cell's requests.

    Every chunk carries its own arrival time and token count, so tokens are counted where they arrived. A cell with
    no more requests than clients has no steady window (NaN)."""
    sent = sorted(r.send_s for r in requests)
    if len(sent) <= max(clients, 1):
        return SteadyWindow(0, math.nan)
    start, end = sent[max(clients, 1) - 1], sent[-1]
    if end <= start:
        return SteadyWindow(0, math.nan)
    tokens = 0
    for r in requests:
        for at, n in zip(r.chunk_arrival_s, r.chunk_tokens, strict=False):
            t = r.send_s + at
            if start <= t < end:
                tokens += n
    return SteadyWindow(tokens, end - start)
