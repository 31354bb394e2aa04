"""report.md's per-arm tables: latency percentiles that count failures (with their sample sizes), throughput,
drafts, prefix cache and memory per arm; acceptance by draft position; correctness by group."""

from __future__ import annotations

from specharness.analysis.analyse import Analysis
from specharness.reporting.answer import load_text
from specharness.reporting.markdown.cells import fmt as _f
from specharness.reporting.markdown.cells import pct as _pct
from specharness.reporting.markdown.cells import pcts as _pcts

__all__ = ["acceptance_lines", "correctness_lines", "per_arm_lines"]


def per_arm_lines(a: Analysis) -> list[str]:
    """The Per arm table with its note on how the percentiles count failures."""
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


def acceptance_lines(a: Analysis) -> list[str]:
    """Acceptance by draft position: per cell and arm, the share of drafts accepted at each position."""
    lines = ["## Acceptance by draft position", ""]
    for (workload, load, arm), s in a.summaries.items():
        if s.accepted_per_position:
            lines.append(
                f"- {workload} {load_text(load)} {arm}: "
                + ", ".join(f"pos {i}: {_pct(v)}" for i, v in enumerate(s.accepted_per_position))
            )
    return lines


def correctness_lines(a: Analysis) -> list[str]:
    """Correctness by group: per workload, group and arm, requests, complete and correct answers."""
    lines = [
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
    return lines
