"""Run a paired experiment: start every arm's engine once, walk the cell plan, journal everything.

:func:`run_experiment` is the recipe: it decides the run (``decisions``: band, run folder, model, every arm's
engine, manifest), opens the run's segment (``rundir``), starts the engines (``engineset``), probes the peak rate
when the profile sweeps (``peak``) and runs the plan (``cells``), each step in its own module of
:mod:`specharness.experiment`, and receives records back.
Journal, resume and interrupts: docs/development.md#the-run-driver.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from specharness.console import warn
from specharness.engines.pool import PooledEngine
from specharness.experiment.cells import run_plan
from specharness.experiment.config import RunConfig
from specharness.experiment.context import ProgressFn, RunContext, UndecidedFn
from specharness.experiment.decisions import decide_run
from specharness.experiment.design import comparison_pairs, plan_cells
from specharness.experiment.engineset import EnginePlan, EngineSet, running_engines
from specharness.experiment.peak import resolve_sweep
from specharness.experiment.quiet import EngineQuiet
from specharness.experiment.rundir import RunFolder, run_segment
from specharness.traffic.workloads import Workload, interleave_by_group

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
    run = decide_run(config, resume=resume, say=say)  # every setting and every arm's engine, decided once
    config = run.config
    lifecycle = run_segment(
        config.out_dir,
        run.manifest,
        segment=run.segment,
        resume=resume,
        done=run.done,
        fsync=config.fsync,
        policy=run.policy,
        on_finish=on_finish,
    )
    with lifecycle as folder:
        for instance, blocks in _instances_to_run(config, run.done):
            folder.instance = instance
            say(_starting(config, run.plan, instance))
            with running_engines(run.plan, folder) as engines:
                if config.attach:
                    served_by = dict(config.attach)
                    folder.update_manifest(
                        model={"name": engines.model_name, "origin": "attached", "served_by": served_by}
                    )
                _check_comparable(config, engines)
                say(_ready(config, engines))
                ctx = replace(_context(config, run.workloads, engines, folder, progress), instance=instance)
                if ctx.profile.sweep_levels:
                    ctx = replace(ctx, profile=resolve_sweep(ctx))
                    rates = replace(config.profile, workload_rates=dict(ctx.profile.workload_rates))
                    folder.update_manifest(config=replace(config, profile=rates).to_dict())  # a resume measures them
                run_plan(ctx, run.done, undecided, blocks)
    return config.out_dir


def _instances_to_run(config: RunConfig, done: set[str]) -> list[tuple[int, range | None]]:
    """The engine instances this segment starts, each with its blocks (None: every block, one engine per arm for the
    whole run); an instance whose cells a resume already holds is not started again."""
    profile = config.profile
    if profile.instances <= 1:
        return [(0, None)]
    keys = {(p.block, p.key(a)) for p in plan_cells(profile) for a in p.arm_order}
    return [
        (i, blocks)
        for i, blocks in enumerate(profile.instance_blocks())
        if any(key not in done for block, key in keys if block in blocks)
    ]


def _check_comparable(config: RunConfig, engines: EngineSet) -> None:
    """An arm whose engine failed is left out; the run goes on while one of its comparisons has both arms, else it
    fails with the first failure's own error, as a run whose engine cannot start always has."""
    if not engines.failed:
        return
    if not any(a in engines.servers and b in engines.servers for a, b in comparison_pairs(config.profile)):
        raise next(iter(engines.failed.values()))
    for arm, why in engines.failed.items():
        warn(f"{arm}: its engine did not start, the run goes on without it: {why}")


def _starting(config: RunConfig, plan: EnginePlan, instance: int = 0) -> str:
    if config.attach:
        return "attaching to " + ", ".join(f"{a} at {u}" for a, u in config.attach.items())
    arms = f"{len(config.profile.arms)} engines ({', '.join(config.profile.arms)})"
    if config.profile.instances > 1:
        arms += f", instance {instance + 1} of {config.profile.instances}"
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
