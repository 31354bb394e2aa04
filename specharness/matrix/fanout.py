"""The fan-out on Ray: one actor per slot, each pinned to its node (and GPU), the jobs handed to whichever slot is
free, a job whose worker or host was lost retried once.

:func:`connect` joins a Ray cluster (or starts Ray on this host); :func:`start_slots` places a
:class:`~specharness.matrix.worker.SlotWorker` actor on every slot; :func:`fan_out` runs the jobs and returns every
attempt's :class:`~specharness.matrix.worker.JobOutcome`. vLLM is never started inside Ray's own processes or
placement groups (vllm#14610): each job is a ``specharness run`` subprocess of its slot's actor.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import ray
from ray.exceptions import RayError, RayTaskError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from specharness._errors import ConfigError
from specharness.matrix.pinning import SlotPlan
from specharness.matrix.plan import Job
from specharness.matrix.worker import JobOutcome, SlotWorker

__all__ = ["MAX_ATTEMPTS", "Slot", "connect", "fan_out", "start_slots", "stop_slots"]

MAX_ATTEMPTS = 2  # a job lost with its worker or host is retried once
_READY_S = 300.0  # how long a slot's actor may take to start
_LOCAL_STORE_B = 512 * 2**20  # a local Ray's object store: run folders pass through it, one at a time per slot


class _RaySlotWorker(SlotWorker):
    """A :class:`SlotWorker` as a Ray actor: the GPU Ray gave it is named explicitly to the job."""

    def __init__(self, slot: SlotPlan, scratch: str, **options: Any) -> None:
        super().__init__(slot, scratch, gpu_ids=[str(g) for g in ray.get_gpu_ids()], **options)


_RemoteSlot = ray.remote(max_restarts=0, max_task_retries=0)(_RaySlotWorker)


@dataclass(slots=True)
class Slot:
    """A slot and its live actor (replaced in place when lost; None once the slot is given up)."""

    plan: SlotPlan
    actor: Any
    pinning: str


def connect(address: str, num_cpus: int | None = None) -> bool:
    """Join the Ray cluster at ``address``, or start Ray on this host when it is empty (``num_cpus`` its CPUs;
    no dashboard). Returns whether this call started Ray (then the caller shuts it down). An already initialised
    Ray is used as it is."""
    if ray.is_initialized():
        return False
    try:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(
                num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, object_store_memory=_LOCAL_STORE_B
            )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = f"the Ray cluster at {address}" if address else "a local Ray"
        raise ConfigError(f"cannot start or join {where} ({exc}); check the address (ray status)") from None
    return True


def _start(plan: SlotPlan, scratch: str, options: dict[str, Any]) -> Slot:
    strategy = NodeAffinitySchedulingStrategy(plan.node_id, soft=False)
    if plan.gpu:
        resources: dict[str, Any] = {"num_gpus": 1, "num_cpus": 1}
    else:
        resources = {"num_cpus": plan.cores_per_job}
    actor = _RemoteSlot.options(scheduling_strategy=strategy, **resources).remote(plan, scratch, **options)
    pinning = ray.get(actor.describe.remote(), timeout=_READY_S)  # type: ignore[attr-defined]
    return Slot(plan, actor, str(pinning))


def _restart(slot: Slot, scratch: str, options: dict[str, Any]) -> bool:
    """Give ``slot`` a fresh actor in place of its lost one (its resources freed first); False, and no actor, when
    none starts (its node is gone)."""
    ray.kill(slot.actor)
    try:
        fresh = _start(slot.plan, scratch, options)
    except RayError:
        slot.actor = None
        return False
    slot.actor, slot.pinning = fresh.actor, fresh.pinning
    return True


def stop_slots(slots: Sequence[Slot]) -> None:
    """End every slot's actor (its resources go back to the cluster)."""
    for slot in slots:
        if slot.actor is not None:
            ray.kill(slot.actor)


def start_slots(plans: Sequence[SlotPlan], scratch: str, **options: Any) -> list[Slot]:
    """An actor on every slot, each on its own node (``options``: :class:`SlotWorker`'s keyword arguments)."""
    slots = []
    for plan in plans:
        try:
            slots.append(_start(plan, scratch, options))
        except RayError as exc:
            cause = exc.cause if isinstance(exc, RayTaskError) else exc
            raise ConfigError(
                f"the worker of slot {plan.key} did not start ({type(cause).__name__}: {str(cause).strip()[:300]}); "
                "check the cluster (ray status) and that specharness is installed on every node"
            ) from None
    return slots


def _unrun(job: Job, attempt: int, slot: Slot, started: float, status: str, reason: str) -> JobOutcome:
    """The outcome of an attempt that sent no result back: its slot and times, ``status`` and ``reason``."""
    return JobOutcome(
        job=job.key,
        attempt=attempt,
        status=status,
        reason=reason,
        host="",
        node_ip=slot.plan.node_ip,
        machine="",
        slot=slot.pinning,
        started_unix_s=started,
        ended_unix_s=time.time(),
    )


def _lost_reason(slot: Slot, exc: RayError) -> str:
    first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    return f"the worker on {slot.plan.node_ip} was lost ({type(exc).__name__}{': ' + first if first else ''})"


def fan_out(
    jobs: Sequence[Job],
    slots: list[Slot],
    *,
    timeout_s: float,
    scratch: str,
    worker_options: dict[str, Any],
    say: Callable[[str], None] = lambda _: None,
) -> list[JobOutcome]:
    """Run ``jobs`` on ``slots``, in order, each on the first free slot; every attempt's outcome, in the order they
    ended. A job whose attempt was ``lost`` (its worker or host) is retried once, first in the queue, and its slot
    gets a fresh actor in place (a slot whose actor cannot be started again is given up: its actor None). Jobs left
    when no slot is left fail with that reason: no job is dropped without an outcome."""
    queue = collections.deque(jobs)
    attempts: collections.Counter[str] = collections.Counter()
    idle = [s for s in slots if s.actor is not None]
    running: dict[Any, tuple[Slot, Job, float]] = {}
    outcomes: list[JobOutcome] = []
    while queue or running:
        while queue and idle:
            slot, job = idle.pop(0), queue.popleft()
            attempts[job.key] += 1
            ref = slot.actor.run.remote(job, attempts[job.key], timeout_s)
            running[ref] = (slot, job, time.time())
            say(f"{job.key}: started on {slot.pinning} (attempt {attempts[job.key]})")
        if not running:  # jobs queued and no slot left
            for job in queue:
                outcomes.append(
                    JobOutcome(job.key, attempts[job.key] + 1, "failed", "no worker left to run it", "", "", "", "")
                )
            break
        [ref], _ = ray.wait(list(running), num_returns=1)
        slot, job, started = running.pop(ref)
        try:
            outcome: JobOutcome = ray.get(ref)
        except RayTaskError as exc:  # the worker's own code raised: the job's failure, not the host's
            cause = exc.cause if isinstance(exc.cause, BaseException) else exc
            why = f"the worker could not run the job: {type(cause).__name__}: {cause}"
            outcome = _unrun(job, attempts[job.key], slot, started, "failed", why)
        except RayError as exc:
            outcome = _unrun(job, attempts[job.key], slot, started, "lost", _lost_reason(slot, exc))
        outcomes.append(outcome)
        say(f"{job.key}: {outcome.status}" + (f" ({outcome.reason})" if outcome.reason else ""))
        if outcome.status == "lost":
            if attempts[job.key] < MAX_ATTEMPTS:
                queue.appendleft(job)
            if not _restart(slot, scratch, worker_options):
                say(f"slot {slot.plan.key} given up: its worker did not start again")
                continue
        idle.append(slot)
    return outcomes
