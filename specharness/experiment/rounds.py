"""Run one closed-loop cell for several arms at once, taking turns round by round: every arm's warmup (in the
block's order), then each round of ``clients`` measured cases to every arm, the block's order and its reverse in
turn, each arm after the engine before it has been quiet (``ctx.quiet``). The arms compared are then seconds apart
instead of whole cells apart, so the machine's slow drift in speed falls on both. Each arm's cell is journaled as
:func:`~specharness.experiment.cell.run_cell` journals it: its wall time is its own rounds' sending time, its
counters and memory span the whole cell. Rule and measurements: docs/method.md#what-a-run-does."""

from __future__ import annotations

import asyncio
import time
from contextlib import AsyncExitStack

from specharness.engines.counters import CounterSnapshot, scrape
from specharness.experiment.cell import Measured, answering, arm_client, cell_cases, measure_cells, reset_prefix_cache
from specharness.experiment.context import RunContext
from specharness.experiment.plan import CellPlan
from specharness.experiment.sending import send_cases
from specharness.records import CellRecord, RequestRecord

__all__ = ["round_orders", "run_rounds"]


def round_orders(arms: tuple[str, ...], rounds: int) -> list[tuple[str, ...]]:
    """The arm order of every round: the block's order, then its reverse, and so on."""
    return [arms if r % 2 == 0 else tuple(reversed(arms)) for r in range(rounds)]


async def _measure_rounds(ctx: RunContext, plan: CellPlan, arms: tuple[str, ...]) -> dict[str, Measured]:
    measured, warm = cell_cases(ctx, plan)
    servers = {arm: ctx.engines.servers[arm] for arm in arms}
    headers = ctx.engines.headers()
    async with AsyncExitStack() as stack:
        clients = {arm: await stack.enter_async_context(arm_client(ctx, plan)) for arm in arms}
        memory_warm: dict[str, dict[str, float]] = {}
        for arm in arms:
            ctx.quiet.wait_for(arm)
            with answering(arm):
                await reset_prefix_cache(ctx, arm, clients[arm])
                if warm:
                    await send_cases(ctx, plan, arm, warm, True, clients[arm])
            ctx.quiet.ended(arm)
            memory_warm[arm] = ctx.probe.as_fields("after_warmup", servers[arm].pids())
        before: dict[str, CounterSnapshot] = {}
        for arm in arms:
            with answering(arm):
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
                with answering(arm):
                    sent = await send_cases(ctx, plan, arm, measured[start : start + size], False, clients[arm], start)
                wall[arm] += time.perf_counter() - t0
                cpu[arm] += time.process_time() - cpu0
                ctx.quiet.ended(arm)
                records[arm] += sent.records
        out = {}
        for arm in arms:
            server = servers[arm]
            with answering(arm):
                after = await asyncio.to_thread(scrape, server.base_url, headers) if server.alive() else before[arm]
            out[arm] = Measured(records[arm], wall[arm], cpu[arm], before[arm], after, memory_warm[arm], {})
        return out


def run_rounds(ctx: RunContext, plan: CellPlan, arms: tuple[str, ...]) -> list[CellRecord]:
    """Measure ``arms``' cells of ``plan`` taking turns round by round; journal and return one record per arm (an
    arm whose engine stopped answering or died comes back invalid, with the reason, and the other arms' cells are
    left to a resume)."""
    return measure_cells(ctx, plan, arms, lambda: _measure_rounds(ctx, plan, arms))
