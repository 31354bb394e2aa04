"""``report.md``: the decision first (speed and quality verdicts with their evidence), then the evidence tables.

Per comparison it shows the same-work speedup with its interval, block count and width, how the pairs split
(same work, truncated, divergent, unstable, failed), the order effect, system throughput beside it, and the quality
verdict with the paired test behind it; per arm, latency percentiles that count failures, with their sample sizes.

The quality section keeps four questions apart, each with its evidence or a line saying it was not measured in this
run: greedy identity (outputs identical token for token between arms), the sampled-distribution tests (only
``specharness sampled`` runs them; its ``sampled.md``), structured validity (:func:`structured_validity`: per arm and
check type, each structured request at the first stage it failed; counted in
:mod:`specharness.analysis.structured_validity`) and refusal agreement (the refusal listing).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from specharness.analysis.analyse import Analysis, sequential_looks
from specharness.analysis.comparison import PairedComparison, SpeedWork
from specharness.analysis.slo import slo_text
from specharness.analysis.stats import RatioInterval
from specharness.analysis.structured_validity import StructuredValidity, structured_validity
from specharness.analysis.sweep import Capacity, WorkloadSweep, offered_text
from specharness.analysis.verdict import RELEASE_FACTOR, band_edges, pair_change
from specharness.engines.preload import ENV as PRELOAD_ENV
from specharness.engines.preload import forked
from specharness.reporting.answer import answer_lines, load_text
from specharness.reporting.group_tables import groups_markdown
from specharness.reporting.start_table import phases_text

__all__ = ["STRUCTURED_RULE", "render_markdown", "validity_text"]


def _f(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float) and math.isinf(value):
        return "fail"
    return f"{value:.{digits}f}"


def _pct(value: float) -> str:
    return "—" if not math.isfinite(value) else f"{100 * value:.0f}%"


def _when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if ts else "—"


def _interval(r: RatioInterval) -> str:
    return f"{_f(r.estimate)} [{_f(r.low)}, {_f(r.high)}]"


def _pcts(d: dict[str, float], digits: int = 0) -> str:
    def one(p: str) -> str:
        return "fail" if d.get(f"{p}_failed") else _f(d[p], digits)

    failed = f", {d['failed']:.0f} failed" if d.get("failed") else ""
    return f"{one('p50')}/{one('p95')}/{one('p99')} (n={d.get('n', math.nan):.0f}{failed})"


def _order(c: PairedComparison) -> str:
    r = c.speedup
    if not math.isfinite(r.order_effect):
        return "—"
    return f"{_f(r.order_effect, 3)} [{_f(r.order_effect_low, 3)}, {_f(r.order_effect_high, 3)}]"


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
    if math.isfinite(w.over_cases.low):
        scope += f"; for traffic like them (cases resampled) {_interval(w.over_cases)}"
    return "; ".join(parts) + f". The interval is {scope}."


def _decision(a: Analysis) -> list[str]:
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
            f"| {c.workload} | {load_text(c.load)} | {c.arm_b} vs {c.arm_a} | **{c.speed.verdict}** | {_interval(c.speedup)} | "
            f"**{c.quality.verdict}** | {_pct(sb.acceptance['acceptance_rate'])} | "
            f"{_f(sb.acceptance['mean_acceptance_length'])} | {c.speed.reason}.{warning}{' ' + work if work else ''} | "
            f"{c.quality.reason} |"
        )
    return lines


def _changes(a: Analysis) -> list[str]:
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
            f"{_f(ch.estimate, 3)} [{_f(ch.low, 3)}, {_f(ch.high, 3)}] | {ch.blocks} | {word} |"
        )
    return [*lines, ""]


def _speed(a: Analysis) -> list[str]:
    lines = [
        "## Speed: time for the same work",
        "",
        "| workload | load | comparison | speedup [CI] | blocks (df) | CI width | order effect [CI] | "
        "pairs | in estimate (censored) | short prefix | covered tokens | identical | identical-only speedup [CI] | "
        "cut at cap: time share, speedup without [CI] | failed (baseline time) | history diverged | "
        "cases resampled [CI] | steady throughput ratio [CI] | per-block speedups |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in a.comparisons:
        n = c.pair_counts
        w = c.work
        if w is None:  # no work recorded
            work = f"{n.same_work} (0) | — | — | — | — | — | {n.failed} | {n.history_diverged} | — "
        elif not a.rules.greedy:  # sampled: time per output token, pair by pair
            work = (
                f"{n.in_estimate} ({n.censored}) | — | {_pct(w.covered_token_share)} | "
                f"{_pct(w.identical_share)} | — | {n.divergent} pairs, not timed | {n.failed} "
                f"({_pct(w.excluded_time_share)}) | "
                f"{n.history_diverged} | — "
            )
        else:
            over = _interval(w.over_cases) if math.isfinite(w.over_cases.low) else f"— ({w.cases} cases, needs 20)"
            work = (
                f"{n.in_estimate} ({n.censored}) | {n.short_prefix} | {_pct(w.covered_token_share)} | "
                f"{_pct(w.identical_share)} | {_interval(w.identical)} | {_pct(w.capped_time_share)}, "
                f"{_interval(w.without_capped)} | {n.failed} ({_pct(w.excluded_time_share)}) | "
                f"{n.history_diverged} | {over} "
            )
        lines.append(
            f"| {c.workload} | {load_text(c.load)} | {c.arm_b} vs {c.arm_a} | {_interval(c.speedup)} | {c.speedup.blocks} "
            f"({c.speedup.df}) | {_f(c.speedup.width, 3)} | {_order(c)} | {n.pairs} | {work}| "
            f"{_interval(c.throughput)} | "
            f"{', '.join(_f(v) for v in c.block_speedups)} |"
        )
    offsets = {(w.offset_sd, w.offset_source) for c in a.comparisons if (w := c.work) is not None}
    for sd, source in sorted(offsets):
        lines += [
            "",
            f"Every interval adds an engine-instance offset of sd {sd:.3f} (log scale, the 95% upper limit "
            f"the machine's A/A record allows: {source or 'none recorded'}).",
        ]
    return lines


_CHECK_TEXT = {"json_schema": "JSON answer", "tool_call": "forced tool call"}


def validity_text(rows: list[StructuredValidity]) -> list[str]:
    """The structured-validity table, one row per :class:`StructuredValidity`."""
    lines = [
        "| workload | load | arm | kind | requests | rejected / failed | no tool call | not JSON | off the schema | "
        "**invalid** (share) | wrong values | valid and right | detail not kept | cut at max_tokens (any stage) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in rows:
        tool = str(v.no_tool_call) if v.check == "tool_call" else "n/a"
        lines.append(
            f"| {v.workload} | {load_text(v.load)} | {v.arm} | {_CHECK_TEXT[v.check]} | {v.requests} | "
            f"{v.rejected} / {v.failed} | {tool} | {v.not_json} | {v.schema_invalid} | **{v.invalid}** "
            f"({_pct(v.invalid_fraction)}) | {v.wrong_values} | {v.valid} | {v.unknown} | {v.truncated} |"
        )
    return lines


STRUCTURED_RULE = (
    "Each structured request (a json_schema or tool_call check) is counted once, at the first stage it failed: "
    "rejected by the server (HTTP 4xx) or failed (no finished answer); no tool call to the function expected; not "
    "JSON; off the schema; wrong values. *Invalid* = no tool call + not JSON + off the schema, over all requests: "
    "output a client cannot use, which constrained decoding is meant to rule out; a cut answer (max_tokens) counts "
    "there too (mostly as not JSON: both arms share the cap). Wrong values are the model's accuracy."
)


def _quality(a: Analysis) -> list[str]:
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
    return [*lines, "", *_greedy_identity(a), *_distribution_pointer(a), *_structured(a), *_refusals(a)]


def _greedy_identity(a: Analysis) -> list[str]:
    head = ["### Greedy identity", ""]
    temperature = a.manifest["config"]["sampling"].get("temperature")
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


def _structured(a: Analysis) -> list[str]:
    rows = structured_validity((r for rs in a.measured.values() for r in rs), a.manifest)
    head = ["### Structured validity", ""]
    if not rows:
        return [
            *head,
            "Not measured in this run: no workload has structured cases (json_schema or tool_call "
            "checks; the built-in `structured` workload has them).",
            "",
        ]
    return [
        *head,
        STRUCTURED_RULE + " Right answers are judged by the quality verdict above.",
        "",
        *validity_text(rows),
        "",
    ]


def _rules(a: Analysis) -> list[str]:
    prof = a.manifest["config"]["profile"]
    margin = a.rules.margin
    down, up = band_edges(margin)
    looks = sequential_looks(a.profile)
    conf = a.rules.confidence
    source = prof.get("band_source") or "declared"
    design = prof.get("order_plan") or "arm order alternating by block (schema 1)"
    r = a.rules
    return [
        "",
        "**Rules, declared before the run.** Speedup = arm A's summed time over arm B's for the same work. "
        "Greedy: every pair of the same case in the same block counts for the tokens both arms wrote identically "
        "(the common prefix of their generated token ids, from the journaled prefix chains; older journals: the "
        "common prefix of the texts, in proportion), each arm timed from send to the chunk holding the last common "
        "token (to the end when that is its whole output); identical outputs are the whole output. A pair whose "
        f"common prefix is under {r.min_prefix_tokens} tokens counts apart. A failed request removes only its own "
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
        f"{conf:.1%} CI by Student t over the blocks (n − 1 degrees of freedom; from 6 blocks a fit with an order "
        "term, n − 2; the order effect is estimated and shown from 4 blocks)"
        f"{'; ' + str(looks) + ' possible looks (Bonferroni)' if looks > 1 else ''}. "
        + (
            f"The engine-instance offset variance from the machine's A/A record (sd {math.sqrt(r.offset_var):.3f} at "
            "its 95% upper limit) is added to each interval, which it widens and never narrows (the wider of the "
            "blocks' own t interval and the one with the offset). "
            if r.offset_var > 0
            else ""
        )
        + f"No-difference band [{down:.3f}, {up:.3f}] (±{margin:.0%}, {source}). A cell whose common prefixes cover "
        f"under {float(prof.get('min_same_work_fraction', 0.5)):.0%} of the baseline's output tokens is *not "
        "comparable*. The interval is about the run's prompts; from 20 cases a second interval, cases "
        "resampled, says how far it carries to traffic like them. Quality: right answers "
        "(rubric passed on a complete answer; truncated answers never count) and completed requests are compared "
        "per case (each case's blocks summarised first; one-sided paired permutation over cases, each at α = 0.025; "
        "the tolerance is a non-inferiority margin, the loss bound the 95% Clopper-Pearson bound over cases); quality is *not assessable* when the baseline "
        f"is under {prof['min_correct_fraction']:.0%} correct, the tolerance is {prof['quality_tolerance']:.2f}. "
        "Steady throughput (wall clock, output tokens between the moment every client had a request out and the "
        "last send) is shown, not judged: it counts tokens, so an arm that writes more looks faster. "
        f"Design: {design}; prefix caching {prof.get('prefix_caching', 'engine default (schema 1)')}.",
        "",
    ]


def _per_arm(a: Analysis) -> list[str]:
    lines = [
        "## Per arm",
        "",
        "| workload | load | arm | requests | failed | truncated | correct | TTFT p50/p95/p99 ms | "
        "TPOT p50/p95/p99 ms | E2E p50/p95/p99 ms | out tok/s | steady tok/s | goodput tok/s | drafts | "
        "accepted/draft tokens | prefix cache hits/queries | peak memory MiB | harness CPU |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (workload, load, arm), s in a.summaries.items():
        mem = ", ".join(f"{k.replace('peak_', '').replace('_mib', '')} {v:.0f}" for k, v in s.peak_memory_mib.items())
        acc = s.acceptance
        cache = s.prefix_cache
        hits = f"{cache['prefix_cache_hits']:.0f}/{cache['prefix_cache_queries']:.0f}" if cache else "—"
        lines.append(
            f"| {workload} | {load_text(load)} | {arm} | {s.requests} | {s.failed + s.incomplete} | {s.truncated} | "
            f"{s.correct}/{s.checked} | {_pcts(s.ttft_ms)} | {_pcts(s.tpot_ms, 1)} | {_pcts(s.e2e_ms)} | "
            f"{_f(s.output_tok_s, 1)} | {_f(s.steady_output_tok_s, 1)} | {_f(s.goodput_tok_s, 1)} | "
            f"{acc['drafts']:.0f} | {acc['accepted_tokens']:.0f}/{acc['draft_tokens']:.0f} | {hits} | {mem or '—'} | "
            f"{_pct(s.harness_cpu_fraction)} |"
        )
    lines += [
        "",
        "Percentiles count a failed or unfinished request at the request timeout (TTFT, E2E: shown as *fail* "
        "when the percentile lands on one; report.json holds the timeout value and a flag); TPOT is over finished requests. A percentile needs at least one "
        "sample beyond it (p95: 20 requests, p99: 100), else it shows —. Inter-chunk latency is in report.json; "
        "it understates speculation (one chunk can carry several tokens). Harness CPU = the client's CPU time "
        "over the cell's wall time.",
        "",
    ]
    if not a.manifest.get("hardware", {}).get("gpu_memory_observed"):
        lines += [
            "GPU memory was not observed (no GPU visible to pynvml); memory is the servers' resident set (RSS).",
            "",
        ]
    return lines


def _validity(a: Analysis, run_dir: Path) -> list[str]:
    lines = ["## Counter reconciliation (engine /metrics vs client journal)", ""]
    bad = [r for r in a.reconciliation if not r["ok"]]
    if bad:
        lines.append(f"**MISMATCH in {len(bad)} of {len(a.reconciliation)} cells:**")
        for r in bad:
            lines.append(
                f"- {r['cell']}: {'; '.join(r['problems'])} (engine generated {r['engine_generation_tokens']}, "
                f"journal {r['journal_completion_tokens']}; engine drafts {r['engine_draft_tokens']}, "
                f"per-request {r['journal_spec_draft_tokens']})"
            )
    else:
        lines.append(
            f"All {len(a.reconciliation)} cells reconcile: the engine's generation-token delta equals the "
            "journal's completion tokens, and per-request spec-decode sums equal the counters where reported."
        )
    lines += ["", "## Validity", ""]
    lines.append(
        f"- Requests journaled: {a.counts['journaled_requests']} (warmups {a.counts['warmup_requests']}, "
        f"measured and counted {a.counts['measured_requests_counted']}, excluded from invalid cells "
        f"{a.counts['measured_requests_excluded']})."
    )
    lines.append(f"- Errors by kind: {a.counts['errors_by_kind'] or 'none'}.")
    for bad_cell in a.invalid_cells:
        lines.append(
            f"- Invalid cell {bad_cell['cell']}: {bad_cell['reason']}"
            f"{' (re-run on resume)' if bad_cell['replaced'] else ''}"
        )
    if a.missing_cells:
        lines.append(
            f"- Missing cells ({len(a.missing_cells)}): {', '.join(a.missing_cells[:12])}"
            f"{' …' if len(a.missing_cells) > 12 else ''}"
        )
    if a.resumed_cells:
        lines.append(f"- Cells measured on resume ({len(a.resumed_cells)}): {', '.join(a.resumed_cells)}")
    return lines


def _manifest(a: Analysis, engines: list[dict[str, Any]]) -> list[str]:
    m = a.manifest
    cfg, prof = m["config"], m["config"]["profile"]
    model, hw = m.get("model", {}), m.get("hardware", {})
    lines = [
        "",
        "## Manifest",
        "",
        f"- Model: {model.get('name')} ({model.get('origin')}), sha256 `{model.get('sha256')}`, "
        f"served from `{model.get('path')}`",
        f"- Hardware: {hw.get('cpu')} × {hw.get('cpu_count')} cores, {hw.get('memory_gib')} GiB; "
        f"GPUs: {', '.join(hw.get('gpus') or []) or 'none'}",
        f"- Harness: specharness {m.get('harness_version', '—')}, commit `{m.get('harness_commit')}`; started "
        f"{_when(m.get('started_unix_s'))}, ended {_when(m.get('ended_unix_s'))}",
        f"- Design: profile `{prof['name']}`, {prof['blocks']} blocks"
        f"{' (up to ' + str(prof.get('max_blocks')) + ' until decided)' if prof.get('until_decided') else ''} × "
        f"workloads {prof['workloads']} × loads {_loads(a)} × {prof['requests_per_cell']} requests × "
        f"arms {prof['arms']}, {prof['warmups_per_cell']} warmup rounds per cell and arm; sampling "
        f"{cfg['sampling']}; arm order seed {prof.get('order_seed', '—')}",
    ]
    if m.get("block_orders"):
        lines.append(
            "- Arm order by block: " + "; ".join(f"b{k}: {' → '.join(v)}" for k, v in m["block_orders"].items())
        )
    for e in engines:
        lines += engine_lines(e)
    lines += [
        "",
        "Plots: `plots/speedup.png` (same-work speedup with CI and the band), `plots/tpot_cdf.png`, "
        "`plots/acceptance_by_position.png`, `plots/groups.png` (speedup with CI and acceptance per group, when a workload "
        "has groups).",
    ]
    return lines


def engine_lines(e: dict[str, Any]) -> list[str]:
    """The manifest's lines on one engine: version, start, command, start phases, what the engine log says about
    this CPU's linear layers, how its server was started, and its pool provenance."""
    lines = [
        f"- Engine `{e['arm']}`: vLLM {e['vllm_version']}, started in {_f(e['start_s'], 1)} s, "
        f"async scheduling {e['async_scheduling']}, prefix caching "
        f"{e['effective_settings'].get('enable_prefix_caching', '—')}, log `{e['log']}`",
        f"  - command: `{' '.join(e['command'])}`",
    ]
    if phases := phases_text(e.get("start_phases_s") or {}, e.get("first_request_s")):
        lines.append(f"  - {phases}")
    if fallback := (e.get("effective_settings") or {}).get("cpu_linear_fallback"):
        lines.append(
            f'  - on this CPU the engine runs its linear layers through torch, not oneDNN ("{fallback}"): '
            "its speed, and what speculation saves, do not carry to CPUs whose oneDNN has bf16 matmul "
            "(AVX512-BF16 or AMX); `--dtype float32` keeps them in oneDNN on this CPU"
        )
    if forked(e.get("engine_env") or {}):
        lines.append(
            "  - server forked from a preloaded interpreter (torch and vLLM imported once per run or engine "
            f"pool; same module, arguments and engine; {PRELOAD_ENV}=0 spawns it afresh)"
        )
    lines += pool_lines(e.get("reused") or {})
    return lines


def pool_lines(r: dict[str, Any]) -> list[str]:
    """The manifest's lines on a pooled engine's provenance (its ``reused`` record): who started a reused engine, the
    time this run waited for room on the GPU, and a start retried after a memory failure."""
    lines = []
    if r.get("reused"):
        lines.append(
            f"  - reused from the engine pool: started by `{r.get('started_by')}` at "
            f"{_when(r.get('started_unix_s'))}, {r.get('requests_served_before')} requests served before this "
            f"run, pids {r.get('pids')} (runs sharing an engine share its engine-instance offset)"
        )
    if r.get("waited_for_room_s"):
        lines.append(
            f"  - waited {_f(r['waited_for_room_s'], 1)} s for room on the GPU before this run took its engines "
            "(other runs held the pooled engines)"
        )
    if r.get("retried_after"):
        lines.append(f"  - started again after a memory failure: {r['retried_after']}")
    return lines


def _refusals(a: Analysis) -> list[str]:
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


def _delivery(a: Analysis) -> list[str]:
    rows = [(k, s) for k, s in a.summaries.items() if s.delivery]
    if not rows:
        return []
    prof = a.manifest["config"]["profile"]
    lines = [
        "## Load delivered (open loop)",
        "",
        f"Arrivals: gamma gaps of shape {prof.get('burstiness', 1.0):g} (1 = Poisson), seed "
        f"{prof.get('arrival_seed', 0)}, the same schedule for both arms of a block; max concurrency "
        f"{prof.get('max_concurrency') or 'none'}. A request is on time when sent within "
        f"{1000 * float(prof.get('late_tolerance_s', 0.005)):g} ms of its scheduled time; a cell is delivered "
        f"when at least {float(prof.get('min_on_time_fraction', 0.95)):.0%} are. Latency under SLOs counts from "
        "the scheduled send.",
        "",
        "| workload | load | arm | sent req/s | completed req/s | on time | worst cell on time | late | p95 / max "
        "lateness ms | delivered | harness CPU |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (workload, load, arm), s in rows:
        d = s.delivery
        lines.append(
            f"| {workload} | {load_text(load)} | {arm} | {_f(d.get('sent_rps'))} | {_f(d.get('completed_rps'))} | "
            f"{_pct(d.get('on_time_fraction', math.nan))} | {_pct(d.get('worst_cell_on_time_fraction', math.nan))} | "
            f"{d.get('late_requests', 0):.0f} | {_f(d.get('p95_lateness_ms'), 1)} / {_f(d.get('max_lateness_ms'), 1)} | "
            f"{_delivered_text(d.get('delivered', math.nan))} | {_pct(s.harness_cpu_fraction)} |"
        )
    return [*lines, ""]


def _delivered_text(flag: float) -> str:
    if not math.isfinite(flag):
        return "n/a (all at once: as fast as the client sends)"
    return "yes" if flag else "**NO: the load was not delivered**"


def _capacity(c: Capacity, unit: str) -> str:
    def one(arm: str) -> str:
        v = c.max_load.get(arm)
        if v is None:
            return f"{arm}: below the lightest tested load"
        return f"{arm}: {'every tested load, all at once included' if math.isinf(v) else offered_text(v, unit)}"

    bound = ""
    if c.censored:
        n, b = c.max_load.get("ngram"), c.max_load.get("baseline")
        bound = "≥ " if (n is not None and math.isinf(n)) or b is None else "≤ "
    note = (
        (
            " (a bound: an arm that held every level counts as the heaviest finite rate, one that held none as half "
            "the lightest)"
        )
        if c.censored
        else ""
    )
    return f"{one('baseline')}; {one('ngram')}; ngram / baseline {bound}{_f(c.ratio)}{note}"


def _level_reading(sw: WorkloadSweep) -> str:
    """The level-by-level reading in one sentence (the heaviest level judged "helps", the first "hurts")."""
    if sw.stops_helping is None:
        text = "By level: the heaviest judged level helps"
    elif sw.stops_helping.below is None:
        text = "By level: no level helps"
    else:
        text = f"By level: the heaviest level judged *helps* is {offered_text(sw.stops_helping.below_offered, sw.unit)}"
    if sw.starts_hurting is not None:
        text += f", the first judged *hurts* {offered_text(sw.starts_hurting.at_offered, sw.unit)}"
    return text + "."


def _sweeps(a: Analysis, found: list[WorkloadSweep]) -> list[str]:
    if not found:
        return []
    prof = a.manifest["config"]["profile"]
    slo = dict(prof.get("slo") or {})
    frac = float(prof.get("slo_fraction", 0.9))
    lines = [
        "## Load sweep: speedup against load",
        "",
        (
            f"SLOs per request: {slo_text(slo)} (from the scheduled send). SLO goodput counts requests that are "
            f"right (complete, rubric passed) and within every SLO; a load is sustained when at least {frac:.0%} "
            "of its requests are, and at every lighter level too."
            if slo
            else "No SLO declared: no sustainable load is read off (declare `slo` in the profile for one)."
        )
        + " Efficiency = speedup / mean acceptance length.",
        "",
    ]
    for sw in found:
        peaks = ", ".join(f"{arm} {v:.2f} req/s" for arm, v in sw.peak_rps.items())
        lines += [f"### {sw.workload}", ""]
        if peaks:
            lines += [f"Peak request rate probed (all requests at once): {peaks}.", ""]
        lines += [
            f"**Crossover:** {sw.crossover_text}.",
            "",
            "The crossover is read off one monotone (non-increasing) fit of log speedup against load over every "
            "delivered, judged level, each weighted by its interval, with 95% brackets from a parametric "
            f"bootstrap over the levels; the level-by-level verdicts are in the table. {_level_reading(sw)}",
            "",
        ]
        if slo:  # the capacities need an SLO: without one they would only count right answers
            lines += [
                f"**Max sustainable load (SLO goodput ≥ {frac:.0%}):** {_capacity(sw.goodput_capacity, sw.unit)}.",
                f"**Max load within the latency SLOs (right or not, ≥ {frac:.0%}):** "
                f"{_capacity(sw.latency_capacity, sw.unit)}.",
                "",
            ]
        if sw.skipped:
            lines += [f"Levels without a speed judgement (invalid or not comparable): {', '.join(sw.skipped)}.", ""]
        lines += [
            "| load | speedup [CI] | fitted | speed | quality | mean accept len | efficiency | TPOT p50/p95 ms "
            "base → ngram | TTFT p95 ms base → ngram | sent req/s | completed req/s base / ngram | "
            f"{'SLO goodput' if slo else 'right'} base / ngram | delivered |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        fitted = sw.fitted_speedup or [math.nan] * len(sw.levels)
        for lv, fit in zip(sw.levels, fitted, strict=True):
            b, n = lv.arms["baseline"], lv.arms["ngram"]
            delivered = (
                ("n/a" if lv.open_loop else "—") if lv.delivered is None else ("yes" if lv.delivered else "**no**")
            )
            fit_text = _f(fit) if math.isfinite(fit) else "left out"
            lines.append(
                f"| {load_text(lv.load)} | {_interval(lv.speedup)} | {fit_text} | **{lv.speed_verdict}** | {lv.quality_verdict} | "
                f"{_f(lv.mean_acceptance_length)} | {_f(lv.efficiency)} | {_f(b.tpot_p50_ms, 1)}/{_f(b.tpot_p95_ms, 1)} → "
                f"{_f(n.tpot_p50_ms, 1)}/{_f(n.tpot_p95_ms, 1)} | {_f(b.ttft_p95_ms, 0)} → {_f(n.ttft_p95_ms, 0)} | "
                f"{_f(b.sent_rps)} | {_f(b.completed_rps)} / {_f(n.completed_rps)} | "
                f"{_pct(b.slo_goodput_fraction)} / {_pct(n.slo_goodput_fraction)} | {delivered} |"
            )
        lines.append("")
    lines += [
        "Plots: `plots/sweep_speedup.png` (speedup against load with its CI and the band), "
        "`plots/sweep_latency_throughput.png` (each arm's TPOT p50 and p95 against delivered throughput).",
        "",
    ]
    return lines


def _loads(a: Analysis) -> str:
    out = {w: ", ".join(load_text(x.label) for x in loads) for w, loads in a.loads.items()}
    texts = set(out.values())
    return f"[{texts.pop()}]" if len(texts) == 1 else "; ".join(f"{w}: [{t}]" for w, t in out.items())


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
    lines += (
        answer_lines(a)
        + _decision(a)
        + _rules(a)
        + _sweeps(a, found or [])
        + _speed(a)
        + [""]
        + _changes(a)
        + _quality(a)
    )
    lines += groups_markdown(a.group_decisions, a.feature_correlations, load_text)
    lines += _delivery(a) + _per_arm(a)
    lines.append("## Acceptance by draft position")
    lines.append("")
    for (workload, load, arm), s in a.summaries.items():
        if s.accepted_per_position:
            lines.append(
                f"- {workload} {load_text(load)} {arm}: "
                + ", ".join(f"pos {i}: {_pct(v)}" for i, v in enumerate(s.accepted_per_position))
            )
    lines += [
        "",
        "## Correctness by group",
        "",
        "| workload | group | arm | requests | complete | correct | unchecked |",
        "|---|---|---|---|---|---|---|",
    ]
    for g in a.groups:
        lines.append(
            f"| {g['workload']} | {g['group']} | {g['arm']} | {g['requests']} | {g['complete']} | "
            f"{g['correct']}/{g['checked']} | {g['unchecked']} |"
        )
    lines += ["", *_validity(a, run_dir), *_manifest(a, engines)]
    return "\n".join(lines) + "\n"
