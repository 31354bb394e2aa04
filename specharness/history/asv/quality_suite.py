"""What the ASV classes in ``benchmarks/bench_quality.py`` call: run the quality experiments, and name their values.

:func:`structured_experiment` (a paired run of the built-in ``structured`` workload) and :func:`sampled_experiment`
(a ``specharness sampled`` distribution check) run once per release, with :mod:`specharness.history.asv.suite`'s
knobs, helpers and engine pool; :func:`structured_profile` and :func:`sampled_design` give each profile's design.
Designs and values: docs/asv-site.md#the-quality-benchmarks.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from specharness._errors import ConfigError
from specharness.analysis.analyse import analyse
from specharness.analysis.structured_validity import STRUCTURED_CHECKS, structured_validity
from specharness.console import say
from specharness.experiment.config import RunConfig
from specharness.experiment.design import Profile, get_profile, override
from specharness.experiment.driver import run_experiment
from specharness.experiment.rundir import read_manifest
from specharness.experiment.sampled_run import SampledDesign, run_sampled
from specharness.history.asv.metrics import asv_key
from specharness.history.asv.quality_metrics import ALL_CHECKS, distribution_metrics, structured_metrics
from specharness.history.asv.suite import _engine_options, experiment_cache, run_folder
from specharness.records import load_label
from specharness.reporting.report import load_report, write_report
from specharness.reporting.sampled_report import write_sampled_report
from specharness.traffic.client import Sampling

__all__ = [
    "SAMPLED_GRID",
    "STRUCTURED_GRID",
    "STRUCTURED_PREFIX",
    "TOOL_PARSER_ARGS",
    "sampled_design",
    "sampled_experiment",
    "structured_experiment",
    "structured_profile",
    "structured_report",
]

STRUCTURED_GRID = [ALL_CHECKS, *STRUCTURED_CHECKS]  # the StructuredOutput parameter: pooled, then per check type
SAMPLED_GRID = ["copy", "free"]  # the SampledDistribution parameter; a workload a profile does not send reads n/a
STRUCTURED_PREFIX = asv_key("structured", load_label(1, ""))  # <workload>/<load> of every structured key
TOOL_PARSER_ARGS = ("--enable-auto-tool-choice", "--tool-call-parser", "hermes")

_STRUCTURED: dict[str, dict[str, Any]] = {
    "quick": {},
    "standard": {"blocks": 4},
    "smoke": {"requests_per_cell": 4, "max_tokens_cap": 64},
}
_SAMPLED: dict[str, SampledDesign] = {
    "quick": SampledDesign(workloads=("copy",), cases_per_workload=4, samples=16, repetitions=2),
    "standard": SampledDesign(),
    "smoke": SampledDesign(
        workloads=("copy",), cases_per_workload=2, samples=4, repetitions=1, max_tokens=16, clients=4
    ),
}


def _profile_name(known: dict[str, Any], what: str) -> str:
    name = os.environ.get("SPECHARNESS_ASV_PROFILE", "quick")
    if name not in known:
        raise ConfigError(f"SPECHARNESS_ASV_PROFILE={name!r}: the {what} knows {', '.join(known)}")
    return name


def structured_profile(name: str = "quick") -> Profile:
    """The structured benchmark's design for one SPECHARNESS_ASV_PROFILE value (docs/asv-site.md)."""
    base = override(
        get_profile("quick"),
        workloads=("structured",),
        clients=(1,),
        blocks=2,
        requests_per_cell=16,
        warmups_per_cell=1,
        max_tokens_cap=256,
    )
    return override(base, **_STRUCTURED[name])


def sampled_design(name: str = "quick") -> SampledDesign:
    """The distribution benchmark's design for one SPECHARNESS_ASV_PROFILE value (docs/asv-site.md)."""
    return _SAMPLED[name]


def _with_tool_parser(options: dict[str, Any]) -> dict[str, Any]:
    """The engine options with :data:`TOOL_PARSER_ARGS` added where SPECHARNESS_ASV_ENGINE did not set them."""
    extra = tuple(options.get("extra_engine_args", ()))
    names = {a.split("=", 1)[0] for a in extra}
    if "--enable-auto-tool-choice" not in names:
        extra += TOOL_PARSER_ARGS[:1]
    if "--tool-call-parser" not in names:
        extra += TOOL_PARSER_ARGS[1:]
    return {**options, "extra_engine_args": extra}


def structured_report(run_dir: Path) -> dict[str, Any]:
    """The run's ``report.json`` with ``structured_validity`` (one row per workload, load, arm and check type),
    computed from the journal when the report does not carry it."""
    report = load_report(run_dir)
    if "structured_validity" not in report:
        a = analyse(run_dir, read_manifest(run_dir))
        rows = structured_validity((r for rs in a.measured.values() for r in rs), a.manifest)
        report = {**report, "structured_validity": [v.to_dict() for v in rows]}
    return report


def structured_experiment() -> dict[str, Any]:
    """One paired run of the structured workload; its values keyed ``structured/c1/<check>/<name>_<arm>``."""
    profile = structured_profile(_profile_name(_STRUCTURED, "structured benchmark"))
    out = run_folder("asv-structured")
    config = RunConfig(
        profile=profile,
        out_dir=out,
        sampling=Sampling(max_tokens_cap=profile.max_tokens_cap),
        **_with_tool_parser(_engine_options()),
    )
    cache = experiment_cache(
        out,
        lambda: run_experiment(config, on_finish=write_report),
        lambda: {"metrics": structured_metrics(structured_report(out)), "intervals": {}},
    )
    return {**cache, "prefix": STRUCTURED_PREFIX}


def sampled_experiment() -> dict[str, Any]:
    """One distribution check; its values keyed ``<workload>/<name>``."""
    design = sampled_design(_profile_name(_SAMPLED, "distribution benchmark"))
    out = run_folder("asv-sampled")
    config = RunConfig(
        profile=get_profile("quick"), out_dir=out, **_engine_options()
    )  # run_sampled sets arms, workloads

    def run() -> None:
        run_sampled(config, design, say=say)

    return experiment_cache(
        out, run, lambda: {"metrics": distribution_metrics(write_sampled_report(out)), "intervals": {}}
    )
