"""Service-level objectives per request: the one rule for "within the SLOs" and for SLO goodput.

A request is within the SLOs when every declared bound holds: ``ttft_ms`` (time to the first token), ``tpot_ms``
(time per output token after the first), ``e2e_ms`` (the whole answer). Latency is measured from the request's
*scheduled* send when it has one (open loop): a request the client sent late kept its user waiting from the
scheduled instant, and measuring from the actual send would hide that (coordinated omission). A failed or
unfinished request is never within. A request counts toward **SLO goodput** when it is also right
(:attr:`~specharness.records.RequestRecord.counts_correct`: complete, and its rubric passed; a truncated answer is
within the latency SLOs if fast enough, but never goodput).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from specharness.records import RequestRecord

__all__ = ["meets_slo", "slo_text", "within_slo"]


def _lateness(r: RequestRecord) -> float:
    return r.send_lateness_s if math.isfinite(r.send_lateness_s) else 0.0


def within_slo(r: RequestRecord, slo: Mapping[str, float]) -> bool:
    """Every declared latency bound holds for a request that finished (complete, or cut at its max_tokens: its
    timing is whole either way). An empty SLO holds for every finished request. A TPOT bound on a one-token answer
    (no TPOT) holds. Failed and unfinished requests never hold."""
    if r.error_kind is not None or r.verdict not in ("complete", "truncated"):
        return False
    late = _lateness(r)
    values = {"ttft_ms": 1000.0 * (r.ttft_s + late), "e2e_ms": 1000.0 * (r.e2e_s + late), "tpot_ms": 1000.0 * r.tpot_s}
    for name, bound in slo.items():
        value = values[name]
        if name == "tpot_ms" and math.isnan(value):
            continue
        if not value <= bound:
            return False
    return True


def meets_slo(r: RequestRecord, slo: Mapping[str, float]) -> bool:
    """Counts toward SLO goodput: right (:attr:`RequestRecord.counts_correct`) and within every SLO."""
    return r.counts_correct and within_slo(r, slo)


def slo_text(slo: Mapping[str, float]) -> str:
    """``TTFT ≤ 1000 ms, TPOT ≤ 50 ms`` (or ``none declared``)."""
    names = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_ms": "E2E"}
    return ", ".join(f"{names[k]} ≤ {v:g} ms" for k, v in slo.items()) or "none declared"
