"""The report's first lines. A run of declared pairs (releases, configurations) opens with one line per compared pair
(:func:`pair_lines`: its verdict, the time over all cells B over A with its 99% interval, the smallest change the run
could call, failed arms); then, per workload and load, the speed and quality verdicts with their numbers, whether
the answers changed, and what the verdict is about; then each declared pair's changed values and any failed arm."""

from __future__ import annotations

import math

from specharness.analysis.analyse import Analysis
from specharness.analysis.changes import ALL_CELLS, PairedChange, detectable_ratio
from specharness.analysis.comparison import PairedComparison
from specharness.analysis.verdict import RELEASE_FACTOR, pair_change
from specharness.reporting.convention import CONVENTION, ratio, ratio_text


def load_text(load: str) -> str:
    """``c4`` -> ``4 clients``, ``r2`` -> ``2 req/s``, ``rinf`` -> ``all at once``, ``all`` -> ``all loads``."""
    if load == ALL_CELLS:
        return "all loads"
    if load.startswith("r"):
        return "all at once" if load == "rinf" else f"{load[1:]} req/s"
    n = load[1:]
    return f"{n} client{'s' if n != '1' else ''}"


def _share(x: float) -> str:
    return f"{x:.0%}" if math.isfinite(x) else "—"


def _speed(c: PairedComparison) -> str:
    s = c.speedup
    if not math.isfinite(s.estimate):
        return f"speed **{c.speed.verdict}** (no estimate)"
    return (
        f"speed **{c.speed.verdict}**: {c.arm_b} at ×{s.estimate:.2f} {c.arm_a}'s speed for the same work "
        f"[{s.low:.2f}, {s.high:.2f}] ({s.confidence:.0%} CI, {s.blocks} blocks)"
    )


def _answers(c: PairedComparison, greedy: bool) -> str:
    """Whether the answers changed: the identical share and its A/A judgement (greedy), else nothing to say here."""
    if not greedy:
        return "answers differ by design (sampled; see the distribution check)"
    n = c.pair_counts
    identical = (n.same_work + n.unstable) / n.pairs if n.pairs else math.nan
    text = f"answers identical in {_share(identical)} of pairs"
    control = c.identity.control
    if control is not None and math.isfinite(control.pvalue):
        judged = "more often than" if control.pvalue < 0.05 else "no more often than"
        over = f" over their first {control.over_tokens} tokens" if control.over_tokens else ""
        text += (
            f"; they differ{over} {judged} two identical engines' (identical {_share(control.identical_share)} "
            f"per case vs {_share(control.twin_identical_share)}, p = {control.pvalue:.2g})"
        )
    return text


def _scope(c: PairedComparison, greedy: bool) -> str:
    w = c.work
    if w is None or not w.cases:
        return ""
    if w.population:
        fixed = w.these_prompts
        return (
            f" For traffic like these {w.cases} prompts (cases resampled); about these prompts alone "
            f"[{fixed.low:.2f}, {fixed.high:.2f}]."
        )
    if not greedy:
        return f" About these {w.cases} prompts only (cases are not resampled under sampling)."
    return f" About these {w.cases} prompts only (too few to speak for traffic like them)."


def _pair_line(a: Analysis, arm_a: str, arm_b: str) -> str:
    """One compared pair: changed / unchanged / failed, the time over all cells, the smallest change callable."""
    head = f"- **{arm_b} over {arm_a}**: "
    failed = [arm for arm in (arm_a, arm_b) if arm in a.failed_arms]
    if failed:
        return head + "**failed**: " + "; ".join(f"{arm} did not start ({a.failed_arms[arm]})" for arm in failed) + "."
    values = [ch for ch in a.changes if (ch.arm_a, ch.arm_b) == (arm_a, arm_b)]
    called = [ch for ch in values if pair_change(ch.estimate, ch.low, ch.high) in ("regressed", "improved")]
    overall: PairedChange | None = next(
        (ch for ch in values if ch.metric == "time" and ch.workload == ALL_CELLS and ch.load == ALL_CELLS), None
    )
    time = f"time over all cells {ratio_text(overall.estimate, overall.low, overall.high)}" if overall else ""
    smallest = detectable_ratio(overall.se_log, overall.t_df) if overall else math.nan
    seen = (
        f"no change larger than ×{ratio(smallest)} seen (the smallest this run calls at 80% power)"
        if math.isfinite(smallest)
        else "the smallest change it could call is not known (no standard error)"
    )
    if not called:
        return f"{head}**unchanged**: {time}; {seen}; 0 of {len(values)} values changed."
    which = ", ".join(
        f"{ch.metric} {'all cells' if ch.workload == ALL_CELLS else f'{ch.workload} {load_text(ch.load)}'} "
        f"{'worse' if ch.estimate > 1 else 'better'} {ratio_text(ch.estimate, ch.low, ch.high)}"
        for ch in called[:4]
    )
    more = f" and {len(called) - 4} more" if len(called) > 4 else ""
    return f"{head}**changed**: {time}; {len(called)} of {len(values)} values changed ({which}{more})."


def pair_lines(a: Analysis) -> list[str]:
    """One line per compared pair of declared arms (none when the run declared none)."""
    if not a.changes and not any(c.arm_a in a.failed_arms or c.arm_b in a.failed_arms for c in a.comparisons):
        return []
    pairs = list(dict.fromkeys((c.arm_a, c.arm_b) for c in a.comparisons))
    return [
        f"Each compared pair: {CONVENTION}; changed when the interval excludes 1 and the ratio lies beyond "
        f"×{RELEASE_FACTOR:g} (the release review's rule). The lines per cell follow.",
        "",
        *(_pair_line(a, arm_a, arm_b) for arm_a, arm_b in pairs),
        "",
    ]


def answer_lines(a: Analysis) -> list[str]:
    """The ``## Answer`` section: one line per compared pair, then per cell, then declared pairs' changes and failed
    arms."""
    lines = ["## Answer", "", *pair_lines(a)]
    for c in a.comparisons:
        if c.arm_a in a.failed_arms or c.arm_b in a.failed_arms:
            continue  # said once below, with the reason
        sb = a.summaries.get((c.workload, c.load, c.arm_b))
        sa = a.summaries.get((c.workload, c.load, c.arm_a))
        right = ""
        if sa is not None and sb is not None:
            right = f" ({_share(sa.correct_fraction)} → {_share(sb.correct_fraction)} right)"
        lines.append(
            f"- **{c.workload}, {load_text(c.load)}, {c.arm_b} vs {c.arm_a}**: {_speed(c)}; "
            f"{_answers(c, a.rules.greedy)}; quality **{c.quality.verdict}**{right}.{_scope(c, a.rules.greedy)}"
        )
    if not a.comparisons:
        lines.append("- No comparison between arms in this run.")
    changed: dict[tuple[str, str, str, str], list[str]] = {}
    for ch in a.changes:
        key = (ch.workload, ch.load, ch.arm_b, ch.arm_a)
        called = pair_change(ch.estimate, ch.low, ch.high)
        changed.setdefault(key, [])
        if called in ("regressed", "improved"):
            word = "worse" if called == "regressed" else "better"
            changed[key].append(f"{ch.metric} {word} {ratio_text(ch.estimate, ch.low, ch.high)}")
    for (workload, load, arm_b, arm_a), values in changed.items():
        said = "; ".join(values) if values else "no value changed (99% paired intervals)"
        lines.append(f"- **{workload}, {load_text(load)}, {arm_b} against {arm_a}**: {said}.")
    for arm, why in sorted(a.failed_arms.items()):
        lines.append(f"- **{arm} failed to start**: {why}")
    return [*lines, ""]
