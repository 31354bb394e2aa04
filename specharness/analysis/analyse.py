"""From a run folder's journal and manifest to summaries, comparisons and checks (no I/O beyond reading).

Only measured requests of *valid* cells count; a cell re-run by ``--resume`` replaces the invalid attempt.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from specharness.analysis.changes import PairedChange, paired_changes
from specharness.analysis.comparison import ComparisonRules, PairedComparison, compare_arms
from specharness.analysis.groups import (
    FeatureCorrelations,
    GroupDecision,
    feature_correlations,
    group_decisions,
    prompts_from_manifest,
)
from specharness.analysis.quality_tests import with_identity_controls
from specharness.analysis.refusals import RefusalControl, refusal_controls
from specharness.analysis.stats import look_confidence
from specharness.analysis.summary import ArmSummary, summarise_arm
from specharness.analysis.verdict import DEFAULT_MARGIN
from specharness.experiment.aa_identity import aa_identity_for, traffic_mismatch
from specharness.experiment.bands import band_for
from specharness.experiment.config import RunConfig
from specharness.experiment.design import Profile, comparison_pairs, control_pairs
from specharness.experiment.journal import JournalContents
from specharness.experiment.plan import Load, possible_looks
from specharness.experiment.rundir import read_run_journal
from specharness.records import CellRecord, EngineFailedEvent, RequestRecord, SweepPlanEvent, base_key, cell_key

__all__ = ["Analysis", "analyse", "rules_for", "sequential_looks"]


def sequential_looks(profile: Profile) -> int:
    """How many looks a run may take at a cell: 1 for a fixed design; with ``until_decided``, one after the first
    ``blocks`` and one after each further pair of blocks up to ``max_blocks``."""
    return possible_looks(profile.blocks, profile.max_blocks, profile.until_decided)


def rules_for(
    profile: Profile,
    greedy: bool,
    hardware: dict[str, Any] | None = None,
    timeout_s: float = 300.0,
    model: str | None = None,
) -> ComparisonRules:
    """The declared rules of a run, from its saved profile (:meth:`Profile.from_dict` gives older manifests today's
    defaults: no ``min_prefix_tokens`` reads 8, no ``max_excluded_time`` 0.10) and whether it decoded greedily; the
    engine-instance offset from the A/A record of the run's kind of machine (``hardware``, :func:`band_for`)."""
    band = band_for(hardware or {}, model)
    return ComparisonRules(
        timeout_s=timeout_s,
        offset_var=band.offset_var,
        offset_source=band.source,
        memory_var=band.memory_var,
        over_cells_var=band.over_cells_var,
        offset_estimate_var=band.offset_estimate_var,
        margin=float(profile.equivalence_margin or DEFAULT_MARGIN),
        confidence=look_confidence(0.95, sequential_looks(profile)),
        min_correct=profile.min_correct_fraction,
        tolerance=profile.quality_tolerance,
        min_same_work=profile.min_same_work_fraction,
        min_prefix_tokens=profile.min_prefix_tokens,
        max_excluded_time=profile.max_excluded_time,
        greedy=greedy,
        interleaved=profile.interleave,
    )


@dataclass(slots=True)
class Analysis:
    manifest: dict[str, Any]
    contents: JournalContents
    profile: Profile  # the run's declared profile, typed (a sweep's resolved rates included)
    config: RunConfig  # the run's configuration as its manifest holds it, typed (``profile`` adds a sweep's journaled rates)
    rules: ComparisonRules = field(default_factory=ComparisonRules)
    summaries: dict[tuple[str, str, str], ArmSummary] = field(default_factory=dict)  # (workload, load, arm)
    comparisons: list[PairedComparison] = field(default_factory=list)
    groups: list[dict[str, Any]] = field(default_factory=list)
    reconciliation: list[dict[str, Any]] = field(default_factory=list)
    invalid_cells: list[dict[str, Any]] = field(default_factory=list)
    missing_cells: list[str] = field(default_factory=list)
    resumed_cells: list[str] = field(default_factory=list)
    counts: dict[str, Any] = field(default_factory=dict)
    measured: dict[tuple[str, str, str], list[RequestRecord]] = field(default_factory=dict)
    loads: dict[str, tuple[Load, ...]] = field(default_factory=dict)  # workload -> its load levels, in order
    group_decisions: list[GroupDecision] = field(default_factory=list)
    refusals: list[RefusalControl] = field(default_factory=list)
    feature_correlations: list[FeatureCorrelations] = field(default_factory=list)
    failed_arms: dict[str, str] = field(default_factory=dict)  # arm -> why its engine did not start
    changes: list[PairedChange] = field(default_factory=list)  # runs with declared arms: every value B over A
    aa_pairs: set[tuple[str, str]] = field(default_factory=set)  # (arm, its identical twin): the A/A controls
    effect_pairs: set[tuple[str, str]] = field(default_factory=set)  # (arm, its slowed twin): known-effect controls


def _model_name(manifest: dict[str, Any]) -> str | None:
    """The model a run served, as machine records name it (None: an attached run's, which names its own)."""
    model = manifest.get("model") or {}
    return None if model.get("origin") == "attached" or not model.get("name") else str(model["name"])


def _balanced_within(profile: Profile, load: Load) -> bool:
    """Whether the arms took turns within a cell so that each led as many rounds as the other (an even number of
    rounds): then the block's arm order is no effect to model, and an order term would only cost a degree of
    freedom (docs/method.md#the-block-interval)."""
    if not profile.interleave or load.open_loop:
        return False
    rounds = math.ceil(profile.requests_per_cell / max(load.clients, 1))
    return rounds % 2 == 0


def _instance_of(engines: dict[int, tuple[tuple[int, int], tuple[int, int]]]) -> dict[int, int]:
    """Block -> an index of the pair of engine instances (one per arm) that served it, numbered in block order."""
    index: dict[tuple[tuple[int, int], tuple[int, int]], int] = {}
    return {blk: index.setdefault(pair, len(index)) for blk, pair in sorted(engines.items())}


def _key(cell: CellRecord | RequestRecord) -> str:
    return base_key(cell.cell)


def analyse(run_dir: Path, manifest: dict[str, Any]) -> Analysis:
    contents = read_run_journal(run_dir)
    config = RunConfig.from_manifest(run_dir, manifest["config"], api_key=None)  # read back typed, as declared
    declared = config.profile
    # Cells are keyed by workload *name*; the profile may list a user workload by its file path.
    workload_names = list(manifest.get("workloads") or declared.workloads)
    arms = declared.arms
    result = Analysis(manifest=manifest, contents=contents, profile=declared, config=config)

    valid: dict[str, CellRecord] = {}
    for cell in contents.cells:
        if cell.valid:
            valid[_key(cell)] = cell  # a later valid attempt replaces an earlier one
    for cell in contents.cells:
        if not cell.valid:
            result.invalid_cells.append(
                {"cell": cell.cell, "reason": cell.invalid_reason, "replaced": _key(cell) in valid}
            )
    valid_ids = {c.cell for c in valid.values()}
    result.resumed_cells = sorted(k for k, c in valid.items() if c.resumed)

    requests = contents.requests
    measured = [r for r in requests if not r.warmup and r.cell in valid_ids]
    by_cell: dict[tuple[str, str, str], list[RequestRecord]] = {}
    for r in measured:
        by_cell.setdefault((r.workload, r.load, r.arm), []).append(r)
    result.measured = by_cell
    result.aa_pairs, result.effect_pairs = control_pairs(declared)
    if declared.sweep_levels:  # the rates a sweep's peak probe resolved: the manifest's, else the journal's plan
        planned = {e.workload: tuple(e.rates) for e in contents.events_of(SweepPlanEvent)}
        declared = replace(declared, workload_rates={**planned, **declared.workload_rates})
        result.profile = declared
    result.loads = {w: declared.loads(w) for w in workload_names}
    slo = dict(declared.slo)

    # the first ``blocks`` blocks are expected everywhere; --until-decided adds blocks to undecided cells only
    expected = [
        cell_key(b, w, load.label, a)
        for b in range(declared.blocks)
        for w in workload_names
        for load in result.loads[w]
        for a in arms
    ]
    result.missing_cells = [k for k in expected if k not in valid]
    position = {id(c): i for i, c in enumerate(contents.cells)}
    failed = {e.arm: e.reason for e in contents.events_of(EngineFailedEvent)}  # arms whose engine did not start
    result.failed_arms = {arm: why for arm, why in failed.items() if not any(c.arm == arm for c in valid.values())}
    rules = result.rules = rules_for(
        declared,
        config.sampling.temperature == 0,
        manifest.get("hardware") or {},
        float(config.request_timeout_s),
        _model_name(manifest),
    )

    for workload in workload_names:
        for load in result.loads[workload]:
            lk = load.label
            for arm in arms:
                cells = [c for c in valid.values() if c.workload == workload and c.load == lk and c.arm == arm]
                result.summaries[(workload, lk, arm)] = summarise_arm(
                    arm,
                    workload,
                    load.clients,
                    by_cell.get((workload, lk, arm), []),
                    cells,
                    failed_at_s=float(config.request_timeout_s),
                    rate=load.rate,
                    slo=slo,
                    steady=not rules.interleaved,
                )
            extra = {
                c.block
                for c in valid.values()
                if c.workload == workload and c.load == lk and c.block >= declared.blocks
            }
            for a, b in comparison_pairs(declared):
                # declared blocks must all be there; an extra block (--until-decided) counts once both arms have it,
                # so one cut short by an interrupt waits for --resume instead of invalidating the cell
                blocks = sorted(
                    set(range(declared.blocks))
                    | {blk for blk in extra if all(cell_key(blk, workload, lk, arm) in valid for arm in (a, b))}
                )
                keys = [cell_key(blk, workload, lk, arm) for blk in blocks for arm in (a, b)]
                missing = [k for k in keys if k not in valid]
                reason = f"cell {missing[0]} has no valid measurement" if missing else ""
                down = [arm for arm in (a, b) if arm in failed and any(k.endswith(f"/{arm}") for k in missing)]
                if down:
                    reason = f"failed: the {down[0]} engine did not start: {failed[down[0]]}"
                order: dict[int, bool] = {}
                engines: dict[int, tuple[tuple[int, int], tuple[int, int]]] = {}
                for blk in blocks:
                    ca, cb = valid.get(cell_key(blk, workload, lk, a)), valid.get(cell_key(blk, workload, lk, b))
                    if ca is not None and cb is not None:
                        engines[blk] = (ca.engine_instance, cb.engine_instance)
                        if ca.order_index >= 0 and cb.order_index >= 0:
                            order[blk] = ca.order_index < cb.order_index
                        else:  # schema 1: cells are journaled in the order they ran
                            order[blk] = position[id(ca)] < position[id(cb)]
                if _balanced_within(declared, load):
                    order = {}  # each arm led half of every block's rounds: a block's order carries nothing
                kept = set(blocks)
                result.comparisons.append(
                    compare_arms(
                        result.summaries[(workload, lk, a)],
                        result.summaries[(workload, lk, b)],
                        [r for r in by_cell.get((workload, lk, a), []) if r.block in kept],
                        [r for r in by_cell.get((workload, lk, b), []) if r.block in kept],
                        order,
                        rules,
                        valid=not missing,
                        invalid_reason=reason,
                        blocks=blocks,
                        instance_of=_instance_of(engines) if declared.instances > 1 else None,
                    )
                )

    if rules.greedy:  # greedy identity judged against its own control: the A/A twin, else the machine's A/A record
        hardware, model = manifest.get("hardware") or {}, _model_name(manifest)
        mismatch = traffic_mismatch(hardware, model, workload_names) if model is not None else ""
        records = {} if mismatch else aa_identity_for(hardware, declared.max_tokens_cap)
        result.comparisons = with_identity_controls(
            result.comparisons, arms, records, aa_pairs=result.aa_pairs, no_record=mismatch
        )
    groups: dict[tuple[str, str, str], list[RequestRecord]] = {}
    for r in measured:
        groups.setdefault((r.workload, r.group, r.arm), []).append(r)
    for (workload, group, arm), rs in sorted(groups.items()):
        checked = [r for r in rs if r.checked]
        correct = sum(1 for r in checked if r.counts_correct)
        result.groups.append(
            {
                "workload": workload,
                "group": group,
                "arm": arm,
                "requests": len(rs),
                "complete": sum(1 for r in rs if r.verdict == "complete"),
                "checked": len(checked),
                "correct": correct,
                "correct_fraction": correct / len(checked) if checked else math.nan,
                "unchecked": len(rs) - len(checked),
            }
        )

    for cell in valid.values():
        c = cell.counters
        row: dict[str, Any] = {
            "cell": _key(cell),
            "engine_generation_tokens": c.get("generation_tokens"),
            "journal_completion_tokens": c.get("journal_completion_tokens"),
            "engine_draft_tokens": c.get("draft_tokens"),
            "journal_spec_draft_tokens": c.get("journal_spec_draft_tokens"),
            "engine_accepted_tokens": c.get("accepted_tokens"),
            "journal_spec_accepted_tokens": c.get("journal_spec_accepted_tokens"),
        }
        problems = []
        if row["engine_generation_tokens"] != row["journal_completion_tokens"]:
            problems.append("generation tokens differ")
        if (
            row["journal_spec_draft_tokens"] is not None
            and row["journal_spec_draft_tokens"] != row["engine_draft_tokens"]
        ):
            problems.append("per-request draft tokens differ from the counter")
        if (
            row["journal_spec_accepted_tokens"] is not None
            and row["journal_spec_accepted_tokens"] != row["engine_accepted_tokens"]
        ):
            problems.append("per-request accepted tokens differ from the counter")
        row["ok"] = not problems
        row["problems"] = problems
        result.reconciliation.append(row)

    kinds: dict[str, int] = {}
    for r in requests:
        if r.error_kind:
            kinds[r.error_kind] = kinds.get(r.error_kind, 0) + 1
    result.counts = {
        "journaled_requests": len(requests),
        "warmup_requests": sum(1 for r in requests if r.warmup),
        "measured_requests_counted": len(measured),
        "measured_requests_excluded": sum(1 for r in requests if not r.warmup and r.cell not in valid_ids),
        "errors_by_kind": kinds,
        "torn_journal_lines": contents.torn_lines,
    }
    prompts = prompts_from_manifest(manifest)
    result.group_decisions = group_decisions(result, prompts)
    result.feature_correlations = feature_correlations(result, prompts)
    result.refusals = refusal_controls(result)
    if declared.arm_specs:
        result.changes = paired_changes(
            result.comparisons,
            by_cell,
            list(valid.values()),
            rules.memory_var,
            rules.over_cells_var,
            rules.offset_estimate_var,
        )
    return result
