"""Everything a run decides before its first engine starts, decided once (:func:`decide_run`) and kept as one record
(:class:`RunDecisions`) that the run's steps read: the declared configuration (the band and the engines' quiet time
filled in), the workloads, where a resumed run stands, the text policy, the model, every arm's engine
(:class:`~specharness.experiment.engineset.EnginePlan`) and the manifest that records them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from specharness.engines.memory import MemoryProbe
from specharness.engines.model import cache_dir, resolve_model
from specharness.experiment.bands import band_for
from specharness.experiment.config import RunConfig
from specharness.experiment.design import build_arms, validate_profile
from specharness.experiment.engineset import EnginePlan, plan_engines
from specharness.experiment.plan import block_orders
from specharness.experiment.quiet import ENGINE_SETTLE_S
from specharness.experiment.rundir import hardware_info, harness_provenance, harness_version, open_run_folder
from specharness.experiment.telemetry import TextPolicy, run_policy
from specharness.records import SCHEMA_VERSION, Manifest
from specharness.traffic.workloads import Workload, case_to_dict, load_workloads

__all__ = ["RunDecisions", "decide_run"]


@dataclass(frozen=True, slots=True)
class RunDecisions:
    """A run's decisions: ``config`` as declared before the run (band and quiet time filled in), its workloads, the
    cells a resumed run already holds (``done``) and the segment it opens, the text policy, every arm's engine and
    the manifest to write."""

    config: RunConfig
    workloads: list[Workload]
    done: set[str]
    segment: int
    policy: TextPolicy
    plan: EnginePlan
    manifest: Manifest


def decide_run(config: RunConfig, *, resume: bool, say: Callable[[str], None]) -> RunDecisions:
    """Check the profile, load the workloads, open the run folder (a resumed one: read where it stands), declare the
    band and the quiet time, fix the text policy, resolve the model, plan every arm's engine and compose the
    manifest (:func:`~specharness.experiment.rundir.run_segment` writes it)."""
    validate_profile(config.profile)
    workloads = load_workloads(list(config.profile.workloads))
    previous, done, segment = open_run_folder(config.out_dir, resume=resume)
    hardware = hardware_info(MemoryProbe())
    model = None if config.attach else resolve_model(config.model)
    config = _with_settle(_with_band(config, hardware, model.name if model else None), hardware, previous)
    arms = build_arms(config.profile)
    engine_args = (config.extra_engine_args, *(arm.engine_args for arm in arms))
    policy = run_policy(config.keep_text, config.out_dir, cache_dir(), engine_args)  # its salt serves every resume
    plan = plan_engines(config, arms, model, say)
    manifest = _manifest(config, workloads, hardware, policy, plan, previous)
    return RunDecisions(config, workloads, done, segment, policy, plan, manifest)


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


def _with_band(config: RunConfig, hardware: dict[str, Any], model: str | None) -> RunConfig:
    """Declared before the run: without --equivalence-margin, the machine's band from its own A/A of this model."""
    if config.profile.equivalence_margin is not None:
        return config
    band = band_for(hardware, model)
    return replace(config, profile=replace(config.profile, equivalence_margin=band.margin, band_source=band.source))


def _manifest(
    config: RunConfig,
    workloads: list[Workload],
    hardware: dict[str, Any],
    policy: TextPolicy,
    plan: EnginePlan,
    previous: Manifest | None,
) -> Manifest:
    """The paired run's manifest (a resumed run's, updated)."""
    p = config.profile
    orders = block_orders(p.arms, p.max_blocks or p.blocks, p.order_seed)
    model = plan.model
    if model is not None:
        model_info = {
            "name": model.name,
            "path": str(model.serve_path),
            "source": str(model.source_path),
            "sha256": model.revision_sha256,
            "origin": model.origin,
            **({"load_format": model.load_format} if model.load_format else {}),
        }
    else:  # the engines run elsewhere: the model is whatever they serve (named once they answer)
        placeholder = {"name": "(read from the attached engines)", "origin": "attached"}
        model_info = previous.model if previous and previous.model else placeholder
    own_environments = any(a.own_environment for a in plan.arms)  # None: every arm runs the harness's vLLM
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
        arm_environments=plan.describe() if own_environments else None,
    )
