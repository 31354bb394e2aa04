"""report.md's quality section: the per-case quality verdicts, greedy identity against an A/A control, and the
pointer to the sampled-distribution check, then structured validity and refusal agreement (their own modules).
Each question has its evidence or a line saying it was not measured in this run."""

from __future__ import annotations

import math

from specharness.analysis.analyse import Analysis
from specharness.reporting.answer import load_text
from specharness.reporting.markdown.cells import fmt as _f
from specharness.reporting.markdown.cells import pct as _pct
from specharness.reporting.markdown.refusals import refusal_lines
from specharness.reporting.markdown.structured import structured_lines

__all__ = ["quality_lines"]


def quality_lines(a: Analysis) -> list[str]:
    """The Quality section: verdict table, greedy identity, distribution pointer, structured validity, refusals."""
    margin = a.rules.tolerance
    lines = [
        "## Quality",
        "",
        "Four questions, kept apart: greedy identity, sampled distribution, structured validity, refusal "
        "agreement. The verdict per comparison counts **cases**, not requests: every block repeats the same "
        "cases and greedy output repeats with them, so each case's blocks are summarised first (its share of "
        "right answers, of completed requests, per arm), then the cases are compared by a one-sided paired "
        "permutation test (the arms swapped within a case), each at α = 0.025. The loss of right answers fails "
        f"only when it exceeds the declared non-inferiority margin ({margin:.0%}) at that level; the upper bound "
        "is the one-sided 95% Clopper-Pearson bound on the share of cases the candidate did worse on. Pairs that "
        "differ (lost / gained) are shown for reference; they are not independent.",
        "",
        "| workload | load | comparison | quality verdict | correct A / B | cases worse / better / all (p) | "
        "loss upper bound | pairs lost / gained | cases finished less / more (p) | failed A / B | identical outputs |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in a.comparisons:
        sa = a.summaries[(c.workload, c.load, c.arm_a)]
        sb = a.summaries[(c.workload, c.load, c.arm_b)]
        ans, comp = c.answers, c.completion
        lines.append(
            f"| {c.workload} | {load_text(c.load)} | {c.arm_b} vs {c.arm_a} | **{c.quality.verdict}** | "
            f"{_pct(c.correct_fraction_a)} / {_pct(c.correct_fraction_b)} | {ans.cases_lost} / {ans.cases_gained} / "
            f"{ans.n_cases} (p={_f(ans.pvalue)}) | {_pct(ans.loss_upper)} | {ans.a_only} / {ans.b_only} | "
            f"{comp.cases_lost} / {comp.cases_gained} (p={_f(comp.pvalue)}) | {sa.failed + sa.incomplete} / "
            f"{sb.failed + sb.incomplete} | {c.pair_counts.same_work + c.pair_counts.unstable}/{c.pair_counts.pairs} |"
        )
    return [*lines, "", *_greedy_identity(a), *_distribution_pointer(a), *structured_lines(a), *refusal_lines(a)]


def _greedy_identity(a: Analysis) -> list[str]:
    head = ["### Greedy identity", ""]
    temperature = a.config.sampling.temperature
    if not a.rules.greedy:
        return [
            *head,
            f"Not measured in this run: it sampled at temperature {temperature}, where outputs differ by "
            "design (the distribution check, `specharness sampled`, is the test under sampling).",
            "",
        ]
    if not a.comparisons:
        return [*head, "Not measured in this run: no comparison between arms.", ""]
    lines = [
        *head,
        "Under greedy decoding both arms should write the same tokens, yet two identical engines under "
        "load need not (batch-dependent numerics). Identical = both finished alike with the same output token "
        "ids (a digest of them). Each comparison (the A/A arm's own excepted) is judged against its own "
        "control: the per-case identical share against that of the A/A arm (baseline-b vs baseline) at the same "
        "load, by a one-sided paired permutation test over cases (p < 0.05: diverges more). A run without an A/A "
        "arm is judged against the machine's recorded A/A at the same client count (two identical engines on committed "
        "A/A runs, named with their source): the record's prompts are others, so each side's per-case shares go "
        "into a one-sided two-sample permutation test over cases; outputs longer than the record's are compared "
        "over its length (identical as if both arms had been cut there, from the prefix chains); where no record "
        "exists at the load, the table says so.",
        "",
        "| workload | load | comparison | identical | cases always identical | differing | failed in either arm | "
        "after a diverged turn | against two identical engines |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in a.comparisons:
        n = c.pair_counts
        identical = n.same_work + n.unstable
        by_case = c.identity.by_case
        always = sum(1 for same, total in by_case.values() if total and same == total)
        control = c.identity.control
        judged = "— (the A/A control itself)" if (c.arm_a, c.arm_b) in a.aa_pairs else "—"
        if control is not None:
            judged = control.text
        lines.append(
            f"| {c.workload} | {load_text(c.load)} | {c.arm_b} vs {c.arm_a} | {identical}/{n.pairs} "
            f"({_pct(identical / n.pairs if n.pairs else math.nan)}) | {always}/{len(by_case)} | "
            f"{n.divergent} | {n.failed} | {n.history_diverged} | {judged} |"
        )
    return [*lines, ""]


def _distribution_pointer(a: Analysis) -> list[str]:
    return [
        "### Sampled distribution",
        "",
        "Not measured in this run: a paired run sends each case once per block and arm. The distribution check "
        "is `specharness sampled` (its `sampled.md` and `sampled.json`: per statistic *differs* or *no difference "
        "detected* with the smallest difference the run could have detected, and a positive control and an A/A "
        "pair to show the test can fail and does not cry wolf).",
        "",
    ]
