"""A sweep's peak probe: each arm's peak request rate per workload, and the open-loop rates taken of it."""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import replace

import httpx

from specharness._errors import ConfigError
from specharness.experiment.cells import cell_cases
from specharness.experiment.context import RunContext
from specharness.experiment.design import Profile
from specharness.experiment.plan import CellPlan, Load
from specharness.experiment.sending import send_cases
from specharness.records import PeakProbeEvent, RequestRecord, SweepPlanEvent, rate_text
from specharness.traffic.workloads import Case

__all__ = ["probe_peak", "resolve_sweep", "sweep_rates"]

REFERENCE_ARM = "baseline"  # a sweep's levels are multiples of this arm's peak


def resolve_sweep(ctx: RunContext) -> Profile:
    """A sweep's open-loop rates, per workload: each arm's peak request rate is probed (all of a cell's requests
    at once, after a warmup round; journaled as warmup, so never analysed), then the levels are taken of the
    reference arm's peak (:func:`sweep_rates`). The rates are journaled; returns the
    profile with them (the caller saves it in the manifest, so a resumed run keeps them)."""
    p = ctx.profile
    resolved = dict(p.workload_rates)
    if REFERENCE_ARM not in p.arms:
        raise ConfigError(
            "specharness sweep: the levels are multiples of the baseline's peak; include baseline in --arms"
        )
    for workload in p.workloads:
        if workload in resolved:
            continue
        probe = CellPlan(-1, workload, Load(0, "inf"), p.arms)
        measured, warm = cell_cases(ctx, probe)
        peaks = {arm: probe_peak(ctx, probe, arm, measured, warm) for arm in p.arms if arm not in ctx.engines.failed}
        rates = sweep_rates(p.sweep_levels, peaks[REFERENCE_ARM])
        resolved[workload] = rates
        event = SweepPlanEvent(
            workload=workload,
            reference_arm=REFERENCE_ARM,
            peak_rps=peaks,
            levels=list(p.sweep_levels),
            rates=list(rates),
        )
        ctx.journal.write(event)
    return replace(p, workload_rates=resolved)


def probe_peak(ctx: RunContext, probe: CellPlan, arm: str, measured: list[Case], warm: list[Case]) -> float:
    """One arm's peak request rate: a warmup round, then every measured case at once; completed requests per
    second of the burst. Journaled as warmup requests and a ``peak_probe`` event."""

    async def go() -> tuple[list[RequestRecord], float]:
        timeout = httpx.Timeout(ctx.request_timeout_s, connect=10.0)
        async with httpx.AsyncClient(timeout=timeout, limits=httpx.Limits(max_connections=None)) as client:
            await send_cases(ctx, probe, arm, warm, True, client)
            t0 = time.perf_counter()
            sent = await send_cases(ctx, probe, arm, measured, True, client)
            return sent.records, time.perf_counter() - t0

    ctx.quiet.wait_for(arm)
    records, wall = asyncio.run(go())
    ctx.quiet.ended(arm)
    # conversations (a replayed case journals one record per turn) that completed, per second
    ok = len({r.seq for r in records}) - len({r.seq for r in records if r.error_kind is not None})
    peak = ok / wall if wall > 0 else float("nan")
    event = PeakProbeEvent(workload=probe.workload, arm=arm, requests=len(records), ok=ok, wall_s=wall, peak_rps=peak)
    ctx.journal.write(event)
    return peak


def sweep_rates(levels: tuple[float, ...], peak_rps: float) -> tuple[str, ...]:
    """The open-loop rates of a sweep: each level times the baseline's peak request rate, two significant digits,
    then ``inf`` (all at once: past saturation). Levels that round to the same rate are kept once."""
    if not (math.isfinite(peak_rps) and peak_rps > 0):
        raise ConfigError(
            f"the sweep's peak probe measured {peak_rps!r} requests/s; every probe request failed? "
            "read the engine logs under logs/"
        )
    out: list[str] = []
    for level in levels:
        text = rate_text(float(f"{level * peak_rps:.2g}"))
        if text not in out:
            out.append(text)
    return (*out, "inf")
