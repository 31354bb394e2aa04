"""report.md's changes between declared arms (releases, configurations): every value of B over A, paired by
block, at 99%, called worse or better by the release review's rule."""

from __future__ import annotations

from specharness.analysis.analyse import Analysis
from specharness.analysis.verdict import RELEASE_FACTOR, pair_change
from specharness.reporting.answer import load_text
from specharness.reporting.convention import ratio_text

__all__ = ["changes_lines"]


def changes_lines(a: Analysis) -> list[str]:
    """Declared arms (releases, configurations): every value of B over A, paired by block, at 99%."""
    if not a.changes:
        return []
    lines = [
        "## Changes between arms, paired by block",
        "",
        "Each value of the second arm over the first's, block by block (both arms ran the same cases in every "
        "block); above 1 is worse for the second arm (time for the same work, latency percentiles, goodput loss, "
        "memory, verify steps per token). Intervals at 99% (the level of ASV's columns and of the release review); "
        f"a value changed when its interval excludes 1 and its ratio lies beyond ×{RELEASE_FACTOR:g} (the release "
        "review's rule).",
        "",
        "| workload | load | comparison | value | B / A [99% CI] | blocks | changed |",
        "|---|---|---|---|---|---|---|",
    ]
    for ch in a.changes:
        called = pair_change(ch.estimate, ch.low, ch.high)
        word = {"regressed": "worse", "improved": "better"}.get(called, "—")
        lines.append(
            f"| {ch.workload} | {load_text(ch.load)} | {ch.arm_b} vs {ch.arm_a} | {ch.metric} | "
            f"{ratio_text(ch.estimate, ch.low, ch.high)} | {ch.blocks} | {word} |"
        )
    return [*lines, ""]
