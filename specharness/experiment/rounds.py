"""Run one closed-loop cell for several arms at once, taking turns round by round: every arm's warmup (in the
block's order), then each round of ``clients`` measured cases to every arm, the block's order and its reverse in
turn, each arm after the engine before it has been quiet (``ctx.quiet``). The arms compared are then seconds apart
instead of whole cells apart, so the machine's slow drift in speed falls on both. Each arm's cell is journaled as
:func:`~specharness.experiment.cell.run_cell` journals it: its wall time is its own rounds' sending time, its
counters and memory span the whole cell. Rule and measurements: docs/method.md#what-a-run-does."""

from __future__ import annotations

import asyncio
import signal
import time
from contextlib import AsyncExitStack

import httpx

from specharness.engines.counters import CounterSnapshot, scrape
from specharness.engines.memory import PeakSampler
from specharness.experiment.cell import Measured, cell_cases, cell_record, client_limits, dead_cell, reset_prefix_cache
from specharness.experiment.context import RunContext
from specharness.experiment.plan import CellPlan
from specharness.experiment.sending import Sent, send_cases
from specharness.records import CellRecord, RequestRecord
from specharness.traffic.workloads import Case

__all__ = ["round_orders", "run_rounds"]


class _ArmStopped(Exception):
    """An arm's engine stopped answering during an interleaved cell."""

    def __init__(self, arm: str, exc: httpx.HTTPError) -> None:
        super().__init__(arm)
        self.arm, self.exc = arm, exc


def round_orders(arms: tuple[str, ...], rounds: int) -> list[tuple[str, ...]]:
    """The arm order of every round: the block's order, then its reverse, and so on."""
    return [arms if r % 2 == 0 else tuple(reversed(arms)) for r in range(rounds)]


async def _send(
    ctx: RunContext,
    plan: CellPlan,
    arm: str,
    cases: list[Case],
    warmup: bool,
    client: httpx.AsyncClient,
    first_seq: int = 0,
) -> Sent:
    try:
        return await send_cases(ctx, plan, arm, cases, warmup, client, first_seq)
    except httpx.HTTPError as exc:
        raise _ArmStopped(arm, exc) from exc


async def _measure_rounds(ctx: RunContext, plan: CellPlan, arms: tuple[str, ...]) -> dict[str, Measured]:
    measured, warm = cell_cases(ctx, plan)
    servers = {arm: ctx.engines.servers[arm] for arm in arms}
    headers = ctx.engines.headers()
    task = asyncio.current_task()
    if task is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    timeout = httpx.Timeout(ctx.request_timeout_s, connect=10.0)
    async with AsyncExitStack() as stack:
        clients = {
            arm: await stack.enter_async_context(httpx.AsyncClient(limits=client_limits(ctx, plan), timeout=timeout))
            for arm in arms
        }
        memory_warm: dict[str, dict[str, float]] = {}
        for arm in arms:
            ctx.quiet.wait_for(arm)
            await reset_prefix_cache(ctx, arm, clients[arm])
            if warm:
                await _send(ctx, plan, arm, warm, True, clients[arm])
            ctx.quiet.ended(arm)
            memory_warm[arm] = ctx.probe.as_fields("after_warmup", servers[arm].pids())
        before: dict[str, CounterSnapshot] = {}
        for arm in arms:
            before[arm] = await asyncio.to_thread(scrape, servers[arm].base_url, headers)
        records: dict[str, list[RequestRecord]] = {arm: [] for arm in arms}
        wall = dict.fromkeys(arms, 0.0)
        cpu = dict.fromkeys(arms, 0.0)
        size = max(plan.clients, 1)
        starts = list(range(0, len(measured), size))
        for start, order in zip(starts, round_orders(arms, len(starts)), strict=True):
            for arm in order:
                ctx.quiet.wait_for(arm)
                t0, cpu0 = time.perf_counter(), time.process_time()
                sent = await _send(ctx, plan, arm, measured[start : start + size], False, clients[arm], start)
                wall[arm] += time.perf_counter() - t0
                cpu[arm] += time.process_time() - cpu0
                ctx.quiet.ended(arm)
                records[arm] += sent.records
        out = {}
        for arm in arms:
            server = servers[arm]
            after = await asyncio.to_thread(scrape, server.base_url, headers) if server.alive() else before[arm]
            out[arm] = Measured(records[arm], wall[arm], cpu[arm], before[arm], after, memory_warm[arm], {})
        return out


def run_rounds(ctx: RunContext, plan: CellPlan, arms: tuple[str, ...]) -> list[CellRecord]:
    """Measure ``arms``' cells of ``plan`` taking turns round by round; journal and return one record per arm (an
    arm whose engine died comes back invalid, with the reason, and the other arms' cells are left to a resume)."""
    samplers = {arm: PeakSampler(ctx.probe, ctx.engines.servers[arm].pids()) for arm in arms}
    for sampler in samplers.values():
        sampler.start()
    term_handler = signal.getsignal(signal.SIGTERM)
    try:
        measured = asyncio.run(_measure_rounds(ctx, plan, arms))
    except asyncio.CancelledError:
        raise KeyboardInterrupt("SIGTERM") from None
    except _ArmStopped as stop:
        server = ctx.engines.servers[stop.arm]
        reason = f"{stop.arm} engine stopped answering ({server.exit_status()}): {stop.exc}"
        return [dead_cell(ctx, plan, stop.arm, reason)]
    finally:
        peaks = {arm: sampler.stop() for arm, sampler in samplers.items()}
        signal.signal(signal.SIGTERM, term_handler)  # the event loop resets it on close
    for arm in arms:
        server = ctx.engines.servers[arm]
        if not server.alive():
            reason = f"{arm} engine died during the cell ({server.exit_status()}); cause: {server.cause()}"
            return [dead_cell(ctx, plan, arm, reason)]
    return [cell_record(ctx, plan, arm, measured[arm], peaks[arm]) for arm in arms]
