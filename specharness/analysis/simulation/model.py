"""What both simulated studies share: the heavy-tail and drift constants of the data-generating model, the nominal
confidence, and the mirrored arm order of the current design. Model: docs/method.md#the-error-rate-simulation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from specharness.records import RequestRecord

__all__ = [
    "CONFIDENCE",
    "DRIFT_CURVATURE",
    "HEAVY_DF",
    "OUTLIER_FACTOR",
    "OUTLIER_PROB",
    "mirrored_a_first",
    "sim_request",
]

CONFIDENCE = 0.95
OUTLIER_PROB = 0.01
OUTLIER_FACTOR = 5.0
HEAVY_DF = 3
DRIFT_CURVATURE = 2.0  # shape(t) = (1 - exp(-k t)) / (1 - exp(-k)); k = 2 gives +13% then +7% over thirds


def mirrored_a_first(blocks: int) -> np.ndarray:
    """A runs first in block b of the mirrored plan AB BA BA AB AB BA ... (as experiment.design.block_orders)."""
    b = np.arange(blocks)
    return (b % 2 == 0) == ((b // 2) % 2 == 0)


def sim_request(
    arm: str,
    block: int,
    case: int,
    arrivals: Sequence[float],
    tokens: Sequence[int],
    digest: str,
    chain: str,
    *,
    verdict: str = "complete",
    error: str | None = None,
    e2e_s: float | None = None,
) -> RequestRecord:
    """One simulated request record at 1 client: its chunks (arrival, tokens), digest and prefix chain; a request
    with an ``error`` has no end time, token count or finish reason; ``e2e_s`` defaults to the last arrival."""
    ok = error is None
    end = (e2e_s if e2e_s is not None else arrivals[-1]) if ok else math.nan
    return RequestRecord(
        arm=arm,
        block=block,
        workload="sim",
        group="g",
        case_id=f"c{case}",
        clients=1,
        warmup=False,
        cell="",
        seq=case,
        started_unix_s=0.0,
        send_s=0.0,
        chunk_arrival_s=list(arrivals),
        chunk_tokens=list(tokens),
        ttft_s=arrivals[0] if arrivals else math.nan,
        e2e_s=end,
        completion_tokens=sum(tokens) if ok else None,
        error_kind=error,
        verdict=verdict,
        saw_done=ok,
        finish_reason=("length" if verdict == "truncated" else "stop") if ok else None,
        output_digest=digest,
        prefix_chain=chain,
    )
