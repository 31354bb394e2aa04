"""``sampled.md`` and ``sampled.json``: the distribution check's verdicts, rebuilt from the run folder alone.

Per workload, three comparisons against the baseline stream: ngram (the question), baseline-aa (A/A: a flag is a
false alarm) and baseline-t (positive control: a flag is a detection). Each is tested per repetition (sample-level
tests, which assume independent samples; the rates over repetitions are their measured error rates) and over all
repetitions together (the run's answer: the same statistics referred to a permutation over (case, repetition)
cells, which does not assume independent samples within a cell, with the smallest difference it could have
detected). A quality section first sets this check beside the three other
quality questions a paired run's ``report.md`` answers (greedy identity, structured validity, refusal agreement).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import orjson

from specharness.analysis.sampled_stats import DistributionComparison, Sample, compare_streams, detection_rates
from specharness.analysis.structured_validity import structured_validity
from specharness.experiment.rundir import read_manifest, read_run_journal
from specharness.records import RequestRecord
from specharness.reporting.markdown import STRUCTURED_RULE, validity_text

__all__ = ["write_sampled_report"]

PAIRS = (
    ("ngram", "the question"),
    ("baseline-aa", "A/A: a flag is a false alarm"),
    ("baseline-t", "positive control: a flag is a detection"),
)


def _sample(r: RequestRecord) -> Sample:
    finished = r.error_kind is None and r.verdict in ("complete", "truncated")
    return Sample(
        case_id=r.case_id,
        first_token=r.first_token_id if finished else None,
        length=r.output_tokens if finished else None,
        passed=(r.counts_correct if r.checked else None) if finished else None,
        repetition=r.block,
    )


def _f(x: Any, digits: int = 3) -> str:
    return "—" if not isinstance(x, (int, float)) or not math.isfinite(x) else f"{x:.{digits}g}"


def _cell(stats: dict[str, Any], name: str) -> str:
    s = stats.get(name)
    if s is None:
        return "—"
    text = f"{_f(s.p_value)} ({_f(s.effect)}, {_f(s.mde)})"
    return text + f"; if samples were independent: {_f(s.p_value_samples)}" if s.test_unit == "cell" else text


def _greedy_identity(design: dict[str, Any]) -> list[str]:
    return [
        "## Quality",
        "",
        "Four questions, kept apart as in a paired run's report.md; this run answers the second.",
        "",
        "### Greedy identity",
        "",
        f"Not measured in this run: every request samples (temperature {design['temperature']}), where outputs "
        "differ by design. A paired run (`specharness run`, greedy) counts identical outputs in its report.md.",
        "",
    ]


def _structured_and_refusals(records: list[RequestRecord], manifest: dict[str, Any]) -> list[str]:
    rows = structured_validity(records, manifest)
    structured = (
        [STRUCTURED_RULE + " Right answers are compared by the pass rate above.", "", *validity_text(rows)]
        if rows
        else [
            "Not measured in this run: no workload has structured cases (json_schema or tool_call checks; "
            "the built-in `structured` workload has them)."
        ]
    )
    return [
        "### Structured validity",
        "",
        *structured,
        "",
        "### Refusal agreement",
        "",
        "Not measured in this run: refusals are listed pair by pair by a paired run of the `abstain` workload "
        "(its report.md); here a workload whose cases must decline compares refusal rates through its pass "
        "rate.",
        "",
    ]


def write_sampled_report(run_dir: Path) -> dict[str, Any]:
    manifest = read_manifest(run_dir)
    design = manifest["design"]
    records = [r for r in read_run_journal(run_dir).requests if not r.warmup]
    by: dict[tuple[int, str, str], list[Sample]] = {}
    failed: dict[str, int] = {}
    for r in records:
        by.setdefault((r.block, r.workload, r.arm), []).append(_sample(r))
        if r.error_kind is not None:
            failed[r.arm] = failed.get(r.arm, 0) + 1
    reps = sorted({k[0] for k in by})
    out: dict[str, Any] = {"design": design, "requests": len(records), "failed_by_stream": failed, "workloads": {}}
    lines = [
        f"# specharness distribution check — {run_dir.name}",
        "",
        f"Design: workloads {design['workloads']}, {design['cases_per_workload']} cases each, "
        f"{design['samples']} samples per case, stream and repetition, {design['repetitions']} repetitions; "
        f"temperature {design['temperature']}, top-p {design['top_p']}, positive control at temperature "
        f"{design['control_temperature']}; max_tokens {design['max_tokens']}; {design['clients']} requests in "
        f"flight; one seed per request. Requests: {len(records)}, failed: {failed or 'none'}.",
        "",
        *_greedy_identity(design),
        "### Sampled distribution",
        "",
        "Each comparison is against the baseline stream. *no difference detected* is not a proof of equality: "
        "the MDE columns give the smallest difference the run could have detected (80% power).",
        "",
    ]
    for workload in manifest["workloads"]:  # names (a .jsonl workload is journaled by its file's stem)
        entry: dict[str, Any] = {}
        lines += [
            f"#### {workload}",
            "",
            "| comparison | role | all repetitions: verdict | first token p (w, MDE w) | length p (Δ tokens, MDE) | "
            "pass rate p (Δ, MDE) | flagged in repetitions |",
            "|---|---|---|---|---|---|---|",
        ]
        for stream, role in PAIRS:
            per_rep: list[DistributionComparison] = []
            pooled_a: list[Sample] = []
            pooled_b: list[Sample] = []
            for rep in reps:
                a, b = by.get((rep, workload, "baseline"), []), by.get((rep, workload, stream), [])
                # repetitions are pooled case by case: a case in another repetition is more samples of the same case
                pooled_a += a
                pooled_b += b
                if a and b:
                    per_rep.append(compare_streams(a, b))
            overall = compare_streams(pooled_a, pooled_b, unit="cell")
            rate = detection_rates(per_rep) if per_rep else math.nan
            stats = {s.name: s for s in overall.statistics}

            flagged = sum(1 for c in per_rep if c.verdict == "differs")
            lines.append(
                f"| {stream} vs baseline | {role} | **{overall.verdict}** | {_cell(stats, 'first_token')} | "
                f"{_cell(stats, 'length')} | {_cell(stats, 'pass_rate')} | {flagged} of {len(per_rep)} ({_f(rate, 2)}) |"
            )
            entry[stream] = {
                "overall": overall.to_dict(),
                "repetitions": [c.to_dict() for c in per_rep],
                "flagged_rate": rate,
            }
        out["workloads"][workload] = entry
        lines.append("")
    lines += [
        "Methods: docs/method.md, the distribution check under sampling (first token: chi-square homogeneity with sparse "
        "tokens merged, pooled over cases; length: Mann-Whitney per case, combined; pass rate: Cochran-Mantel-"
        "Haenszel over cases; the three share α = 0.05 by Bonferroni). All repetitions: each statistic's "
        "p-value comes from swapping the two streams' samples of whole (case, repetition) cells, so samples "
        "need not be independent within a cell; the p-value the large-sample test gives when they are follows "
        "it. Per repetition: the large-sample tests.",
        "",
    ]
    lines += _structured_and_refusals(records, manifest)
    (run_dir / "sampled.md").write_text("\n".join(lines))
    (run_dir / "sampled.json").write_bytes(orjson.dumps(out, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    return out
