"""report.md's decision table (one row per comparison: speed and quality verdicts with their evidence) and the
paragraph of rules declared before the run that those verdicts follow."""

from __future__ import annotations

import math

from specharness.analysis.analyse import Analysis, sequential_looks
from specharness.analysis.comparison import PairedComparison, SpeedWork
from specharness.analysis.verdict import band_edges
from specharness.reporting.answer import load_text
from specharness.reporting.markdown.cells import fmt as _f
from specharness.reporting.markdown.cells import interval as _interval
from specharness.reporting.markdown.cells import pct as _pct

__all__ = ["decision_lines", "rules_lines"]


def _sampled_work_text(c: PairedComparison, w: SpeedWork) -> str:
    """Sampled runs: what the time-per-token estimate stands on, pair by pair."""
    n = c.pair_counts
    parts = [
        f"Time per output token over {n.in_estimate} of {n.pairs} pairs (both complete, or a timeout), "
        f"{_pct(w.covered_token_share)} of the baseline's output tokens"
    ]
    if n.divergent:
        parts.append(f"{n.divergent} pairs cut at the cap in an arm are not timed per token")
    if w.excluded_time_share > 0:
        parts.append(f"failed pairs hold {_pct(w.excluded_time_share)} of the baseline's time (left out)")
    if w.censored_time_share > 0:
        parts.append(f"timeouts counted at the timeout (censored) in {_pct(w.censored_time_share)} of the time")
    return "; ".join(parts) + f". The interval is about these {w.cases} prompts."


def _work_text(c: PairedComparison, greedy: bool = True) -> str:
    """What the speed estimate stands on, beside the verdict: covered and identical shares, the identical-only
    estimate, loops and failures, and the estimand."""
    w = c.work
    if w is None:
        return ""
    if not greedy:
        return _sampled_work_text(c, w)
    parts = [
        f"Common prefixes cover {_pct(w.covered_token_share)} of the baseline's output tokens ({w.basis})",
        f"identical outputs {_pct(w.identical_share)} of pairs, over them {_interval(w.identical)}",
    ]
    if w.whole and w.identical_share < 1:
        parts.append(f"over the common prefixes alone {_interval(w.prefix)}")
    if w.capped_time_share > 0:
        parts.append(
            f"pairs cut at the cap hold {_pct(w.capped_time_share)} of the time, without them "
            f"{_interval(w.without_capped)}"
        )
    if w.excluded_time_share > 0:
        parts.append(f"failed pairs hold {_pct(w.excluded_time_share)} of the baseline's time (left out)")
    if w.censored_time_share > 0:
        parts.append(f"timeouts counted at the timeout (censored) in {_pct(w.censored_time_share)} of the time")
    scope = f"about these {w.cases} prompts"
    if w.population:
        scope = (
            f"for traffic like these {w.cases} prompts (cases resampled as well as blocks); about these prompts "
            f"alone {_interval(w.these_prompts)}"
        )
    return "; ".join(parts) + f". The interval is {scope}."


def _scope(c: PairedComparison) -> str:
    """What a verdict speaks for, in its cell: the run's prompts when too few to resample cases."""
    w = c.work
    if w is None or not w.cases or w.population:
        return ""
    return f" (these {w.cases} prompts)"


def decision_lines(a: Analysis) -> list[str]:
    """The Decision table: per comparison the speed and quality verdicts with their evidence."""
    lines = [
        "## Decision",
        "",
        "| workload | load | comparison | speed verdict | same-work speedup [CI] | quality verdict | "
        "acceptance | mean accept len | speed evidence | quality evidence |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in a.comparisons:
        sa, sb = a.summaries[(c.workload, c.load, c.arm_a)], a.summaries[(c.workload, c.load, c.arm_b)]
        undelivered = [s.arm for s in (sa, sb) if s.delivery and s.delivery.get("delivered") == 0.0]
        warning = (
            f" **The load was not delivered to {', '.join(undelivered)}** (see Load delivered)." if undelivered else ""
        )
        work = _work_text(c, a.rules.greedy)
        lines.append(
            f"| {c.workload} | {load_text(c.load)} | {c.arm_b} vs {c.arm_a} | **{c.speed.verdict}**{_scope(c)} | "
            f"{_interval(c.speedup)} | "
            f"**{c.quality.verdict}** | {_pct(sb.acceptance['acceptance_rate'])} | "
            f"{_f(sb.acceptance['mean_acceptance_length'])} | {c.speed.reason}.{warning}{' ' + work if work else ''} | "
            f"{c.quality.reason} |"
        )
    return lines


def rules_lines(a: Analysis) -> list[str]:
    """The rules paragraph: how speed and quality were judged, as declared before the run."""
    margin = a.rules.margin
    down, up = band_edges(margin)
    looks = sequential_looks(a.profile)
    conf = a.rules.confidence
    source = a.profile.band_source or "declared"
    recorded = a.manifest["config"]["profile"]  # what the run wrote of its design; older schemas lack these
    design = recorded.get("order_plan") or "arm order alternating by block (schema 1)"
    if a.profile.settle_s:
        design += f"; each arm's cell starts once the engine measured before it has been quiet {a.profile.settle_s:g} s"
    r = a.rules
    return [
        "",
        "**Rules, declared before the run.** Speedup = arm A's summed time over arm B's for the same work. "
        "Greedy: every pair of the same case in the same block is timed over the baseline's whole answer: each arm "
        "from send to the chunk holding the last token both wrote identically (the common prefix of their "
        "generated token ids, from the journaled prefix chains; older journals: the common prefix of the texts, in "
        "proportion), then arm A to its end and arm B at its own pace after that chunk for the rest of A's tokens; "
        "identical outputs are timed end to end. The estimate over the common prefixes alone is shown beside it; a "
        f"pair whose common prefix is under {r.min_prefix_tokens} tokens is left out of that one only. A failed "
        "request removes only its own "
        f"pair; a timeout counts at the timeout ({r.timeout_s:g} s, censored and flagged); when failed pairs hold "
        f"more than {r.max_excluded_time:.0%} of the baseline's time the speed verdict is *inconclusive*. "
        "History-diverged pairs (later turns of a replayed conversation after the two arms' answers differed) "
        "are counted apart. Pairs cut at the cap are in the estimate, their time share and the estimate without "
        "them shown beside it, but they never carry a *helps*: where the verdict without them is not *helps*, "
        "that verdict is the cell's, and it says so. "
        + (
            ""
            if r.greedy
            else "Sampled (this run): time per output token, each arm's summed time over its summed tokens per "
            "block, over every pair both arms finished by themselves, pair by pair (a failure or timeout never "
            "removes its case from other blocks); a timed-out arm counts the timeout over the tokens it had written, "
            "and a pair cut at the cap in either arm is not timed per token. "
        )
        + "One log ratio per block; "
        + (
            f"every engine was started afresh {a.profile.instances} times, each instance serving "
            f"{a.profile.blocks // a.profile.instances} consecutive block(s): {conf:.1%} CI by Student t over the "
            f"instances' mean log ratios ({a.profile.instances} − 1 degrees of freedom), which hold the "
            "engine-instance offset this run measured, so no allowance from a machine record is added. "
            if a.profile.instances > 1
            else f"{conf:.1%} CI by Student t over the blocks (n − 1 degrees of freedom; from 6 blocks a fit with an "
            "order term, n − 2; the order effect is estimated and shown from 4 blocks)"
            f"{'; ' + str(looks) + ' possible looks (Bonferroni)' if looks > 1 else ''}. "
            + (
                f"The engine-instance offset variance from the machine's A/A record (sd {math.sqrt(r.offset_var):.3f}"
                " at its 95% upper limit) is added to each interval, which it widens and never narrows (the wider of "
                "the blocks' own t interval and the one with the offset). "
                if r.offset_var > 0
                else ""
            )
        )
        + f"No-difference band [{down:.3f}, {up:.3f}] (±{margin:.0%}, {source}). A cell whose common prefixes cover "
        f"under {float(a.profile.min_same_work_fraction):.0%} of the baseline's output tokens is *not "
        "comparable*. From 16 cases the interval resamples the cases as well as the blocks and decides: the verdict "
        "is about traffic like the run's prompts, the interval over blocks alone (about these prompts) beside it; "
        "under 16 the verdict is about the run's prompts and says so. Quality: right answers "
        "(rubric passed on a complete answer; truncated answers never count) and completed requests are compared "
        "per case (each case's blocks summarised first; one-sided paired permutation over cases, each at α = 0.025; "
        "the tolerance is a non-inferiority margin, the loss bound the 95% Clopper-Pearson bound over cases); quality is *not assessable* when the baseline "
        f"is under {a.profile.min_correct_fraction:.0%} correct, the tolerance is {a.profile.quality_tolerance:.2f}. "
        "Steady throughput (wall clock, output tokens between the moment every client had a request out and the "
        "last send) is shown, not judged: it counts tokens, so an arm that writes more looks faster. "
        f"Design: {design}; prefix caching {recorded.get('prefix_caching', 'engine default (schema 1)')}.",
        "",
    ]
