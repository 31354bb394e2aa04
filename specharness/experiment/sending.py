"""Send one cell's cases to one arm's engine: a closed loop of ``clients`` workers, or an open loop on the block's
arrival schedule. Every request is journaled the moment it ends; the records come back to the caller."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace

import httpx

from specharness.experiment.context import RunContext
from specharness.experiment.design import Profile
from specharness.experiment.plan import CellPlan
from specharness.records import RequestRecord, cell_id
from specharness.traffic.arrivals import ArrivalSpec, block_seed, schedule
from specharness.traffic.client import RequestMeta, build_body, send_request
from specharness.traffic.openloop import run_open_loop
from specharness.traffic.replay import replay_conversation, skipped_record
from specharness.traffic.workloads import Case

__all__ = ["WARMUP_SEED_OFFSET", "Sent", "arrival_offsets", "send_cases", "slowed"]

WARMUP_SEED_OFFSET = 1_000_003  # warmup schedules draw from other seeds than the measured ones


@dataclass(frozen=True, slots=True)
class Sent:
    """What sending a cell's cases gave: the journaled request records and, for an open loop, the delivery figures
    (how faithfully the schedule was kept; empty for a closed loop)."""

    records: list[RequestRecord]
    delivery: dict[str, float | bool] = field(default_factory=dict)


def slowed(record: RequestRecord, factor: float) -> RequestRecord:
    """The record as if the request had taken ``factor`` times as long: TTFT, chunk arrivals and end-to-end time
    scaled alike, so TPOT and the same-work ratio move by exactly ``factor`` at any concurrency (the engine's load
    is untouched: only what the control arm reports changes). Failed requests keep their NaN times."""
    return replace(
        record,
        ttft_s=record.ttft_s * factor,
        e2e_s=record.e2e_s * factor,
        chunk_arrival_s=[t * factor for t in record.chunk_arrival_s],
    )


def arrival_offsets(profile: Profile, plan: CellPlan, n: int, warmup: bool) -> tuple[float, ...]:
    """The send offsets of an open-loop cell: drawn from the block's seed, so every arm of the block gets the
    identical schedule (and every block, workload and rate its own)."""
    rate = float(plan.load.rate)
    seed = block_seed(profile.arrival_seed, plan.block + (WARMUP_SEED_OFFSET if warmup else 0), plan.workload, rate)
    spec = ArrivalSpec(rate, burstiness=profile.burstiness, seed=seed, max_concurrency=profile.max_concurrency)
    return schedule(spec, n)


async def send_cases(
    ctx: RunContext,
    plan: CellPlan,
    arm: str,
    cases: list[Case],
    warmup: bool,
    client: httpx.AsyncClient,
    first_seq: int = 0,
) -> Sent:
    """Send the cases at the cell's load: a closed loop of ``clients`` workers, or an open loop on the block's
    arrival schedule (the same for every arm of the block). A replayed conversation (a case with ``turns``)
    occupies its worker, or its open-loop slot, from its first turn to its last
    (:func:`~specharness.traffic.replay.replay_conversation`); the schedule and the delivery figures are per case,
    i.e. per conversation start. ``first_seq`` numbers the first case (a round of an interleaved cell sends a slice
    of the cell's cases)."""
    records: list[RequestRecord] = []
    server = ctx.engines.servers[arm]
    this_cell = cell_id(plan.key(arm), ctx.segment)
    slowdown = server.arm.client_slowdown
    load = plan.load

    def sink(record: RequestRecord) -> None:
        if ctx.segment:
            record = replace(record, resumed=True)
        if slowdown > 1:  # the known-effect control: every recorded time taken `slowdown` times as long
            record = slowed(record, slowdown)
        ctx.journal.write(record)
        records.append(record)

    async def send(seq: int, case: Case, scheduled_s: float = float("nan"), lateness_s: float = float("nan")) -> None:
        """One case: one request, or a replayed conversation turn by turn (all its turns share ``seq``; only turn 1
        has a scheduled send, the later ones go out when the previous answer ends)."""

        def meta(turn: int) -> RequestMeta:
            first = turn == 1
            return RequestMeta(
                arm=arm,
                block=plan.block,
                workload=plan.workload,
                clients=plan.clients,
                warmup=warmup,
                cell=this_cell,
                seq=seq,
                rate=load.rate,
                scheduled_s=scheduled_s if first else float("nan"),
                send_lateness_s=lateness_s if first else float("nan"),
            )

        async def send_turn(request: Case, turn: int) -> RequestRecord:
            body = build_body(request, ctx.engines.model_name, ctx.sampling)
            return await send_request(
                client,
                server.base_url,
                request,
                body,
                meta(turn),
                sink,
                timeout_s=ctx.request_timeout_s,
                headers=ctx.engines.headers(),
            )

        def skip_turn(request: Case, turn: int) -> None:
            sink(skipped_record(request, meta(turn)))

        await replay_conversation(case, send_turn, skip_turn)
        if ctx.progress and not warmup:  # progress counts cases (a conversation once), as the profile does
            ctx.progress(1)

    if load.open_loop:
        p = ctx.profile
        stats = await run_open_loop(
            cases,
            arrival_offsets(p, plan, len(cases), warmup),
            send,
            max_concurrency=p.max_concurrency,
            late_tolerance_s=p.late_tolerance_s,
            min_on_time_fraction=p.min_on_time_fraction,
        )
        return Sent(records, {} if warmup else stats.figures())

    queue: asyncio.Queue[tuple[int, Case]] = asyncio.Queue()
    for seq, case in enumerate(cases, start=first_seq):
        queue.put_nowait((seq, case))

    async def worker() -> None:
        while True:
            try:
                seq, case = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            await send(seq, case)

    await asyncio.gather(*(worker() for _ in range(min(plan.clients, len(cases)))))
    return Sent(records)
