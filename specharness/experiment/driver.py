"""Run a paired experiment: start every arm's engine once, walk the cell plan, journal everything.

:func:`run_experiment` is the recipe: it declares the band, opens the run folder, starts the engines and runs the
plan, one step per job in its own module of :mod:`specharness.experiment` (``rundir``, ``engineset``, ``peak``,
``cells``, ``sending``), and receives records back.
Journal, resume and interrupts: docs/development.md#the-run-driver.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from specharness.console import warn
from specharness.engines.memory import MemoryProbe
from specharness.engines.model import ResolvedModel, cache_dir, resolve_model
from specharness.engines.pool import PooledEngine
from specharness.experiment.bands import band_for
from specharness.experiment.cells import run_plan
from specharness.experiment.config import RunConfig
from specharness.experiment.context import ProgressFn, RunContext, UndecidedFn
from specharness.experiment.design import build_arms, comparison_pairs, validate_profile
from specharness.experiment.engineset import EnginePlan, EngineSet, plan_engines, running_engines
from specharness.experiment.peak import resolve_sweep
from specharness.experiment.plan import block_orders
from specharness.experiment.quiet import ENGINE_SETTLE_S, EngineQuiet
from specharness.experiment.rundir import (
    RunFolder,
    hardware_info,
    harness_provenance,
    harness_version,
    open_run_folder,
    run_segment,
)
from specharness.experiment.telemetry import TextPolicy, run_policy
from specharness.records import SCHEMA_VERSION, Manifest
from specharness.traffic.workloads import Workload, case_to_dict, interleave_by_group, load_workloads

__all__ = ["run_experiment"]


def run_experiment(
    config: RunConfig,
    *,
    resume: bool = False,
    progress: ProgressFn | None = None,
    on_status: Callable[[str], None] | None = None,
    on_finish: Callable[[Path], object] | None = None,
    undecided: UndecidedFn | None = None,
) -> Path:
    """Run (or resume) an experiment; ``on_finish(run_dir)`` runs at the end even after a failure (the report);
    ``undecided(run_dir)`` names the cells --until-decided keeps adding blocks to. Returns the run folder."""
    say = on_status or (lambda _msg: None)
    validate_profile(config.profile)
    workloads = load_workloads(list(config.profile.workloads))
    previous, done, segment = open_run_folder(config.out_dir, resume=resume)
    hardware = hardware_info(MemoryProbe())
    config = _with_settle(_with_band(config, hardware), hardware, previous)
    arms = build_arms(config.profile)
    engine_args = (config.extra_engine_args, *(arm.engine_args for arm in arms))
    policy = run_policy(config.keep_text, config.out_dir, cache_dir(), engine_args)  # its salt serves every resume
    model = None if config.attach else resolve_model(config.model)
    plan = plan_engines(config, arms, model, say)  # every arm's engine, decided once
    manifest = _manifest(config, workloads, hardware, policy, model, previous, plan)
    lifecycle = run_segment(
        config.out_dir,
        manifest,
        segment=segment,
        resume=resume,
        done=done,
        fsync=config.fsync,
        policy=policy,
        on_finish=on_finish,
    )
    with lifecycle as folder:
        say(_starting(config, plan))
        with running_engines(config, plan, model, segment=segment, journal=folder.journal) as engines:
            if config.attach:
                served_by = dict(config.attach)
                folder.update_manifest(model={"name": engines.model_name, "origin": "attached", "served_by": served_by})
            _check_comparable(config, engines)
            say(_ready(config, engines))
            ctx = _context(config, workloads, engines, folder, progress)
            if ctx.profile.sweep_levels:
                ctx = replace(ctx, profile=resolve_sweep(ctx))
                rates = replace(config.profile, workload_rates=dict(ctx.profile.workload_rates))
                folder.update_manifest(config=replace(config, profile=rates).to_dict())  # a resume measures them
            run_plan(ctx, done, undecided)
    return config.out_dir


def _check_comparable(config: RunConfig, engines: EngineSet) -> None:
    """An arm whose engine failed is left out; the run goes on while one of its comparisons has both arms, else it
    fails with the first failure's own error, as a run whose engine cannot start always has."""
    if not engines.failed:
        return
    if not any(a in engines.servers and b in engines.servers for a, b in comparison_pairs(config.profile)):
        raise next(iter(engines.failed.values()))
    for arm, why in engines.failed.items():
        warn(f"{arm}: its engine did not start, the run goes on without it: {why}")


def _with_settle(config: RunConfig, hardware: dict[str, Any], previous: Manifest | None = None) -> RunConfig:
    """Declared before the run: without a profile's own (``--settle``), the engines' quiet time before each arm's
    cell: :data:`~specharness.experiment.quiet.ENGINE_SETTLE_S` on the CPU build, whose engines share the cores; 0 on
    a GPU, for attached engines (they run elsewhere) and when resuming a run measured before the rule (its cells
    never waited)."""
    if config.profile.settle_s is not None:
        return config
    before_rule = previous is not None and "settle_s" not in (previous.config.get("profile") or {})
    settle = 0.0 if hardware.get("gpus") or config.attach or before_rule else ENGINE_SETTLE_S
    return replace(config, profile=replace(config.profile, settle_s=settle))


def _with_band(config: RunConfig, hardware: dict[str, Any]) -> RunConfig:
    """Declared before the run: without --equivalence-margin, the machine's band from its own A/A."""
    if config.profile.equivalence_margin is not None:
        return config
    band = band_for(hardware)
    return replace(config, profile=replace(config.profile, equivalence_margin=band.margin, band_source=band.source))


def _manifest(
    config: RunConfig,
    workloads: list[Workload],
    hardware: dict[str, Any],
    policy: TextPolicy,
    model: ResolvedModel | None,
    previous: Manifest | None,
    plan: EnginePlan,
) -> Manifest:
    """The paired run's manifest (a resumed run's, updated)."""
    p = config.profile
    orders = block_orders(p.arms, p.max_blocks or p.blocks, p.order_seed)
    if model is not None:
        model_info = {
            "name": model.name,
            "path": str(model.serve_path),
            "source": str(model.source_path),
            "sha256": model.revision_sha256,
            "origin": model.origin,
        }
    else:  # the engines run elsewhere: the model is whatever they serve (named once they answer)
        placeholder = {"name": "(read from the attached engines)", "origin": "attached"}
        model_info = previous.model if previous and previous.model else placeholder
    return replace(
        previous or Manifest(config={}),
        harness="specharness",
        schema=SCHEMA_VERSION,
        config=config.to_dict(),
        harness_commit=harness_provenance(),
        harness_version=harness_version(),
        block_orders={str(b): list(o) for b, o in enumerate(orders)},
        hardware=hardware,
        workloads={
            w.name: {"source": w.source, "cases": [policy.case(case_to_dict(c)) for c in w.cases]} for w in workloads
        },
        status="running",
        model=model_info,
        attached=dict(config.attach) if config.attach else (previous.attached if previous else None),
        arm_environments=_environments(plan),
    )


def _environments(plan: EnginePlan) -> dict[str, dict[str, str]] | None:
    """Where each arm's vLLM comes from, when some arm names its own (None: every arm runs the harness's)."""
    return plan.describe() if any(a.own_environment for a in plan.arms) else None


def _starting(config: RunConfig, plan: EnginePlan) -> str:
    if config.attach:
        return "attaching to " + ", ".join(f"{a} at {u}" for a, u in config.attach.items())
    arms = f"{len(config.profile.arms)} engines ({', '.join(config.profile.arms)})"
    if plan.pool is not None:
        return f"taking {arms} from the engine pool, starting any it lacks"
    return f"starting {arms}"


def _ready(config: RunConfig, engines: EngineSet) -> str:
    """One line on the engines: each one's start time, or, for an engine taken from the engine pool as it was, who
    started it and how many requests it had served (its start time is another run's)."""
    if config.attach:
        return f"engines answering, serving {engines.model_name}; nothing will be started or stopped"
    said = []
    for arm, server in engines.servers.items():
        record = server.reuse_record() if isinstance(server, PooledEngine) else {}
        if record.get("reused"):
            served = record.get("requests_served_before")
            said.append(
                f"{arm} reused from the engine pool (started by {record.get('started_by') or 'another run'}"
                + (f", {served} requests served)" if served is not None else ")")
            )
        else:
            said.append(f"{arm} {server.start_s:.0f} s" + (" (pooled)" if record else ""))
    return "engines ready: " + ", ".join(said)


def _context(
    config: RunConfig, workloads: list[Workload], engines: EngineSet, folder: RunFolder, progress: ProgressFn | None
) -> RunContext:
    return RunContext(
        # plan by workload name: the profile may list a user workload by its file path
        profile=replace(config.profile, workloads=tuple(w.name for w in workloads)),
        out_dir=config.out_dir,
        sampling=config.sampling,
        request_timeout_s=config.request_timeout_s,
        sequences={w.name: interleave_by_group(w.cases) for w in workloads},
        engines=engines,
        journal=folder.journal,
        segment=folder.segment,
        progress=progress,
        quiet=EngineQuiet(config.profile.settle_s or 0.0),
    )
