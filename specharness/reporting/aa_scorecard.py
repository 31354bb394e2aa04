"""The A/A control's scorecard: over several A/A runs, how often identical engines got a verdict other than
"no difference" (the false-verdict rate), and how often the speedup CI excluded 1 before the equivalence band.

Reads only ``report.json`` files (``specharness report`` rebuilds one from a journal).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specharness._errors import RunDirError
from specharness.reporting.report import load_report

__all__ = ["AACell", "AAScore", "score_aa_runs"]

A_A_ARMS = {"baseline", "baseline-b"}


@dataclass(frozen=True, slots=True)
class AACell:
    """One A/A comparison cell."""

    run: str
    workload: str
    clients: int
    speedup: float
    ci_low: float
    ci_high: float
    verdict: str

    @property
    def false_verdict(self) -> bool:
        """Anything but 'inconclusive' (shown as "no difference" in A/A reports) is wrong for identical arms."""
        return self.verdict != "inconclusive"

    @property
    def ci_excludes_one(self) -> bool:
        return self.ci_low > 1.0 or self.ci_high < 1.0


@dataclass(slots=True)
class AAScore:
    cells: list[AACell] = field(default_factory=list)

    @property
    def false_verdicts(self) -> int:
        return sum(c.false_verdict for c in self.cells)

    @property
    def ci_excludes_one(self) -> int:
        return sum(c.ci_excludes_one for c in self.cells)

    def to_markdown(self) -> str:
        n = len(self.cells)
        lines = ["| run | workload | clients | speedup [95% CI] | verdict |", "|---|---|---|---|---|"]
        for c in self.cells:
            shown = "no difference" if c.verdict == "inconclusive" else c.verdict
            lines.append(f"| {c.run} | {c.workload} | {c.clients} | {c.speedup:.3f} [{c.ci_low:.3f}, {c.ci_high:.3f}] | {shown} |")
        lines += ["", f"False verdicts (helps / hurts / fails quality between identical engines): {self.false_verdicts} of {n} cells.",
                  f"Speedup CI excluding 1 (before the equivalence band): {self.ci_excludes_one} of {n} cells."]  # fmt: skip
        return "\n".join(lines) + "\n"


def score_aa_runs(run_dirs: list[Path]) -> AAScore:
    """Collect every A/A comparison cell of the given runs; a run that is not an A/A run is an error."""
    score = AAScore()
    for run_dir in run_dirs:
        report: dict[str, Any] = load_report(run_dir)
        arms = set(report["manifest"]["config"]["profile"]["arms"])
        if arms != A_A_ARMS:
            raise RunDirError(f"{run_dir}: arms {sorted(arms)} are not an A/A pair; run it with --profile aa")
        for c in report["comparisons"]:
            score.cells.append(AACell(run=run_dir.name, workload=c["workload"], clients=c["clients"],
                                      speedup=c["speedup"], ci_low=c["speedup_ci_low"], ci_high=c["speedup_ci_high"],
                                      verdict=c["verdict"]))  # fmt: skip
    return score
