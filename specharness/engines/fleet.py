"""Starting the engines of one run: together on the CPU, one after another with a memory share each on one GPU.

:func:`plan_launch` decides the order and each arm's ``gpu_memory_utilization`` from a device reading (pure);
:func:`launch` starts the servers by that :class:`LaunchPlan`, retries a start that failed for memory once, one by
one, and returns a :class:`LaunchReport` for the journal; :func:`pooled_plan` and :func:`fits` serve the engine pool.
Rules: docs/development.md#the-fleet-launcher.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from specharness._errors import ConfigError, EngineError
from specharness.engines.memory import DeviceMemory, MemoryProbe
from specharness.engines.server import ArmSpec, EngineSettings
from specharness.engines.startlog import is_memory_failure

__all__ = [
    "MODES",
    "LaunchEvent",
    "LaunchPlan",
    "LaunchReport",
    "fits",
    "launch",
    "plan_launch",
    "pooled_plan",
    "stop_together",
]

MODES = ("auto", "together", "one-by-one")
_HEADROOM_FRACTION = 0.04  # of the device's total memory, kept free for the CUDA contexts and allocator slack
_HEADROOM_MIN_MIB = 1024.0
_MIN_SHARE = 0.05  # below this no engine fits; the plan says so instead of starting engines that must fail


class Stoppable(Protocol):
    """What :func:`stop_together` needs of a server."""

    def stop(self, grace_s: float | None = ...) -> None: ...


class Startable(Stoppable, Protocol):
    """What :func:`launch` needs of a server (EngineServer has it)."""

    settings: EngineSettings
    arm: ArmSpec

    def spawn(self) -> None: ...
    def wait_ready(self) -> None: ...


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """How to start the arms: ``strategy`` "together" or "one-by-one", each arm's ``gpu_memory_utilization``
    (None: the user's value or vLLM's default), and why."""

    strategy: str
    shares: dict[str, float | None]
    reason: str


@dataclass(frozen=True, slots=True)
class LaunchEvent:
    """One step of a launch, for progress lines and the journal."""

    arm: str  # "" for the whole fleet
    what: str  # "plan", "spawn", "ready", "failed", "retry"
    detail: str


@dataclass(frozen=True, slots=True)
class LaunchReport:
    """What :func:`launch` decided and did: requested ``mode``, the device it saw, the plan it started with, the
    plan of the retry (if any), the start order, and the failure that caused the retry."""

    mode: str
    device: str  # "cpu (no NVIDIA GPU seen through NVML)" or the GPU's name
    device_total_mib: float
    device_free_mib: float
    plan: LaunchPlan
    order: tuple[str, ...]
    retry_plan: LaunchPlan | None = None
    retry_cause: str = ""
    events: tuple[LaunchEvent, ...] = field(default=(), repr=False)
    failed: dict[str, str] = field(default_factory=dict)  # arm -> why its engine did not start (tolerated failures)
    errors: dict[str, EngineError] = field(default_factory=dict, repr=False)  # the same failures, as raised

    @property
    def final_plan(self) -> LaunchPlan:
        return self.retry_plan or self.plan

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form for the manifest and the journal."""

        def plan(p: LaunchPlan | None) -> dict[str, Any] | None:
            return None if p is None else {"strategy": p.strategy, "shares": dict(p.shares), "reason": p.reason}

        return {
            "mode": self.mode,
            "device": self.device,
            "device_total_mib": None if math.isnan(self.device_total_mib) else round(self.device_total_mib, 1),
            "device_free_mib": None if math.isnan(self.device_free_mib) else round(self.device_free_mib, 1),
            "plan": plan(self.plan),
            "order": list(self.order),
            "retry_plan": plan(self.retry_plan),
            "retry_cause": self.retry_cause,
            **({"failed": dict(self.failed)} if self.failed else {}),
        }


def memory_share(device: DeviceMemory, arms: int) -> float:
    """Each arm's ``gpu_memory_utilization`` when ``arms`` engines share ``device``: the free memory less headroom,
    split evenly, as a fraction of the total (vLLM's unit), rounded down to 0.01."""
    headroom = max(_HEADROOM_MIN_MIB, _HEADROOM_FRACTION * device.total_mib)
    usable = max(0.0, device.free_mib - headroom)
    return math.floor(usable / arms / device.total_mib * 100 + 1e-9) / 100  # 0.96 / 3 is 0.32, not 0.31


def _check_user_share(arms: Sequence[str], user_share: float, device: DeviceMemory) -> None:
    """A share the user set for every arm must fit the device that many times, with the headroom :func:`fits` keeps:
    else the last engine cannot start (vLLM refuses it, or it finds no memory for its KV cache) after the others took
    minutes to start."""
    n = len(arms)
    if n * user_share * device.total_mib + _HEADROOM_MIN_MIB > device.total_mib:
        most = memory_share(DeviceMemory(device.name, device.total_mib, device.total_mib), n)
        raise ConfigError(
            f"--gpu-memory-utilization {user_share} for each of {n} arms asks for {n * user_share:.2f} of "
            f"{device.name}, which needs room for its CUDA contexts too: give at most {most:.2f}, or leave it out "
            "and the harness splits the device"
        )


def plan_launch(
    arms: Sequence[str],
    device: DeviceMemory | None,
    *,
    mode: str = "auto",
    user_share: float | None = None,
    side_by_side: bool = True,
) -> LaunchPlan:
    """Decide how to start ``arms`` on ``device`` (None: the CPU build). Pure: the NVML reading comes in.
    ``side_by_side``: the engines run at the same time (a run), so a user's share must fit every arm; False for
    engines started one at a time, each stopped before the next (``specharness starts``)."""
    if mode not in MODES:
        raise ConfigError(f"engine start mode {mode!r} is unknown; use one of {', '.join(MODES)}")
    none: dict[str, float | None] = dict.fromkeys(arms)
    if device is None:
        strategy = "one-by-one" if mode == "one-by-one" else "together"
        why = "asked for" if mode != "auto" else "no NVIDIA GPU seen: the CPU build, each engine has its own KV space"
        return LaunchPlan(strategy, none, f"{strategy}: {why}")
    if len(arms) < 2:
        return LaunchPlan("one-by-one", dict.fromkeys(arms, user_share), "one engine on the GPU: nothing to share")
    strategy = "together" if mode == "together" else "one-by-one"
    order_why = (
        "together: asked for; engines profile memory while the others allocate"
        if strategy == "together"
        else "one by one: each engine profiles memory only after the previous one holds its share"
    )
    if user_share is not None:
        if side_by_side:
            _check_user_share(arms, user_share, device)
        return LaunchPlan(
            strategy,
            dict.fromkeys(arms, user_share),
            f"{order_why}; gpu_memory_utilization {user_share} for every arm, as the user set it",
        )
    share = memory_share(device, len(arms))
    if share < _MIN_SHARE:
        raise EngineError(
            f"{len(arms)} engines do not fit on {device.name}: {device.free_mib:.0f} of "
            f"{device.total_mib:.0f} MiB free leaves a share of {share:.2f} each; free the GPU or pass "
            f"--gpu-memory-utilization"
        )
    return LaunchPlan(
        strategy,
        dict.fromkeys(arms, share),
        f"{order_why}; {len(arms)} arms share {device.name}: {device.free_mib:.0f} of "
        f"{device.total_mib:.0f} MiB free, less headroom, split evenly: gpu_memory_utilization "
        f"{share:.2f} each",
    )


def pooled_plan(
    arms: Sequence[str], device: DeviceMemory | None, *, slots: int, user_share: float | None = None
) -> LaunchPlan:
    """How engines taken from an engine pool start (:mod:`specharness.engines.pool`). On the CPU build: together,
    as :func:`plan_launch` does. On a GPU every pooled engine gets the same fixed share, ``1/max(slots, arms)`` of
    the whole device less headroom (or the user's share), whatever is free now, so that an engine started for one run
    has the share the next run asks for and can serve it; they start one by one, and idle pooled engines are stopped
    when a new one needs room. Pure: the NVML reading comes in."""
    if device is None:
        return LaunchPlan("together", dict.fromkeys(arms), "pooled, together: no NVIDIA GPU seen: the CPU build")
    n = max(slots, len(arms))
    if user_share is not None:
        _check_user_share(arms, user_share, device)
        return LaunchPlan(
            "one-by-one",
            dict.fromkeys(arms, user_share),
            f"pooled on {device.name}, one by one; gpu_memory_utilization {user_share} for every engine, as the user "
            "set it; idle pooled engines are stopped while a new one lacks room",
        )
    share = memory_share(DeviceMemory(device.name, device.total_mib, device.total_mib), n)
    if share < _MIN_SHARE:
        raise EngineError(
            f"{n} pooled engines do not fit on {device.name} (a share of {share:.2f} each); lower the "
            "pool's GPU slots or pass --gpu-memory-utilization"
        )
    return LaunchPlan(
        "one-by-one",
        dict.fromkeys(arms, share),
        f"pooled on {device.name}, one by one: every pooled engine gets 1/{n} of the device's "
        f"{device.total_mib:.0f} MiB less headroom, gpu_memory_utilization {share:.2f} (fixed, so one run's engines "
        "fit the next); idle pooled engines are stopped while a new one lacks room",
    )


def fits(device: DeviceMemory, share: float) -> bool:
    """Whether an engine asking for ``share`` of ``device`` (vLLM's ``gpu_memory_utilization``) can start now: vLLM
    refuses a start when less than that is free; the headroom's minimum is kept on top."""
    return device.free_mib >= share * device.total_mib + _HEADROOM_MIN_MIB


def _apply(servers: Sequence[Startable], plan: LaunchPlan) -> None:
    for server in servers:
        share = plan.shares.get(server.arm.name)
        if share is not None and share != server.settings.gpu_memory_utilization:
            server.settings = replace(server.settings, gpu_memory_utilization=share)


def stop_together(servers: Sequence[Stoppable]) -> None:
    """Stop every server at once, each by its own ``stop`` (its grace, then SIGKILL), so that an interrupted start of
    several engines waits out one grace, not one each."""
    if len(servers) < 2:
        for server in servers:
            server.stop()
        return
    with ThreadPoolExecutor(max_workers=len(servers), thread_name_prefix="engine-stop") as pool:
        for done in [pool.submit(server.stop) for server in servers]:
            done.result()


def _start(
    servers: Sequence[Startable], strategy: str, say: Callable[[LaunchEvent], None], *, tolerate: bool = False
) -> dict[str, EngineError]:
    """Start every server by ``strategy``. A failure stops the others and is raised; with ``tolerate`` an engine that
    fails to start is stopped and returned (by arm) while the others go on."""
    failed: dict[str, EngineError] = {}

    def failing(server: Startable, error: EngineError) -> None:
        if not tolerate:
            raise error
        server.stop()
        failed[server.arm.name] = error
        say(LaunchEvent(server.arm.name, "failed", str(error)))

    try:
        if strategy == "together":
            for server in servers:
                try:
                    server.spawn()
                    say(LaunchEvent(server.arm.name, "spawn", "started together"))
                except EngineError as error:
                    failing(server, error)
            for server in servers:
                if server.arm.name in failed:
                    continue
                try:
                    server.wait_ready()
                    say(LaunchEvent(server.arm.name, "ready", ""))
                except EngineError as error:
                    failing(server, error)
        else:
            for server in servers:
                try:
                    server.spawn()
                    say(LaunchEvent(server.arm.name, "spawn", "started after the previous engine was ready"))
                    server.wait_ready()
                    say(LaunchEvent(server.arm.name, "ready", ""))
                except EngineError as error:
                    failing(server, error)
    except BaseException as error:
        stop_together(servers)
        if isinstance(error, EngineError):
            say(LaunchEvent("", "failed", str(error)))
        raise
    return failed


def launch(
    servers: Sequence[Startable],
    *,
    mode: str = "auto",
    on_event: Callable[[LaunchEvent], None] | None = None,
    probe: Callable[[], DeviceMemory | None] | None = None,
    tolerate: bool = False,
) -> LaunchReport:
    """Start the servers of one run's arms (already constructed, not spawned) and return what was decided.

    ``mode``: "auto" (together on the CPU; one by one with a memory share each on a GPU), "together" or
    "one-by-one" (``--start-one-by-one``). ``probe`` reads the engines' GPU (default: NVML through
    :class:`MemoryProbe`; None from it means the CPU build). A start that fails for memory is retried once, one by
    one, with shares from a fresh reading; any other failure, or a second one, raises the engine's error (its message
    names the cause from the engine log). With ``tolerate`` an engine that fails for another reason is stopped and
    named in the report's ``failed`` (its error's message), and the others start."""
    read = probe or MemoryProbe().engine_device
    events: list[LaunchEvent] = []

    def say(event: LaunchEvent) -> None:
        events.append(event)
        if on_event is not None:
            on_event(event)

    arms = [s.arm.name for s in servers]
    user_share = next((s.settings.gpu_memory_utilization for s in servers), None)
    device = read()
    plan = plan_launch(arms, device, mode=mode, user_share=user_share)
    say(LaunchEvent("", "plan", plan.reason))
    _apply(servers, plan)
    report = LaunchReport(
        mode=mode,
        device=device.name if device else "cpu (no NVIDIA GPU seen through NVML)",
        device_total_mib=device.total_mib if device else math.nan,
        device_free_mib=device.free_mib if device else math.nan,
        plan=plan,
        order=tuple(arms),
    )
    try:
        failed = _start(servers, plan.strategy, say, tolerate=tolerate)
        memory = [str(e) for e in failed.values() if is_memory_failure(str(e))]
        if memory:  # tolerated, yet a memory failure: every engine is stopped and the start retried one by one
            stop_together(servers)
            raise EngineError(memory[0])
    except EngineError as error:
        if not is_memory_failure(str(error)):
            raise
        cause = str(error)
        device = read()
        retry = plan_launch(arms, device, mode="one-by-one", user_share=user_share)
        retry = replace(retry, reason=f"retry after a memory failure: {retry.reason}")
        say(LaunchEvent("", "retry", retry.reason))
        _apply(servers, retry)
        try:
            failed = _start(servers, retry.strategy, say, tolerate=tolerate)
        except EngineError as again:
            raise type(again)(f"{again} (retried one by one after: {cause})") from None
        report = replace(report, retry_plan=retry, retry_cause=cause)
    return replace(report, events=tuple(events), failed={arm: str(e) for arm, e in failed.items()}, errors=failed)
