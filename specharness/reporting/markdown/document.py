"""``report.md`` assembled: the answer, the decision (speed and quality verdicts with their evidence) and its rules
first, then the evidence sections in order, down to validity and the manifest; each section is its own module."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specharness.analysis.analyse import Analysis
from specharness.analysis.sweep import WorkloadSweep
from specharness.reporting.answer import answer_lines, load_text
from specharness.reporting.group_tables import groups_markdown
from specharness.reporting.markdown.changes import changes_lines
from specharness.reporting.markdown.decision import decision_lines, rules_lines
from specharness.reporting.markdown.delivery import delivery_lines
from specharness.reporting.markdown.manifest import manifest_lines
from specharness.reporting.markdown.per_arm import acceptance_lines, correctness_lines, per_arm_lines
from specharness.reporting.markdown.quality import quality_lines
from specharness.reporting.markdown.run_validity import run_validity_lines
from specharness.reporting.markdown.speed import speed_lines
from specharness.reporting.markdown.sweeps import sweep_lines

__all__ = ["RANDOM_WEIGHTS_NOTE", "render_markdown"]

RANDOM_WEIGHTS_NOTE = (
    "> **Random weights** (an architecture shape served with vLLM's `--load-format dummy`): time and memory are "
    "the architecture's; the answers, right answers, identical outputs and ngram's acceptance mean nothing."
)


def render_markdown(
    a: Analysis, run_dir: Path, engines: list[dict[str, Any]], found: list[WorkloadSweep] | None = None
) -> str:
    """The whole report.md text; ``found`` the run's load sweeps (:func:`specharness.analysis.sweep.sweeps`)."""
    lines = [f"# specharness decision report — {run_dir.name}", ""]
    status = a.manifest.get("status", "unknown")
    if status != "complete":
        lines += [
            f"> **PARTIAL REPORT — run status: {status}.** Missing cells: {len(a.missing_cells)}. "
            f"Finish with `specharness run --resume {run_dir}`.",
            "",
        ]
    if (a.manifest.get("model") or {}).get("load_format") == "dummy":
        lines += [RANDOM_WEIGHTS_NOTE, ""]
    lines += (
        answer_lines(a)
        + decision_lines(a)
        + rules_lines(a)
        + sweep_lines(a, found or [])
        + speed_lines(a)
        + [""]
        + changes_lines(a)
        + quality_lines(a)
    )
    lines += groups_markdown(a.group_decisions, a.feature_correlations, load_text)
    lines += delivery_lines(a) + per_arm_lines(a)
    lines += acceptance_lines(a) + correctness_lines(a)
    lines += ["", *run_validity_lines(a), *manifest_lines(a, engines)]
    return "\n".join(lines) + "\n"
