"""What the ASV classes in ``benchmarks/bench_quality.py`` call: run the quality experiments, and name their values.

Two experiments, each once per release (``setup_cache``), the values from :mod:`specharness.history.asv.quality_metrics`
(oriented so that a rise is bad). The environment knobs are :mod:`specharness.history.asv.suite`'s
(SPECHARNESS_ASV_PROFILE quick | standard | smoke, SPECHARNESS_ASV_RUNS, SPECHARNESS_ASV_ENGINE), and so are the
helpers (engine options, run folder, failure reason, the engine pool): imported, not copied. As there, an engine that
fails to start or warm up is a result (``failed``: every value reads "failed" in ASV), not an error, and the engines
come from the release's engine pool: the distribution check drives the same baseline and ngram servers as the paired
benchmark when their engine options match (one engine-instance offset for both), while the structured benchmark's
tool parser makes its engines its own.

``structured_experiment``  a paired run (baseline vs ngram, greedy) of the built-in ``structured`` workload: 16
    cases (JSON-schema ``response_format`` and forced tool calls), 1 client, 2 blocks, 1 warmup round, max_tokens 256,
    vLLM's tool parser on both arms (``--enable-auto-tool-choice --tool-call-parser hermes``: forced tool calls come
    back as ``tool_calls`` only with a parser). The quick profile is exactly the committed runs' design
    (reports/cpu-structured/20261204, reports/gpu-h200-vllm0.26.0/20261204/structured), so their values are this
    benchmark's for those releases. One
    client: validity does not depend on load, and a single stream keeps the CPU run short. Standard (the GPU) runs 4
    blocks; smoke (CI) 4 cases per block at max_tokens 64.
``sampled_experiment``  a distribution check (``specharness sampled``; :mod:`specharness.experiment.sampled_run`): the
    quick profile sends the 4 first cases of ``copy``, 16 samples per case and stream, 2 repetitions, temperature 0.8,
    top-p 0.95, positive control at 1.2, max_tokens 48, 8 in flight: 512 requests (its time on the CPU:
    docs/results.md). ``copy`` because it is where n-gram drafts are accepted most, so
    where a verification defect would show; its cases have a rubric, so the pass rate is tested too. Its seeds and cases are those of the committed run's first two repetitions of ``copy``: recomputed from
    them, ngram differs on 1 statistic (pass rate), the A/A pair on none, the control is caught, and the smallest
    detectable length difference is 4.1 tokens (2.7 over all 5 repetitions). Output length is the tracked power
    statistic because speculation acts after the first token (the first token comes from the prefill, before any
    draft is verified, so its distribution cannot show a rejection-sampling defect), length sums every verified
    step, and its A/A p-values stayed well above the level in the committed run (the pass rate's did not: its A/A
    pair was flagged pooled over the run). Standard (the GPU) is the full default design (copy and free, 5
    repetitions); smoke is 2 cases x 4 samples, 1 repetition, max_tokens 16.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from specharness._errors import ConfigError
from specharness.analysis.analyse import analyse
from specharness.analysis.structured_validity import STRUCTURED_CHECKS, structured_validity
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
    """The structured benchmark's design for one SPECHARNESS_ASV_PROFILE value (module docstring)."""
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
    """The distribution benchmark's design for one SPECHARNESS_ASV_PROFILE value (module docstring)."""
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
        run_sampled(config, design, say=lambda message: print(f"specharness: {message}", file=sys.stderr))

    return experiment_cache(
        out, run, lambda: {"metrics": distribution_metrics(write_sampled_report(out)), "intervals": {}}
    )
