"""Measure a run's cells: the walk of the cell plan (:func:`run_plan`), one arm's cell (:func:`run_cell`), or a
closed-loop cell's arms taking turns round by round (:func:`run_rounds`); each cell's record is journaled and returned.

The plan's declared blocks come first, then (``--until-decided``) a mirrored pair of blocks at a time for the cells
still undecided, up to ``--max-blocks``; every look is journaled. A cell is warmup, counters scraped before and after,
memory sampled, the measured requests sent (:mod:`specharness.experiment.sending`). A cell whose engine died or
stopped answering comes back invalid (journaled as such), never raised from the cell; the walk then stops the run.

Taking turns: every arm's warmup (in the block's order), then each round of ``clients`` measured cases to every arm,
the block's order and its reverse in turn, each arm after the engine before it has been quiet (``ctx.quiet``). The
arms compared are then seconds apart instead of whole cells apart, so the machine's slow drift in speed falls on
both; each arm's wall time is its own rounds' sending time, its counters and memory span the whole cell.
Rule and measurements: docs/method.md#what-a-run-does.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass, replace
from typing import Any

import httpx

from specharness._errors import ConfigError, EngineDied
from specharness.engines.counters import CounterSnapshot, acceptance_figures, reconcile_tokens, scrape
from specharness.engines.memory import PeakSampler
from specharness.experiment.context import RunContext, UndecidedFn
from specharness.experiment.design import plan_cells
from specharness.experiment.plan import BLOCKS_PER_LOOK, CellPlan, warm_round
from specharness.experiment.sending import send_cases
from specharness.records import CellRecord, LookEvent, MismatchEvent, RequestRecord, cell_id
from specharness.traffic.workloads import Case, warmup_cases

__all__ = ["Measured", "cell_cases", "round_orders", "run_cell", "run_cells", "run_plan", "run_rounds"]


def run_cells(ctx: RunContext, plans: list[CellPlan], done: set[str]) -> None:
    """Measure every arm of every planned cell not in ``done`` (keys), adding each to ``done``; a dead engine stops
    the run (:class:`~specharness._errors.EngineDied`); an arm whose engine never started has no cells. An arm's
    cell starts once the engine measured before it has been quiet for the profile's ``settle_s`` (``ctx.quiet``);
    with the profile's ``interleave``, a closed-loop cell's arms take turns round by round (:func:`run_rounds`)."""
    for plan in plans:
        arms = tuple(a for a in plan.arm_order if plan.key(a) not in done and a not in ctx.engines.failed)
        if ctx.profile.interleave and not plan.load.open_loop and len(arms) > 1:
            cells = run_rounds(ctx, plan, arms)
        else:
            cells = []
            for arm in arms:
                ctx.quiet.wait_for(arm)
                cell = run_cell(ctx, plan, arm)
                ctx.quiet.ended(arm)
                cells.append(cell)
                if not cell.valid:
                    break
        for cell in cells:
            if not cell.valid:
                raise EngineDied(
                    f"{cell.invalid_reason}; the run stopped; finish it with 'specharness run --resume {ctx.out_dir}'"
                )
            done.add(plan.key(cell.arm))


def run_plan(
    ctx: RunContext, done: set[str], undecided: UndecidedFn | None, instance_blocks: range | None = None
) -> None:
    """The declared blocks (``instance_blocks``: those of one engine instance); then, with --until-decided, two more blocks (a
    mirrored pair) at a time for the cells ``undecided`` names, up to --max-blocks. Every look is journaled."""
    p = ctx.profile
    run_cells(ctx, plan_cells(p, instance_blocks), done)
    if not p.until_decided or undecided is None or p.max_blocks is None:
        return
    blocks = p.blocks
    while blocks < p.max_blocks:
        open_cells = undecided(ctx.out_dir)
        ctx.journal.write(LookEvent(blocks=blocks, undecided=_labels(open_cells)))
        if not open_cells:
            return
        more = plan_cells(p, range(blocks, blocks + BLOCKS_PER_LOOK))
        run_cells(ctx, [plan for plan in more if (plan.workload, plan.load.label) in open_cells], done)
        blocks += BLOCKS_PER_LOOK
    ctx.journal.write(LookEvent(blocks=blocks, undecided=_labels(undecided(ctx.out_dir))))


def _labels(cells: set[tuple[str, str]]) -> list[str]:
    return sorted(f"{w}/{load}" for w, load in cells)


def cell_cases(ctx: RunContext, plan: CellPlan) -> tuple[list[Case], list[Case]]:
    """The measured cases (the same in every block) and the warmup cases: one round per warmup, one request per
    client, drawn from cases the run never measures (or neutral prompts when every case is measured)."""
    cases = ctx.sequences[plan.workload]
    p = ctx.profile
    measured = [cases[i % len(cases)] for i in range(p.requests_per_cell)]
    spare = list(cases[p.requests_per_cell :]) or list(warmup_cases())
    warm = [spare[i % len(spare)] for i in range(p.warmups_per_cell * warm_round(plan.load))]
    return measured, warm


@dataclass(frozen=True, slots=True)
class Measured:
    """What sending one arm's cell gave: its records, its own sending time (wall and the harness's CPU), the
    counters around it, memory after its warmup and, for an open loop, the delivery figures."""

    records: list[RequestRecord]
    wall_s: float
    cpu_s: float
    before: CounterSnapshot
    after: CounterSnapshot
    memory_after_warmup: dict[str, float]
    delivery: dict[str, float | bool]


def _client_limits(ctx: RunContext, plan: CellPlan) -> httpx.Limits:
    if plan.load.open_loop:  # an open loop never waits for a connection: no pool limit unless a cap is set
        cap = ctx.profile.max_concurrency
        return httpx.Limits(
            max_connections=cap + 4 if cap else None, max_keepalive_connections=cap + 4 if cap else None
        )
    return httpx.Limits(max_connections=plan.clients + 4, max_keepalive_connections=plan.clients + 4)


class _ArmStopped(Exception):
    """An arm's engine stopped answering (an HTTP error) while its cell was measured."""

    def __init__(self, arm: str, exc: httpx.HTTPError) -> None:
        super().__init__(arm)
        self.arm, self.exc = arm, exc


@contextmanager
def answering(arm: str) -> Iterator[None]:
    """Names the arm whose engine an HTTP error inside came from (:class:`_ArmStopped`)."""
    try:
        yield
    except httpx.HTTPError as exc:
        raise _ArmStopped(arm, exc) from exc


def arm_client(ctx: RunContext, plan: CellPlan) -> httpx.AsyncClient:
    """The HTTP client one arm's cell sends through."""
    timeout = httpx.Timeout(ctx.request_timeout_s, connect=10.0)
    return httpx.AsyncClient(limits=_client_limits(ctx, plan), timeout=timeout)


async def _cancelled_by_sigterm(measure: Callable[[], Coroutine[Any, Any, dict[str, Measured]]]) -> dict[str, Measured]:
    """Run ``measure`` so that SIGTERM cancels it (the run stops, as on an interrupt)."""
    task = asyncio.current_task()
    if task is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    return await measure()


def measure_cells(
    ctx: RunContext,
    plan: CellPlan,
    arms: tuple[str, ...],
    measure: Callable[[], Coroutine[Any, Any, dict[str, Measured]]],
) -> list[CellRecord]:
    """Run ``measure`` with each arm's memory sampled, then journal each arm's cell; an engine that stopped answering
    or died gives one invalid cell, with the reason, and the other arms' cells are left to a resume."""
    samplers = {arm: PeakSampler(ctx.probe, ctx.engines.servers[arm].pids()) for arm in arms}
    for sampler in samplers.values():
        sampler.start()
    term_handler = signal.getsignal(signal.SIGTERM)
    try:
        measured = asyncio.run(_cancelled_by_sigterm(measure))
    except asyncio.CancelledError:
        raise KeyboardInterrupt("SIGTERM") from None
    except _ArmStopped as stop:
        server = ctx.engines.servers[stop.arm]
        return [
            dead_cell(ctx, plan, stop.arm, f"{stop.arm} engine stopped answering ({server.exit_status()}): {stop.exc}")
        ]
    finally:
        peaks = {arm: sampler.stop() for arm, sampler in samplers.items()}
        signal.signal(signal.SIGTERM, term_handler)  # the event loop resets it on close
    for arm in arms:
        server = ctx.engines.servers[arm]
        if not server.alive():
            reason = f"{arm} engine died during the cell ({server.exit_status()}); cause: {server.cause()}"
            return [dead_cell(ctx, plan, arm, reason)]
    return [cell_record(ctx, plan, arm, measured[arm], peaks[arm]) for arm in arms]


async def _measure(ctx: RunContext, plan: CellPlan, arm: str, measured: list[Case], warm: list[Case]) -> Measured:
    """Reset the prefix cache if asked, send the warmup round, then the measured requests between two scrapes."""
    server = ctx.engines.servers[arm]
    headers = ctx.engines.headers()
    async with arm_client(ctx, plan) as client:
        await reset_prefix_cache(ctx, arm, client)
        if warm:
            await send_cases(ctx, plan, arm, warm, True, client)
        memory_warm = ctx.probe.as_fields("after_warmup", server.pids())
        before = await asyncio.to_thread(scrape, server.base_url, headers)
        t0, cpu0 = time.perf_counter(), time.process_time()
        sent = await send_cases(ctx, plan, arm, measured, False, client)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        after = await asyncio.to_thread(scrape, server.base_url, headers) if server.alive() else before
        return Measured(sent.records, wall, cpu, before, after, memory_warm, sent.delivery)


async def reset_prefix_cache(ctx: RunContext, arm: str, client: httpx.AsyncClient) -> None:
    """Empty the arm's prefix cache when the profile asks (``--prefix-caching reset``), before its cell."""
    if ctx.profile.prefix_caching != "reset":
        return
    server = ctx.engines.servers[arm]
    reply = await client.post(server.base_url + "/reset_prefix_cache", headers=ctx.engines.headers())
    if reply.status_code != 200:
        raise ConfigError(
            f"--prefix-caching reset: the {arm} engine answered /reset_prefix_cache with HTTP "
            f"{reply.status_code}; it needs vLLM's dev endpoints (a loopback --host)"
        )


def run_cell(ctx: RunContext, plan: CellPlan, arm: str) -> CellRecord:
    """Measure one arm's cell and journal its record (invalid, with the reason, when the engine died)."""
    measured_cases, warm_cases = cell_cases(ctx, plan)

    async def measure() -> dict[str, Measured]:
        with answering(arm):
            return {arm: await _measure(ctx, plan, arm, measured_cases, warm_cases)}

    return measure_cells(ctx, plan, (arm,), measure)[0]


def cell_record(ctx: RunContext, plan: CellPlan, arm: str, m: Measured, peak: dict[str, float]) -> CellRecord:
    """Journal one arm's measured cell (its counter deltas reconciled with the journal's tokens) and return it."""
    delta = m.after.minus(m.before)
    figures = acceptance_figures(delta.totals)
    journal_tokens = sum(r.completion_tokens or 0 for r in m.records)
    mismatch = reconcile_tokens(figures["generation_tokens"], journal_tokens)
    if mismatch:
        ctx.journal.write(MismatchEvent(cell=plan.key(arm), message=mismatch))
    cell = replace(
        _cell_of(ctx, plan, arm, m.wall_s, len(m.records)),
        harness_cpu_s=m.cpu_s,
        counters=_counters(figures, m.records, journal_tokens),
        accepted_per_position=delta.accepted_per_position,
        memory={**m.memory_after_warmup, **peak},
        order_index=plan.arm_order.index(arm),
        delivery=m.delivery,
    )
    ctx.journal.write(cell)
    return cell


def _cell_of(ctx: RunContext, plan: CellPlan, arm: str, wall_s: float, requests: int) -> CellRecord:
    """The record every cell of ``arm`` in ``plan`` starts from: which cell it is (its id in this segment, whether a
    resume measured it, its load), its wall time and request count."""
    return CellRecord(
        arm=arm,
        block=plan.block,
        workload=plan.workload,
        clients=plan.clients,
        cell=cell_id(plan.key(arm), ctx.segment),
        wall_s=wall_s,
        requests=requests,
        resumed=ctx.segment > 0,
        rate=plan.load.rate,
        instance=ctx.instance,
    )


def _counters(figures: dict[str, float], records: list[RequestRecord], journal_tokens: int) -> dict[str, float]:
    """The cell's counter deltas from the engine's /metrics, beside the journal's own token counts."""
    counters = {name: figures[name] for name in ("drafts", "draft_tokens", "accepted_tokens", "generation_tokens")}
    counters["journal_completion_tokens"] = float(journal_tokens)
    counters["prefix_cache_queries"] = figures["prefix_cache_queries"]
    counters["prefix_cache_hits"] = figures["prefix_cache_hits"]
    per_request = [r.spec_draft_tokens for r in records if r.spec_draft_tokens is not None]
    if per_request:
        counters["journal_spec_draft_tokens"] = float(sum(per_request))
        counters["journal_spec_accepted_tokens"] = float(sum(r.spec_accepted_tokens or 0 for r in records))
    return counters


def dead_cell(ctx: RunContext, plan: CellPlan, arm: str, reason: str) -> CellRecord:
    """Journal a cell whose engine died as invalid (a resume measures it again)."""
    cell = replace(_cell_of(ctx, plan, arm, float("nan"), 0), valid=False, invalid_reason=reason)
    ctx.journal.write(cell)
    return cell


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
