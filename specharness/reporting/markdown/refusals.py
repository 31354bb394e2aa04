"""report.md's refusal agreement: per comparison how often each arm declined where declining is the right answer,
every disagreeing pair, and the smallest answer rate the run could detect; or a line saying it was not measured."""

from __future__ import annotations

import math

from specharness.analysis.analyse import Analysis
from specharness.reporting.answer import load_text
from specharness.reporting.markdown.cells import pct as _pct

__all__ = ["refusal_lines"]


def refusal_lines(a: Analysis) -> list[str]:
    """The Refusal agreement subsection, or a line saying it was not measured."""
    if not a.refusals:
        return [
            "### Refusal agreement",
            "",
            "Not measured in this run: no case whose right answer is to decline "
            "(an `abstains` check; the built-in `abstain` workload has 80).",
            "",
        ]
    lines = [
        "### Refusal agreement (cases whose right answer is to decline)",
        "",
        "| workload | load | comparison | pairs (independent) | refused A / B | answered where the other refused | "
        "smallest answer rate detectable (80% power) |",
        "|---|---|---|---|---|---|---|",
    ]
    listed: list[str] = []
    for r in a.refusals:
        lost = sum(1 for d in r.disagreements if d["refused"] == r.arm_a)
        gained = len(r.disagreements) - lost
        lines.append(
            f"| {r.workload} | {load_text(r.load)} | {r.arm_b} vs {r.arm_a} | {r.pairs} ({r.independent}) | "
            f"{r.refused_a} / {r.refused_b} | {r.arm_b} {lost}, {r.arm_a} {gained} | "
            f"{_pct(r.detectable_rate) if math.isfinite(r.detectable_rate) else 'none (too few cases)'} |"
        )
        listed += [
            f"- {r.workload} {load_text(r.load)}, block {d['block']}, `{d['case_id']}`: {d['refused']} refused, "
            f"the other arm answered"
            for d in r.disagreements
        ]
    unfinished = sum(r.unfinished_pairs for r in a.refusals)
    lines += [
        "",
        "Every disagreeing pair (both answers complete):"
        if listed
        else "No pair disagreed: both arms refused (or answered) alike.",
        *listed,
    ]
    if unfinished:
        lines.append(f"{unfinished} pairs had a failed or cut-off answer in one arm and are not counted as either.")
    lines.append("")
    return lines
