"""The engines of a run: start one per arm (or attach to engines started elsewhere), journal them, stop them.

:func:`launch_servers` builds the servers and hands them to the fleet launcher (:mod:`specharness.engines.fleet`),
which decides how they start (together, or one by one with a GPU memory share each) and retries a memory failure.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from specharness._errors import ConfigError
from specharness.engines.attached import AttachedEngine, check_speculation
from specharness.engines.fleet import LaunchReport, launch, pooled_plan
from specharness.engines.memory import MemoryProbe
from specharness.engines.model import ResolvedModel, served_model_name
from specharness.engines.pool import EnginePool, PooledEngine, gpu_slots, pool_applies, pool_from_env
from specharness.engines.server import ArmSpec, EngineServer, EngineSettings, stop_all
from specharness.experiment.config import RunConfig
from specharness.experiment.journal import Journal
from specharness.experiment.rundir import engine_log
from specharness.records import AttachWarningEvent, EngineLaunchEvent, EngineRecord, EngineSpawnedEvent

__all__ = [
    "EngineSet",
    "attach_engines",
    "engine_settings",
    "launch_servers",
    "pooled",
    "pooled_engines",
    "running_engines",
    "start_engines",
]

Engine = EngineServer | AttachedEngine
_POOL: contextvars.ContextVar[EnginePool | None] = contextvars.ContextVar("engine_pool", default=None)


@contextlib.contextmanager
def pooled(pool: EnginePool | None) -> Iterator[None]:
    """Runs in the body of the ``with`` take their engines from ``pool`` (None: start their own, unless
    SPECHARNESS_ENGINE_POOL names a pool)."""
    token = _POOL.set(pool)
    try:
        yield
    finally:
        _POOL.reset(token)


def takes_from_pool(config: RunConfig, model: ResolvedModel | None) -> bool:
    """Whether :func:`running_engines` will take this run's engines from an engine pool (the same decision)."""
    return not config.attach and model is not None and _active_pool(config, engine_settings(config, model)) is not None


def _active_pool(config: RunConfig, settings: EngineSettings) -> EnginePool | None:
    pool = _POOL.get() or pool_from_env()
    if pool is None or not config.start_together:
        return None
    return pool if pool_applies(settings) else None


@dataclass(slots=True)
class EngineSet:
    """The run's engines by arm and the model name they serve; ``api_key`` goes in every request's headers."""

    servers: dict[str, Engine] = field(default_factory=dict)
    model_name: str = "model"
    api_key: str | None = field(default=None, repr=False)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def stop(self) -> None:
        """Stop every engine this run started (an attached engine is left running)."""
        for server in self.servers.values():
            server.stop()


def engine_settings(config: RunConfig, model: ResolvedModel) -> EngineSettings:
    """The engine arguments every arm shares, from the run configuration."""
    c = config
    settings = EngineSettings(
        model_path=str(model.serve_path),
        served_model_name=served_model_name(model),
        host=c.host,
        port=c.port,
        max_model_len=c.max_model_len,
        dtype=c.dtype,
        seed=c.sampling.seed or 0,
        kv_cache_gib=c.kv_cache_gib,
        gpu_memory_utilization=c.gpu_memory_utilization,
        api_key=c.api_key,
        extra_args=c.extra_engine_args,
        start_timeout_s=c.start_timeout_s,
    )
    return replace(settings, python=c.python) if c.python else settings


def launch_servers(
    settings: EngineSettings,
    arms: Sequence[ArmSpec],
    log_paths: Mapping[str, Path],
    *,
    mode: str,
    on_spawn: Callable[[str, int], None],
) -> tuple[dict[str, EngineServer], LaunchReport]:
    """Build one server per arm and start them with :func:`specharness.engines.fleet.launch` (``mode``: "auto" —
    together on the CPU, one by one with a memory share each when they share a GPU, a memory failure retried one by
    one —, "together" or "one-by-one"). Returns the servers by arm name, every one ready, and what the launcher
    decided. A non-zero ``settings.port`` is the first port (arm ``i`` gets ``port + i``). ``on_spawn(arm, pid)`` runs
    as each process starts. A start that fails raises the engine's error (naming the cause from its log)."""
    servers: dict[str, EngineServer] = {}
    for arm in arms:
        arm_settings = replace(settings, port=settings.port + len(servers)) if settings.port else settings
        server = EngineServer(arm_settings, arm, log_paths[arm.name])
        server.on_spawn = lambda pid, name=arm.name: on_spawn(name, pid)
        servers[arm.name] = server
    report = launch(list(servers.values()), mode=mode)
    return servers, report


def start_engines(
    config: RunConfig, arms: Sequence[ArmSpec], model: ResolvedModel, *, segment: int, journal: Journal
) -> EngineSet:
    """Start every arm's engine (:func:`launch_servers`) and journal each: an ``engine_spawned`` event as its
    process starts, an :class:`~specharness.records.EngineRecord` (command, version, settings, memory, the start's
    phases, and ``first_request_s``: one short request's time right after the start) once ready."""
    probe = MemoryProbe()
    before = probe.as_fields("before_start", [])
    engines = EngineSet(model_name=served_model_name(model), api_key=config.api_key)
    servers, launched = launch_servers(
        engine_settings(config, model),
        arms,
        {arm.name: engine_log(config.out_dir, arm.name, segment) for arm in arms},
        mode="auto" if config.start_together else "one-by-one",
        on_spawn=lambda arm, pid: journal.write(EngineSpawnedEvent(arm=arm, pid=pid, segment=segment)),
    )
    engines.servers.update(servers)
    journal.write(EngineLaunchEvent(segment=segment, report=launched.as_dict()))
    for arm in arms:
        server = servers[arm.name]
        journal.write(
            _engine_record(
                config,
                arm,
                server,
                server.effective_settings(),
                pid=server.process.pid if server.process else -1,
                memory={**before, **probe.as_fields("engine_ready", server.pids())},
                start_phases_s=server.start_phases().as_dict(),
                first_request_s=server.time_request(engines.model_name),
            )
        )
    return engines


def _engine_record(
    config: RunConfig,
    arm: ArmSpec,
    engine: EngineServer | PooledEngine,
    effective: dict[str, Any],
    *,
    pid: int,
    memory: dict[str, Any],
    start_phases_s: dict[str, float],
    first_request_s: float = math.nan,
    reused: dict[str, Any] | None = None,
) -> EngineRecord:
    """The journal's record of an engine this run started or took from the pool (one format for both)."""
    return EngineRecord(
        arm=arm.name,
        command=engine.command,
        log_path=str(engine.log_path.relative_to(config.out_dir)),
        port=engine.port,
        vllm_version=engine.version,
        start_s=engine.start_s,
        pid=pid,
        async_scheduling=effective.get("async_scheduling"),
        speculative_config=arm.speculative_config,
        effective_settings=effective,
        memory=memory,
        engine_env=dict(engine.engine_env),
        start_phases_s=start_phases_s,
        first_request_s=first_request_s,
        reused=reused,
    )


def pooled_engines(
    config: RunConfig,
    arms: Sequence[ArmSpec],
    model: ResolvedModel,
    pool: EnginePool,
    *,
    segment: int,
    journal: Journal,
) -> EngineSet:
    """Take every arm's engine from ``pool`` (started there by a keeper if no live one has the same engine key) and
    journal how (an ``engine_launch`` event: on a GPU each pooled engine's fixed memory share and the one-by-one
    order, :func:`~specharness.engines.fleet.pooled_plan`) and each engine as an
    :class:`~specharness.records.EngineRecord` with ``reused``: who started it, when, the requests it had served
    before this run, its pids. Stopping the set releases the engines to the pool."""
    probe = MemoryProbe()
    device = probe.engine_device()
    plan = pooled_plan([a.name for a in arms], device, slots=gpu_slots(), user_share=config.gpu_memory_utilization)
    engines = EngineSet(model_name=served_model_name(model), api_key=config.api_key)
    held = pool.acquire(
        engine_settings(config, model),
        arms,
        started_by=config.out_dir.name,
        run_logs={arm.name: engine_log(config.out_dir, arm.name, segment) for arm in arms},
        plan=plan,
        probe=probe.engine_device if device is not None else None,
        say=lambda message: print(f"specharness: {message}", file=sys.stderr, flush=True),
    )
    launched = LaunchReport(
        mode="pooled",
        device=device.name if device else "cpu (no NVIDIA GPU seen through NVML)",
        device_total_mib=device.total_mib if device else math.nan,
        device_free_mib=device.free_mib if device else math.nan,
        plan=plan,
        order=tuple(a.name for a in arms),
    )
    journal.write(EngineLaunchEvent(segment=segment, report=launched.as_dict()))
    engines.servers.update(held)
    for arm in arms:
        engine = held[arm.name]
        assert engine.lease is not None
        effective = engine.effective_settings()
        effective.pop("attached_url", None)
        journal.write(
            _engine_record(
                config,
                arm,
                engine,
                effective,
                pid=engine.lease.pid,
                memory=probe.as_fields("engine_ready", engine.pids()),
                start_phases_s=dict(engine.lease.start_phases_s),
                reused=engine.reuse_record(),
            )
        )
    return engines


def attach_engines(config: RunConfig, arms: Sequence[ArmSpec], *, segment: int, journal: Journal) -> EngineSet:
    """Engines started elsewhere (``--attach``): wait for each URL's /health, read its version and served model;
    nothing is started, and :meth:`EngineSet.stop` leaves them running. A URL whose speculation does not match its
    arm (a swapped or mis-set URL would invert every verdict) is journaled and refused before anything is measured."""
    engines = EngineSet(api_key=config.api_key)
    attached = []
    for arm in arms:
        engine = AttachedEngine(
            arm,
            config.attach[arm.name],
            engine_log(config.out_dir, arm.name, segment),
            api_key=config.api_key,
            start_timeout_s=config.start_timeout_s,
        )
        engine.spawn()
        engines.servers[arm.name] = engine
        attached.append(engine)
    models = set()
    for engine in attached:
        engine.wait_ready()
        models.add(engine.served_model())
        warning = check_speculation(engine, engine.arm.speculative_config is not None)
        if warning:
            journal.write(AttachWarningEvent(arm=engine.arm.name, message=warning))
            raise ConfigError(f"--attach {engine.arm.name}={engine.base_url}: {warning}; check the URLs")
        journal.write(
            EngineRecord(
                arm=engine.arm.name,
                command=[],
                log_path=str(engine.log_path.relative_to(config.out_dir)),
                port=engine.port,
                vllm_version=engine.version,
                start_s=engine.start_s,
                pid=-1,
                async_scheduling=None,
                speculative_config=engine.arm.speculative_config,
                effective_settings=engine.effective_settings(),
                memory={},
            )
        )
    if len(models) != 1:
        raise ConfigError(
            f"--attach: the engines serve different models ({', '.join(sorted(models))}); a paired comparison needs "
            "the same model behind every URL"
        )
    engines.model_name = models.pop()
    return engines


@contextlib.contextmanager
def running_engines(
    config: RunConfig,
    arms: Sequence[ArmSpec],
    model: ResolvedModel | None,
    *,
    segment: int,
    journal: Journal,
) -> Iterator[EngineSet]:
    """Start (or, with ``config.attach``, attach to; inside :func:`pooled` or with SPECHARNESS_ENGINE_POOL set, take
    from the pool) the arms' engines for the body of a ``with``; every engine this process started is stopped on the
    way out, whatever happened (a start that failed half-way included), and pooled ones are released."""
    engines: EngineSet | None = None
    try:
        if config.attach:
            engines = attach_engines(config, arms, segment=segment, journal=journal)
        else:
            if model is None:
                raise ValueError("running_engines: a model is needed unless the run attaches to engines")
            pool = _active_pool(config, engine_settings(config, model))
            if pool is not None:
                engines = pooled_engines(config, arms, model, pool, segment=segment, journal=journal)
            else:
                engines = start_engines(config, arms, model, segment=segment, journal=journal)
        yield engines
    finally:
        if engines is not None:
            engines.stop()
        stop_all()
