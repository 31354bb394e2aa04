"""The engines of a run: decide each arm's engine once (:func:`plan_engines`), then start one per arm (or attach to
engines started elsewhere, or take them from an engine pool), journal them, stop them.

:func:`launch_servers` builds the servers and hands them to the fleet launcher (:mod:`specharness.engines.fleet`),
which decides how they start (together, or one by one with a GPU memory share each) and retries a memory failure.
An arm whose engine fails to start (or whose release has no environment) is journaled as failed and the run goes on
with the others, as long as one of its comparisons still has both arms.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from specharness._errors import ConfigError, EngineError
from specharness.console import say
from specharness.engines.attached import AttachedEngine, check_speculation
from specharness.engines.fleet import LaunchReport, launch, pooled_plan
from specharness.engines.memory import MemoryProbe
from specharness.engines.model import ResolvedModel, served_model_name
from specharness.engines.pool import EnginePool, PooledEngine, gpu_slots, pool_applies, pool_from_env
from specharness.engines.releases import ReleaseEnv, release_env
from specharness.engines.server import ArmSpec, EngineServer, EngineSettings, stop_all
from specharness.experiment.config import RunConfig
from specharness.experiment.rundir import RunFolder, engine_log
from specharness.records import (
    AttachWarningEvent,
    EngineFailedEvent,
    EngineLaunchEvent,
    EngineRecord,
    EngineSpawnedEvent,
)

__all__ = [
    "EnginePlan",
    "EngineSet",
    "attach_engines",
    "engine_settings",
    "launch_servers",
    "plan_engines",
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


@dataclass(frozen=True, slots=True)
class EnginePlan:
    """Every arm's engine, decided once for a run and passed down, so that starting them reads nothing else: the arms
    in order, each one's settings (the run's shared ones, with the arm's own Python, site folder and vLLM options),
    the releases found for them (or why one has none: that arm fails, the run goes on), the engine pool the engines
    come from (None: the run starts its own), how they start (``launch_mode``: "auto" or "one-by-one"; ``tolerate``:
    a run that declares its arms goes on without one that fails), the model they serve and the API key every request
    carries. An attached run (``attach``: arm -> URL) has no settings and no model: its engines run elsewhere, and
    ``start_timeout_s`` bounds the wait for each to answer."""

    arms: tuple[ArmSpec, ...]
    settings: dict[str, EngineSettings] = field(default_factory=dict)
    releases: dict[str, ReleaseEnv] = field(default_factory=dict)
    unavailable: dict[str, EngineError] = field(default_factory=dict)  # arm -> why its release has no environment
    pool: EnginePool | None = None
    attach: dict[str, str] = field(default_factory=dict)
    model: ResolvedModel | None = None
    model_name: str = "model"  # the name the engines serve the model under (an attached run reads it from them)
    api_key: str | None = field(default=None, repr=False)
    launch_mode: str = "auto"
    tolerate: bool = False
    start_timeout_s: float = 900.0
    gpu_share: float | None = None  # the user's --gpu-memory-utilization, for a pooled engine's fixed share

    @property
    def startable(self) -> list[ArmSpec]:
        return [a for a in self.arms if a.name not in self.unavailable]

    def describe(self) -> dict[str, dict[str, str]]:
        """Each arm's vLLM environment, for the manifest: release tag, Python, site folder, how it was found."""
        out: dict[str, dict[str, str]] = {}
        for arm in self.arms:
            env = self.releases.get(arm.name)
            s = self.settings.get(arm.name)
            entry = {"release": arm.release, "python": s.python if s else arm.python, "site": s.site if s else arm.site}
            if env is not None:
                entry["origin"] = env.origin
            if arm.name in self.unavailable:
                entry["unavailable"] = str(self.unavailable[arm.name])
            out[arm.name] = {k: v for k, v in entry.items() if v}
        return out


def _arm_settings(shared: EngineSettings, arm: ArmSpec, env: ReleaseEnv | None) -> EngineSettings:
    """One arm's engine settings: the run's, run from the arm's environment, with the arm's options after the run's
    (vLLM's last flag wins)."""
    python = env.python if env is not None else (arm.python or shared.python)
    site = env.site if env is not None else arm.site
    return replace(shared, python=python, site=site, extra_args=(*shared.extra_args, *arm.engine_args))


def plan_engines(
    config: RunConfig,
    arms: Sequence[ArmSpec],
    model: ResolvedModel | None,
    say: Callable[[str], None] | None = None,
) -> EnginePlan:
    """Decide every arm's engine once: find (or build, for a CPU release) each declared release's environment, compose
    each arm's settings, and decide whether they come from an engine pool (only when every arm runs the harness's own
    interpreter: a pool is keyed for the harness's vLLM)."""
    base = EnginePlan(
        tuple(arms),
        api_key=config.api_key,
        launch_mode="auto" if config.start_together else "one-by-one",
        tolerate=bool(config.profile.arm_specs),
        start_timeout_s=config.start_timeout_s,
        gpu_share=config.gpu_memory_utilization,
    )
    if config.attach:
        return replace(base, attach=dict(config.attach))
    if model is None:
        raise ValueError("plan_engines: a model is needed unless the run attaches to engines")
    shared = engine_settings(config, model)
    releases: dict[str, ReleaseEnv] = {}
    unavailable: dict[str, EngineError] = {}
    found: dict[str, ReleaseEnv | EngineError] = {}
    for arm in arms:
        if not arm.release:
            continue
        if arm.release not in found:
            try:
                found[arm.release] = release_env(arm.release, say)
            except EngineError as error:
                found[arm.release] = error
        env = found[arm.release]
        if isinstance(env, EngineError):
            unavailable[arm.name] = env
        else:
            releases[arm.name] = env
    settings = {a.name: _arm_settings(shared, a, releases.get(a.name)) for a in arms}
    own = all(s.python == shared.python and not s.site for s in settings.values())
    pool = _active_pool(config, shared) if own and not unavailable else None
    return replace(
        base,
        settings=settings,
        releases=releases,
        unavailable=unavailable,
        pool=pool,
        model=model,
        model_name=shared.served_model_name,
    )


def _active_pool(config: RunConfig, settings: EngineSettings) -> EnginePool | None:
    pool = _POOL.get() or pool_from_env()
    if pool is None or not config.start_together or config.profile.instances > 1:  # renewed engines are never pooled
        return None
    return pool if pool_applies(settings) else None


@dataclass(slots=True)
class EngineSet:
    """The run's engines by arm and the model name they serve; ``api_key`` goes in every request's headers."""

    servers: dict[str, Engine] = field(default_factory=dict)
    model_name: str = "model"
    api_key: str | None = field(default=None, repr=False)
    failed: dict[str, EngineError] = field(default_factory=dict)  # arm -> why its engine did not start

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
        extra_args=(("--load-format", model.load_format) if model.load_format else ()) + tuple(c.extra_engine_args),
        start_timeout_s=c.start_timeout_s,
    )
    return replace(settings, python=c.python) if c.python else settings


def launch_servers(
    settings: EngineSettings | Mapping[str, EngineSettings],
    arms: Sequence[ArmSpec],
    log_paths: Mapping[str, Path],
    *,
    mode: str,
    on_spawn: Callable[[str, int], None],
    tolerate: bool = False,
) -> tuple[dict[str, EngineServer], LaunchReport]:
    """Build one server per arm and start them with :func:`specharness.engines.fleet.launch` (``mode``: "auto" —
    together on the CPU, one by one with a memory share each when they share a GPU, a memory failure retried one by
    one —, "together" or "one-by-one"). Returns the servers by arm name, every one ready, and what the launcher
    decided. ``settings``: one for every arm, or each arm's by name. A non-zero port is the first port (arm ``i`` gets
    ``port + i``). ``on_spawn(arm, pid)`` runs as each process starts. A start that fails raises the engine's error
    (naming the cause from its log); with ``tolerate`` it is left out of the servers and named in the report."""
    servers: dict[str, EngineServer] = {}
    for arm in arms:
        own = settings if isinstance(settings, EngineSettings) else settings[arm.name]
        arm_settings = replace(own, port=own.port + len(servers)) if own.port else own
        server = EngineServer(arm_settings, arm, log_paths[arm.name])
        server.on_spawn = lambda pid, name=arm.name: on_spawn(name, pid)
        servers[arm.name] = server
    report = launch(list(servers.values()), mode=mode, tolerate=tolerate)
    return {a: s for a, s in servers.items() if a not in report.failed}, report


def start_engines(plan: EnginePlan, folder: RunFolder) -> EngineSet:
    """Start every arm's engine (:func:`launch_servers`) and journal each: an ``engine_spawned`` event as its
    process starts, an :class:`~specharness.records.EngineRecord` (command, version, settings, memory, the start's
    phases, and ``first_request_s``: one short request's time right after the start) once ready. An arm whose engine
    fails to start, or whose release has no environment, is journaled (``engine_failed``) and left out when the plan
    tolerates it (a run that declares its arms: a release or configuration pair goes on without it); an ordinary
    run's start failure is raised."""
    journal, segment, instance = folder.journal, folder.segment, folder.instance
    probe = MemoryProbe()
    before = probe.as_fields("before_start", [])
    engines = EngineSet(model_name=plan.model_name, api_key=plan.api_key)
    arms = plan.startable
    servers, launched = launch_servers(
        plan.settings,
        arms,
        {arm.name: engine_log(folder.out, arm.name, segment, instance) for arm in arms},
        mode=plan.launch_mode,
        on_spawn=lambda arm, pid: journal.write(
            EngineSpawnedEvent(arm=arm, pid=pid, segment=segment, instance=instance)
        ),
        tolerate=plan.tolerate,
    )
    engines.servers.update(servers)
    journal.write(EngineLaunchEvent(segment=segment, report=launched.as_dict(), instance=instance))
    engines.failed = {**plan.unavailable, **launched.errors}
    for arm in plan.arms:
        if arm.name in engines.failed:
            journal.write(
                EngineFailedEvent(
                    arm=arm.name,
                    segment=segment,
                    reason=str(engines.failed[arm.name]),
                    release=arm.release,
                    instance=instance,
                )
            )
    for arm in arms:
        if arm.name not in servers:
            continue
        server = servers[arm.name]
        journal.write(
            _engine_record(
                folder.out,
                arm,
                server,
                server.effective_settings(),
                pid=server.process.pid if server.process else -1,
                memory={**before, **probe.as_fields("engine_ready", server.pids())},
                start_phases_s=server.start_phases().as_dict(),
                first_request_s=server.time_request(engines.model_name),
                instance=instance,
            )
        )
    return engines


def _engine_record(
    out_dir: Path,
    arm: ArmSpec,
    engine: EngineServer | PooledEngine,
    effective: dict[str, Any],
    *,
    pid: int,
    memory: dict[str, Any],
    start_phases_s: dict[str, float],
    first_request_s: float = math.nan,
    reused: dict[str, Any] | None = None,
    instance: int = 0,
) -> EngineRecord:
    """The journal's record of an engine this run started or took from the pool (one format for both)."""
    return EngineRecord(
        arm=arm.name,
        command=engine.command,
        log_path=str(engine.log_path.relative_to(out_dir)),
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
        instance=instance,
    )


def pooled_engines(plan: EnginePlan, pool: EnginePool, folder: RunFolder) -> EngineSet:
    """Take every arm's engine from ``pool`` (started there by a keeper if no live one has the same engine key) and
    journal how (an ``engine_launch`` event: on a GPU each pooled engine's fixed memory share and the one-by-one
    order, :func:`~specharness.engines.fleet.pooled_plan`) and each engine as an
    :class:`~specharness.records.EngineRecord` with ``reused``: who started it, when, the requests it had served
    before this run, its pids. Stopping the set releases the engines to the pool."""
    probe = MemoryProbe()
    device = probe.engine_device()
    arms = plan.arms
    shares = pooled_plan([a.name for a in arms], device, slots=gpu_slots(), user_share=plan.gpu_share)
    engines = EngineSet(model_name=plan.model_name, api_key=plan.api_key)
    held = pool.acquire(
        plan.settings,
        arms,
        started_by=folder.out.name,
        run_logs={arm.name: engine_log(folder.out, arm.name, folder.segment, folder.instance) for arm in arms},
        plan=shares,
        probe=probe.engine_device if device is not None else None,
        say=say,
    )
    launched = LaunchReport(
        mode="pooled",
        device=device.name if device else "cpu (no NVIDIA GPU seen through NVML)",
        device_total_mib=device.total_mib if device else math.nan,
        device_free_mib=device.free_mib if device else math.nan,
        plan=shares,
        order=tuple(a.name for a in arms),
    )
    folder.journal.write(EngineLaunchEvent(segment=folder.segment, report=launched.as_dict(), instance=folder.instance))
    engines.servers.update(held)
    for arm in arms:
        engine = held[arm.name]
        assert engine.lease is not None
        effective = engine.effective_settings()
        effective.pop("attached_url", None)
        folder.journal.write(
            _engine_record(
                folder.out,
                arm,
                engine,
                effective,
                pid=engine.lease.pid,
                memory=probe.as_fields("engine_ready", engine.pids()),
                start_phases_s=dict(engine.lease.start_phases_s),
                reused=engine.reuse_record(),
                instance=folder.instance,
            )
        )
    return engines


def attach_engines(plan: EnginePlan, folder: RunFolder) -> EngineSet:
    """Engines started elsewhere (``--attach``): wait for each URL's /health, read its version and served model;
    nothing is started, and :meth:`EngineSet.stop` leaves them running. A URL whose speculation does not match its
    arm (a swapped or mis-set URL would invert every verdict) is journaled and refused before anything is measured."""
    engines = EngineSet(api_key=plan.api_key)
    journal = folder.journal
    attached = []
    for arm in plan.arms:
        engine = AttachedEngine(
            arm,
            plan.attach[arm.name],
            engine_log(folder.out, arm.name, folder.segment),
            api_key=plan.api_key,
            start_timeout_s=plan.start_timeout_s,
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
                log_path=str(engine.log_path.relative_to(folder.out)),
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
def running_engines(plan: EnginePlan, folder: RunFolder) -> Iterator[EngineSet]:
    """Start the plan's engines (or attach to them, or take them from its pool) for the body of a ``with``, journaled
    in ``folder``; every engine this process started is stopped on the way out, whatever happened (a start that
    failed half-way included), and pooled ones are released."""
    engines: EngineSet | None = None
    try:
        if plan.attach:
            engines = attach_engines(plan, folder)
        elif plan.pool is not None:
            engines = pooled_engines(plan, plan.pool, folder)
        else:
            engines = start_engines(plan, folder)
        yield engines
    finally:
        if engines is not None:
            engines.stop()
        stop_all()
