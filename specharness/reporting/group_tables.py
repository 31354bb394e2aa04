"""The per-group section of ``report.md`` and its chart: each group's speedup with its interval and verdicts beside
the pooled cell, acceptance, token lengths and copyability, then which prompt features went with the gain."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

from specharness.analysis.groups import (
    MIN_GROUP_BLOCKS,
    MIN_GROUP_CASES,
    MIN_GROUP_PAIRS,
    FeatureCorrelations,
    GroupDecision,
)
from specharness.analysis.verdict import DEFAULT_MARGIN, band_edges

__all__ = ["groups_chart", "groups_markdown"]

Key = tuple[str, str, str, str]  # workload, load, arm A, arm B
TICKS = (0.1, 0.25, 0.5, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 10.0)  # speedup axis labels


def _f(value: float, digits: int = 2) -> str:
    return f"{value:.{digits}f}" if math.isfinite(value) else "—"


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%" if math.isfinite(value) else "—"


def _spread(d: dict[str, float]) -> str:
    return f"{_f(d.get('p50', math.nan), 0)}/{_f(d.get('p95', math.nan), 0)} (n={d.get('n', 0):.0f})"


def _key(x: GroupDecision | FeatureCorrelations) -> Key:
    return x.workload, x.load, x.arm_a, x.arm_b


def _by_comparison(decisions: Sequence[GroupDecision]) -> dict[Key, list[GroupDecision]]:
    out: dict[Key, list[GroupDecision]] = {}
    for d in decisions:
        out.setdefault(_key(d), []).append(d)
    return out


def _in_estimate(d: GroupDecision) -> int:
    """Pairs in the speed estimate: greedy, those whose common prefix counts; sampled, those both finished."""
    return d.pair_counts.in_estimate or d.pair_counts.same_work


def _row(d: GroupDecision) -> str:
    r = d.speedup
    name = f"**{d.group}**" if d.pooled else d.group
    pairs = f"{_in_estimate(d)}/{d.pair_counts.pairs}"
    return (
        f"| {name} | {pairs} | {_f(r.estimate)} [{_f(r.low)}, {_f(r.high)}] | **{d.speed.verdict}** | "
        f"**{d.quality.verdict}** | {_pct(d.acceptance_rate)} | {_f(d.mean_acceptance_length)} | "
        f"{_pct(d.correct_fraction_a)} / {_pct(d.correct_fraction_b)} | "
        f"{_spread(d.input_tokens)} | {_spread(d.output_tokens)} | {_pct(d.copyability)} | "
        f"{_f(d.request_speedup_p50)} |"
    )


def groups_markdown(
    decisions: Sequence[GroupDecision],
    correlations: Sequence[FeatureCorrelations],
    load_text: Callable[[str], str] = str,
) -> list[str]:
    """The "Per-group decisions" section: per comparison, the pooled row and one row per group, then the prompt
    features' correlations with the per-request speedup and the sentence naming the predictors. ``load_text``
    renders a load label (``c4``) for the headings."""
    if not decisions:
        return []
    lines = [
        "## Per-group decisions",
        "",
        f"Each group is judged by the pooled cell's rules over its own requests. A group with fewer than "
        f"{MIN_GROUP_PAIRS} pairs in the speed estimate (greedy: common prefixes of at least the declared length), or pairs in fewer than {MIN_GROUP_BLOCKS} blocks, shows its estimate "
        "and interval and claims no speed verdict. Quality is tested over the group's cases (each case's blocks "
        f"summarised first); a group with fewer than {MIN_GROUP_CASES} cases claims no quality verdict (over k "
        "cases the smallest p is 2^-k). Group intervals are not adjusted for the number of groups, so the "
        "pooled row is the decision. Acceptance is from arm B's per-request draft counts; token lengths are the "
        "engine's counts over arm A's finished requests (p50/p95, a p95 needs 20 requests); copyability is the "
        "share of arm A's output words a prompt-lookup draft would have guessed from the prompt and the output "
        "so far; per-request speedup is A's time over B's for one pair's common work.",
        "",
    ]
    found = {_key(c): c for c in correlations}
    for key, rows in _by_comparison(decisions).items():
        workload, load, arm_a, arm_b = key
        lines += [
            f"### {workload}, {load_text(load)}: {arm_b} vs {arm_a}",
            "",
            "| group | pairs in estimate / pairs | speedup [CI] | speed | quality | acceptance | mean accept len | "
            "correct A / B | input tokens p50/p95 | output tokens p50/p95 | copyability | "
            "per-request speedup p50 |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        lines += [_row(d) for d in rows]
        withheld = [d for d in rows if d.small]
        if withheld:
            lines += ["", *(f"- {d.group}: {d.speed.reason}" for d in withheld)]
        corr = found.get(key)
        if corr is not None:
            lines += [
                "",
                f"Prompt features against the log per-request speedup, one point per case ({corr.cases} "
                "cases; Spearman ρ, two-sided permutation p):",
                "",
                "| feature | ρ | p | cases |",
                "|---|---|---|---|",
            ]
            lines += [
                f"| {f.feature.replace('_', ' ')} | {_f(f.rho)} | {_f(f.pvalue, 3)} | {f.n} |" for f in corr.features
            ]
            lines += ["", corr.predictors_text]
        lines.append("")
    return lines


def _sort_key(d: GroupDecision) -> float:
    return d.speedup.estimate if math.isfinite(d.speedup.estimate) else -math.inf


def groups_chart(decisions: Sequence[GroupDecision], path: Path, *, margin: float = DEFAULT_MARGIN) -> Path | None:
    """Per comparison: each group's same-work speedup with its interval, sorted by estimate (log axis, the
    no-difference band shaded, the pooled cell on top), and acceptance per group in the same order beside it. A
    group too small for a verdict is drawn hollow. Returns the path written, or None with nothing to draw."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    comparisons = _by_comparison(decisions)
    if not comparisons:
        return None
    ordered: list[tuple[Key, list[GroupDecision]]] = []
    for key, rows in comparisons.items():
        groups = sorted((d for d in rows if not d.pooled), key=_sort_key)
        ordered.append((key, groups + [d for d in rows if d.pooled]))  # drawn bottom to top: pooled on top
    heights = [len(rows) + 1.2 for _, rows in ordered]
    fig, axes = plt.subplots(
        len(ordered),
        2,
        figsize=(10, 0.42 * sum(heights) + 0.9),
        squeeze=False,
        sharey="row",
        gridspec_kw={"height_ratios": heights, "width_ratios": [3, 1.2]},
    )
    down, up = band_edges(margin)
    ends = [v for d in decisions for v in (d.speedup.low, d.speedup.high, d.speedup.estimate)]
    finite = [v for v in ends if math.isfinite(v) and v > 0]
    left, right = min([*finite, down]) / 1.15, max([*finite, up]) * 1.15
    for i, ((key, rows), (ax, acc)) in enumerate(zip(ordered, axes, strict=True)):
        workload, load, arm_a, arm_b = key
        ys = list(range(len(rows)))
        for y, d in zip(ys, rows, strict=True):
            r = d.speedup
            if not math.isfinite(r.estimate):
                continue
            err = [
                [r.estimate - r.low if math.isfinite(r.low) else 0.0],
                [r.high - r.estimate if math.isfinite(r.high) else 0.0],
            ]
            color = "black" if d.pooled else ("tab:grey" if d.small else "tab:blue")
            ax.errorbar(
                [r.estimate],
                [y],
                xerr=err,
                fmt="s" if d.pooled else "o",
                color=color,
                capsize=3,
                mfc="white" if d.small else color,
            )
            ax.annotate(
                d.speed.verdict, (r.estimate, y), fontsize=7, textcoords="offset points", xytext=(0, 5), ha="center"
            )
        ax.axvspan(down, up, color="grey", alpha=0.2)
        ax.axvline(1.0, color="grey", linestyle="--", linewidth=0.8)
        ax.set_xscale("log")
        ax.minorticks_off()
        ticks = [t for t in TICKS if left <= t <= right]
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks], fontsize=8)
        ax.set_xlim(left, right)
        ax.set_yticks(ys, [f"{d.group} (n={_in_estimate(d)})" for d in rows], fontsize=8)
        ax.set_ylim(-0.7, len(rows) - 0.3)
        ax.set_title(f"{workload}, {load}: {arm_b} vs {arm_a}", fontsize=9)
        rates = [d.acceptance_rate if math.isfinite(d.acceptance_rate) else 0.0 for d in rows]
        acc.barh(ys, rates, color=["black" if d.pooled else "tab:orange" for d in rows], height=0.6)
        for y, d in zip(ys, rows, strict=True):
            acc.annotate(
                _pct(d.acceptance_rate) if math.isfinite(d.acceptance_rate) else "n/a",
                (rates[y], y),
                fontsize=7,
                textcoords="offset points",
                xytext=(3, -3),
            )
        acc.set_xlim(0, 1.15)
        acc.tick_params(labelsize=8)
        if i == len(ordered) - 1:
            ax.set_xlabel("same-work speedup with CI (×, log scale)", fontsize=8)
            acc.set_xlabel("acceptance rate (arm B)", fontsize=8)
    fig.suptitle(
        f"Speedup per group with its CI, sorted (shaded: the no-difference band ±{margin:.0%}; hollow: too "
        "few pairs for a verdict; square: the pooled cell)",
        fontsize=9,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
