"""One arm in one (workload, clients) cell, summarised: counts, latency percentiles that keep failures, throughput,
acceptance, memory. Pure: records in, a frozen summary out."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from specharness.analysis.slo import meets_slo, within_slo
from specharness.analysis.stats import percentile_table
from specharness.analysis.throughput import steady_throughput
from specharness.records import CellRecord, RequestRecord, load_label
from specharness.traffic.openloop import delivered

__all__ = ["ArmSummary", "ratio", "summarise_arm"]


def ratio(num: float, den: float) -> float:
    return num / den if den else math.nan


@dataclass(frozen=True, slots=True)
class ArmSummary:
    """One arm in one (workload, clients) cell, pooled over its valid blocks. Percentile dicts carry ``n`` and
    ``failed``; a failed request counts as never finishing in TTFT and E2E."""

    arm: str
    workload: str
    clients: int
    requests: int
    failed: int
    incomplete: int
    truncated: int
    complete: int
    checked: int
    correct: int
    unchecked: int
    wall_s: float
    output_tokens: int
    ttft_ms: dict[str, float]
    tpot_ms: dict[str, float]
    itl_ms: dict[str, float]
    e2e_ms: dict[str, float]
    output_tok_s: float
    requests_s: float
    steady_output_tok_s: float
    goodput_requests_s: float
    goodput_tok_s: float
    error_rate: float
    correct_fraction: float
    complete_fraction: float
    acceptance: dict[str, float] = field(default_factory=dict)
    accepted_per_position: list[float] = field(default_factory=list)
    peak_memory_mib: dict[str, float] = field(default_factory=dict)
    error_kinds: dict[str, int] = field(default_factory=dict)
    harness_cpu_fraction: float = math.nan
    prefix_cache: dict[str, float] = field(default_factory=dict)
    rate: str = ""  # open loop: requests per second as text ("inf": all at once); "" for a closed loop
    load: str = ""  # the cell's load label, c<clients> or r<rate>
    delivery: dict[str, float] = field(default_factory=dict)
    slo: dict[str, float] = field(default_factory=dict)
    slo_goodput: dict[str, float] = field(default_factory=dict)

    @property
    def offered(self) -> float:
        """The load on its own axis: requests per second (open loop) or clients."""
        return float(self.rate) if self.rate else float(self.clients)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["offered"] = self.offered
        return out


def _count(items: Iterable[str | None]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        if item:
            out[item] = out.get(item, 0) + 1
    return out


def _delivery(
    requests: Sequence[RequestRecord], cells: Sequence[CellRecord], wall: float, rate: str
) -> dict[str, float]:
    """Open-loop delivery over an arm's cells: the share of requests sent within the tolerance, the worst cell's
    share, late requests, p95 and max lateness, the pooled sent rate, and whether every cell was delivered (NaN for
    "all at once": that schedule is as fast as the client can send, so its lateness is the client's own sending
    time, shown but not judged)."""
    figures = [c.delivery for c in cells if c.delivery]
    if not figures:
        return {}
    lateness = [r.send_lateness_s for r in requests if math.isfinite(r.send_lateness_s)]
    tolerance = float(figures[0].get("late_tolerance_s", 0.005))
    spans = []  # per cell: (sends - 1, span of the actual sends), over cells whose schedule had a span
    by_cell: dict[str, list[tuple[float, float]]] = {}
    for r in requests:
        if math.isfinite(r.scheduled_s) and math.isfinite(r.send_lateness_s):
            by_cell.setdefault(r.cell, []).append((r.scheduled_s, r.scheduled_s + r.send_lateness_s))
    for sends in by_cell.values():
        actual = [a for _, a in sends]
        if len(sends) > 1 and max(s for s, _ in sends) > 0:  # a schedule with a span (not all at once)
            spans.append((len(sends) - 1, max(actual) - min(actual)))
    on_time = [float(f["on_time_fraction"]) for f in figures if isinstance(f.get("on_time_fraction"), (int, float))]
    out = {
        "on_time_fraction": ratio(sum(1 for x in lateness if x <= tolerance), len(lateness)),
        "worst_cell_on_time_fraction": min(on_time, default=math.nan),
        "late_requests": float(sum(1 for x in lateness if x > tolerance)),
        "p95_lateness_ms": 1000.0 * float(np.percentile(lateness, 95)) if lateness else math.nan,
        "max_lateness_ms": 1000.0 * max(lateness, default=math.nan),
        # pooled over cells: sends after the first / their span (NaN for "all at once": no span)
        "sent_rps": ratio(sum(n for n, _ in spans), sum(t for _, t in spans)) if spans else math.nan,
        "completed_rps": ratio(sum(1 for r in requests if r.error_kind is None), wall),
        # recomputed from each cell's counts by the one rule (journals keep the counts)
        "delivered": float(
            all(
                delivered(
                    int(f.get("late_requests", 0)),
                    int(f.get("requests", 0)),
                    float(f.get("max_lateness_s") or 0.0),
                    float(f.get("late_tolerance_s", 0.005)),
                    float(f.get("min_on_time_fraction", 0.95)),
                )
                for f in figures
            )
        ),
        "cells": float(len(figures)),
        "late_tolerance_ms": 1000.0 * tolerance,
    }
    if rate == "inf":
        out["delivered"] = math.nan
    return out


def summarise_arm(
    arm: str,
    workload: str,
    clients: int,
    requests: Sequence[RequestRecord],
    cells: Sequence[CellRecord],
    failed_at_s: float = 300.0,
    *,
    rate: str = "",
    slo: dict[str, float] | None = None,
    steady: bool = True,
) -> ArmSummary:
    """Summarise the measured requests of one arm/cell; ``cells`` give wall time, counters and memory; a failed
    request counts at ``failed_at_s`` (the run's request timeout) in the TTFT and E2E percentiles. ``rate`` names an
    open-loop cell's rate; ``slo`` the declared per-request SLOs (:mod:`specharness.analysis.slo`); ``steady``
    False when the cell's arms took turns round by round (the wall clock between its sends holds other arms' requests,
    so no steady window is measured)."""
    failed = sum(1 for r in requests if r.verdict == "failed")
    incomplete = sum(1 for r in requests if r.verdict == "incomplete")
    truncated = sum(1 for r in requests if r.verdict == "truncated")
    complete = sum(1 for r in requests if r.verdict == "complete")
    checked = [r for r in requests if r.checked]
    correct = sum(1 for r in checked if r.counts_correct)
    wall = sum(c.wall_s for c in cells)
    ok = [r for r in requests if r.error_kind is None]
    not_ok = len(requests) - len(ok)
    tokens = sum(r.output_tokens for r in ok)
    useful = [r for r in requests if r.useful]
    itl = [gap for r in ok for gap in r.inter_chunk_s]
    totals: dict[str, float] = {}
    per_pos: list[float] = []
    peak: dict[str, float] = {}
    for c in cells:
        for k, v in c.counters.items():
            totals[k] = totals.get(k, 0.0) + v
        for i, v in enumerate(c.accepted_per_position):
            if i >= len(per_pos):
                per_pos.append(0.0)
            per_pos[i] += v
        for k, v in c.memory.items():
            if k.startswith("peak_"):
                peak[k] = max(peak.get(k, 0.0), v)
    drafts = totals.get("drafts", 0.0)
    by_cell: dict[str, list[RequestRecord]] = {}
    for r in requests:
        by_cell.setdefault(r.cell, []).append(r)
    windows = [steady_throughput(rs, clients) for rs in by_cell.values()] if steady else []
    steady_tokens = sum(s.tokens for s in windows if math.isfinite(s.seconds))
    steady_seconds = sum(s.seconds for s in windows if math.isfinite(s.seconds))
    n = len(requests)
    return ArmSummary(
        arm=arm,
        workload=workload,
        clients=clients,
        requests=n,
        failed=failed,
        incomplete=incomplete,
        truncated=truncated,
        complete=complete,
        checked=len(checked),
        correct=correct,
        unchecked=n - len(checked),
        wall_s=wall,
        output_tokens=tokens,
        ttft_ms=percentile_table((r.ttft_s for r in ok), failed=not_ok, failed_at_s=failed_at_s),
        tpot_ms=percentile_table(r.tpot_s for r in ok),
        itl_ms=percentile_table(itl),
        e2e_ms=percentile_table((r.e2e_s for r in ok), failed=not_ok, failed_at_s=failed_at_s),
        output_tok_s=ratio(tokens, wall),
        requests_s=ratio(len(ok), wall),
        steady_output_tok_s=ratio(steady_tokens, steady_seconds),
        goodput_requests_s=ratio(len(useful), wall),
        goodput_tok_s=ratio(sum(r.output_tokens for r in useful), wall),
        error_rate=ratio(failed + incomplete, n),
        correct_fraction=ratio(correct, len(checked)),
        complete_fraction=ratio(complete, n),
        acceptance={
            "drafts": drafts,
            "draft_tokens": totals.get("draft_tokens", 0.0),
            "accepted_tokens": totals.get("accepted_tokens", 0.0),
            "acceptance_rate": ratio(totals.get("accepted_tokens", 0.0), totals.get("draft_tokens", 0.0)),
            "mean_acceptance_length": 1.0 + totals["accepted_tokens"] / drafts if drafts else math.nan,
        },
        accepted_per_position=[ratio(v, drafts) for v in per_pos],
        peak_memory_mib=peak,
        error_kinds=_count(r.error_kind for r in requests if r.error_kind),
        harness_cpu_fraction=ratio(sum(c.harness_cpu_s for c in cells), wall),
        prefix_cache={k: totals[k] for k in ("prefix_cache_queries", "prefix_cache_hits") if k in totals},
        rate=rate,
        load=load_label(clients, rate),
        delivery=_delivery(requests, cells, wall, rate),
        slo=dict(slo or {}),
        slo_goodput=_slo_goodput(requests, slo or {}, wall),
    )


def _slo_goodput(requests: Sequence[RequestRecord], slo: dict[str, float], wall: float) -> dict[str, float]:
    """SLO goodput of one arm: requests right and within every SLO (per second of measured wall time, and as a
    share of all requests), and, apart, the share within the latency SLOs whatever the answer."""
    n = len(requests)
    good = sum(1 for r in requests if meets_slo(r, slo))
    timely = sum(1 for r in requests if within_slo(r, slo))
    return {
        "requests": float(n),
        "met": float(good),
        "fraction": ratio(good, n),
        "rps": ratio(good, wall),
        "latency_met": float(timely),
        "latency_fraction": ratio(timely, n),
    }
