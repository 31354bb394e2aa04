"""The decision report: ``report.md``, ``report.json`` and PNG plots, rebuilt from the run folder alone.

Per cell it shows accepted drafts, complete output and correct answers as separate columns, so a reader can see
when high acceptance did not turn into a speedup, or a speedup came with wrong answers.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from specharness.analysis.analyse import Analysis, analyse
from specharness.experiment.rundir import read_manifest

__all__ = ["flat_metrics", "load_report", "write_report"]

REPORT_JSON = "report.json"
REPORT_MD = "report.md"


def _f(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:.{digits}f}"


def _pct(value: float) -> str:
    return "—" if not math.isfinite(value) else f"{100 * value:.0f}%"


def _when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if ts else "—"


def flat_metrics(a: Analysis) -> dict[str, float]:
    """Headline numbers keyed ``workload/cN/...`` for lookups (ASV ``track_*`` methods read these)."""
    out: dict[str, float] = {}
    for (workload, clients, arm), s in a.summaries.items():
        k = f"{workload}/c{clients}/{arm}"
        out[f"{k}/tpot_p50_ms"] = s.tpot_ms["p50"]
        out[f"{k}/tpot_p95_ms"] = s.tpot_ms["p95"]
        out[f"{k}/ttft_p50_ms"] = s.ttft_ms["p50"]
        out[f"{k}/ttft_p95_ms"] = s.ttft_ms["p95"]
        out[f"{k}/e2e_p50_ms"] = s.e2e_ms["p50"]
        out[f"{k}/output_tok_s"] = s.output_tok_s
        out[f"{k}/ms_per_output_token"] = 1000.0 / s.output_tok_s if s.output_tok_s else math.nan
        out[f"{k}/correct_fraction"] = s.correct_fraction
        out[f"{k}/incorrect_fraction"] = 1.0 - s.correct_fraction
        out[f"{k}/error_rate"] = s.error_rate
        out[f"{k}/goodput_tok_s"] = s.goodput_tok_s
        out[f"{k}/acceptance_rate"] = s.acceptance["acceptance_rate"]
        out[f"{k}/mean_acceptance_length"] = s.acceptance["mean_acceptance_length"]
        for mem_key, value in s.peak_memory_mib.items():
            out[f"{k}/{mem_key}"] = value
    for c in a.comparisons:
        k = f"{c.workload}/c{c.clients}/{c.arm_b}_vs_{c.arm_a}"
        out[f"{k}/speedup"] = c.speedup
        out[f"{k}/slowdown"] = 1.0 / c.speedup if c.speedup else math.nan
        out[f"{k}/speedup_ci_low"] = c.speedup_ci_low
        out[f"{k}/speedup_ci_high"] = c.speedup_ci_high
        out[f"{k}/goodput_ratio"] = c.goodput_ratio
        out[f"{k}/goodput_loss"] = 1.0 / c.goodput_ratio if c.goodput_ratio else math.nan
        out[f"{k}/identical_fraction"] = c.identical_outputs / c.compared_outputs if c.compared_outputs else math.nan
    return out


def _engine_rows(a: Analysis) -> list[dict[str, Any]]:
    return [
        {"arm": e.arm, "vllm_version": e.vllm_version, "start_s": e.start_s, "async_scheduling": e.async_scheduling,
         "speculative_config": e.speculative_config, "command": e.command, "log": e.log_path, "memory": e.memory,
         "effective_settings": e.effective_settings}
        for e in a.contents.engines
    ]  # fmt: skip


def _markdown(a: Analysis, run_dir: Path) -> str:
    m = a.manifest
    cfg = m["config"]
    prof = cfg["profile"]
    lines: list[str] = []
    status = m.get("status", "unknown")
    lines.append(f"# specharness decision report — {run_dir.name}")
    lines.append("")
    if status != "complete":
        lines.append(f"> **PARTIAL REPORT — run status: {status}.** Missing cells: {len(a.missing_cells)}. "
                     f"Finish with `specharness run --resume {run_dir}`.")  # fmt: skip
        lines.append("")
    lines.append("## Verdicts")
    lines.append("")
    lines.append("| workload | clients | comparison | verdict | speedup [95% CI] | acceptance rate | mean accept len | "
                 "complete A / B | correct A / B | identical outputs | reason |")  # fmt: skip
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
    aa = set(prof["arms"]) == {"baseline", "baseline-b"}
    for c in a.comparisons:
        sa = a.summaries[(c.workload, c.clients, c.arm_a)]
        sb = a.summaries[(c.workload, c.clients, c.arm_b)]
        verdict = "no difference" if aa and c.verdict == "inconclusive" else c.verdict
        lines.append(
            f"| {c.workload} | {c.clients} | {c.arm_b} vs {c.arm_a} | **{verdict}** | {_f(c.speedup)} "
            f"[{_f(c.speedup_ci_low)}, {_f(c.speedup_ci_high)}] | {_pct(sb.acceptance['acceptance_rate'])} | "
            f"{_f(sb.acceptance['mean_acceptance_length'])} | {_pct(sa.complete_fraction)} / {_pct(sb.complete_fraction)} | "
            f"{_pct(sa.correct_fraction)} / {_pct(sb.correct_fraction)} | {c.identical_outputs}/{c.compared_outputs} | "
            f"{c.reason} |"
        )  # fmt: skip
    lines += ["", "Speedup = output tokens per second of request time, arm B over arm A, over requests paired by "
              "(block, position, case); 95% CI over the paired blocks as replicates (Student t on their log speedups). "
              f"*helps* / *hurts* need the whole CI beyond the declared ±{prof.get('equivalence_margin', 0.10):.0%} "
              "no-difference band (identical engines gave 0.96–1.16 over 40 A/A cells on the 2-core CPU). Quality rule declared "
              f"in advance: correct fraction ≥ {prof['min_correct_fraction']:.2f}, and no significant loss of paired "
              f"answers (one-sided sign test p < 0.05, beyond a tolerance of {prof['quality_tolerance']:.2f}). "
              "Acceptance is from vLLM's counters.", ""]
    lines.append("## Per arm")
    lines.append("")
    lines.append("| workload | clients | arm | requests | failed | complete | correct | TTFT p50/p95/p99 ms | "
                 "TPOT p50/p95/p99 ms | ITL p50/p95 ms | E2E p50/p95 ms | out tok/s | req/s | goodput tok/s | "
                 "drafts | accepted/draft tokens | peak memory MiB | harness CPU |")  # fmt: skip
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (workload, clients, arm), s in a.summaries.items():
        mem = ", ".join(f"{k.replace('peak_', '').replace('_mib', '')} {v:.0f}" for k, v in s.peak_memory_mib.items())
        acc = s.acceptance
        lines.append(
            f"| {workload} | {clients} | {arm} | {s.requests} | {s.failed + s.incomplete} | {s.complete} | "
            f"{s.correct}/{s.checked} | {_f(s.ttft_ms['p50'], 0)}/{_f(s.ttft_ms['p95'], 0)}/{_f(s.ttft_ms['p99'], 0)} | "
            f"{_f(s.tpot_ms['p50'], 1)}/{_f(s.tpot_ms['p95'], 1)}/{_f(s.tpot_ms['p99'], 1)} | "
            f"{_f(s.itl_ms['p50'], 1)}/{_f(s.itl_ms['p95'], 1)} | {_f(s.e2e_ms['p50'], 0)}/{_f(s.e2e_ms['p95'], 0)} | "
            f"{_f(s.output_tok_s, 1)} | {_f(s.requests_s)} | {_f(s.goodput_tok_s, 1)} | {acc['drafts']:.0f} | "
            f"{acc['accepted_tokens']:.0f}/{acc['draft_tokens']:.0f} | {mem or '—'} | {_pct(s.harness_cpu_fraction)} |"
        )  # fmt: skip
    lines += ["", "Inter-chunk latency (ITL) understates speculation: one chunk can carry several accepted tokens; "
              "TPOT and throughput are the headline latency figures. Harness CPU = the client process's CPU time over "
              "the cell's wall time (one core = 100%): well below 100% means the client was not the bottleneck.", ""]
    if not a.manifest.get("hardware", {}).get("gpu_memory_observed"):
        lines += ["GPU memory was not observed (no GPU visible to pynvml); memory is the servers' resident set (RSS).", ""]
    lines.append("## Acceptance by draft position")
    lines.append("")
    for (workload, clients, arm), s in a.summaries.items():
        if s.accepted_per_position:
            lines.append(f"- {workload} c{clients} {arm}: " + ", ".join(
                f"pos {i}: {_pct(v)}" for i, v in enumerate(s.accepted_per_position)))  # fmt: skip
    lines += ["", "## Correctness by group", "", "| workload | group | arm | requests | complete | correct | unchecked |",
              "|---|---|---|---|---|---|---|"]
    for g in a.groups:
        lines.append(f"| {g['workload']} | {g['group']} | {g['arm']} | {g['requests']} | {g['complete']} | "
                     f"{g['correct']}/{g['checked']} | {g['unchecked']} |")  # fmt: skip
    lines += ["", "## Counter reconciliation (engine /metrics vs client journal)", ""]
    bad = [r for r in a.reconciliation if not r["ok"]]
    if bad:
        lines.append(f"**MISMATCH in {len(bad)} of {len(a.reconciliation)} cells:**")
        for r in bad:
            lines.append(f"- {r['cell']}: {'; '.join(r['problems'])} (engine generated {r['engine_generation_tokens']}, "
                         f"journal {r['journal_completion_tokens']}; engine drafts {r['engine_draft_tokens']}, "
                         f"per-request {r['journal_spec_draft_tokens']})")  # fmt: skip
    else:
        lines.append(f"All {len(a.reconciliation)} cells reconcile: the engine's generation-token delta equals the "
                     "journal's completion tokens, and per-request spec-decode sums equal the counters where reported.")
    lines += ["", "## Validity", ""]
    lines.append(f"- Requests journaled: {a.counts['journaled_requests']} (warmups {a.counts['warmup_requests']}, "
                 f"measured and counted {a.counts['measured_requests_counted']}, excluded from invalid cells "
                 f"{a.counts['measured_requests_excluded']}).")  # fmt: skip
    lines.append(f"- Errors by kind: {a.counts['errors_by_kind'] or 'none'}.")
    if a.invalid_cells:
        for bad_cell in a.invalid_cells:
            lines.append(f"- Invalid cell {bad_cell['cell']}: {bad_cell['reason']}"
                         f"{' (re-run on resume)' if bad_cell['replaced'] else ''}")
    if a.missing_cells:
        lines.append(f"- Missing cells ({len(a.missing_cells)}): {', '.join(a.missing_cells[:12])}"
                     f"{' …' if len(a.missing_cells) > 12 else ''}")  # fmt: skip
    if a.resumed_cells:
        lines.append(f"- Cells measured on resume ({len(a.resumed_cells)}): {', '.join(a.resumed_cells)}")
    lines += ["", "## Manifest", ""]
    model = m.get("model", {})
    lines.append(f"- Model: {model.get('name')} ({model.get('origin')}), sha256 `{model.get('sha256')}`, "
                 f"served from `{model.get('path')}`")  # fmt: skip
    hw = m.get("hardware", {})
    lines.append(f"- Hardware: {hw.get('cpu')} × {hw.get('cpu_count')} cores, {hw.get('memory_gib')} GiB; "
                 f"GPUs: {', '.join(hw.get('gpus') or []) or 'none'}")  # fmt: skip
    lines.append(f"- Harness commit: `{m.get('harness_commit')}`; started {_when(m.get('started_unix_s'))}, "
                 f"ended {_when(m.get('ended_unix_s'))}")  # fmt: skip
    lines.append(f"- Design: profile `{prof['name']}`, {prof['blocks']} blocks × workloads {prof['workloads']} × "
                 f"clients {prof['clients']} × {prof['requests_per_cell']} requests × arms {prof['arms']}, "
                 f"{prof['warmups_per_cell']} warmups per cell and arm; sampling {cfg['sampling']}")  # fmt: skip
    for e in _engine_rows(a):
        lines.append(f"- Engine `{e['arm']}`: vLLM {e['vllm_version']}, started in {_f(e['start_s'], 1)} s, "
                     f"async scheduling {e['async_scheduling']}, log `{e['log']}`")  # fmt: skip
        lines.append(f"  - command: `{' '.join(e['command'])}`")
    lines.append("")
    lines.append("Plots: `plots/tpot_cdf.png`, `plots/speedup.png`, `plots/acceptance_by_position.png`.")
    return "\n".join(lines) + "\n"


def _plots(a: Analysis, plot_dir: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    plot_dir.mkdir(exist_ok=True)
    cells = sorted({(w, c) for (w, c, _arm) in a.summaries})
    fig, axes = plt.subplots(1, max(len(cells), 1), figsize=(4.5 * max(len(cells), 1), 3.6), squeeze=False)
    for ax, (workload, clients) in zip(axes[0], cells, strict=False):
        for (w, c, arm), rs in a.measured.items():
            if (w, c) != (workload, clients):
                continue
            vals = np.sort([r.tpot_s * 1000 for r in rs if math.isfinite(r.tpot_s)])
            if vals.size:
                ax.step(vals, np.arange(1, vals.size + 1) / vals.size, where="post", label=arm)
        ax.set_title(f"{workload}, {clients} clients")
        ax.set_xlabel("TPOT (ms)")
        ax.set_ylabel("fraction of requests")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(plot_dir / "tpot_cdf.png", dpi=90)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 3.6))
    labels, points, lows, highs = [], [], [], []
    for comp in a.comparisons:
        if math.isfinite(comp.speedup):
            labels.append(f"{comp.workload}\nc{comp.clients}\n{comp.arm_b}/{comp.arm_a}")
            points.append(comp.speedup)
            lows.append(comp.speedup - comp.speedup_ci_low if math.isfinite(comp.speedup_ci_low) else 0)
            highs.append(comp.speedup_ci_high - comp.speedup if math.isfinite(comp.speedup_ci_high) else 0)
    if points:
        ax.errorbar(range(len(points)), points, yerr=[lows, highs], fmt="o", capsize=4)
        ax.set_xticks(range(len(points)), labels, fontsize=7)
    ax.axhline(1.0, color="grey", linestyle="--")
    ax.set_ylabel("speedup (95% CI)")
    fig.tight_layout()
    fig.savefig(plot_dir / "speedup.png", dpi=90)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 3.6))
    for (workload, clients, arm), s in a.summaries.items():
        if s.accepted_per_position:
            ax.plot(range(len(s.accepted_per_position)), s.accepted_per_position, marker="o",
                    label=f"{workload} c{clients} {arm}")  # fmt: skip
    ax.set_xlabel("draft position")
    ax.set_ylabel("accepted per draft")
    ax.set_ylim(0, 1.05)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(plot_dir / "acceptance_by_position.png", dpi=90)
    plt.close(fig)


def write_report(run_dir: Path, *, plots: bool = True) -> dict[str, Any]:
    """Rebuild report.md, report.json and plots from the run folder; returns the JSON report."""
    manifest = read_manifest(run_dir)
    a = analyse(run_dir, manifest)
    report = {
        "schema": 1, "status": manifest.get("status"), "manifest": manifest,
        "engines": _engine_rows(a),
        "summaries": [s.to_dict() for s in a.summaries.values()],
        "comparisons": [c.to_dict() for c in a.comparisons],
        "groups": a.groups, "reconciliation": a.reconciliation, "invalid_cells": a.invalid_cells,
        "missing_cells": a.missing_cells, "resumed_cells": a.resumed_cells, "counts": a.counts,
        "metrics": flat_metrics(a),
    }  # fmt: skip
    (run_dir / REPORT_JSON).write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    (run_dir / REPORT_MD).write_text(_markdown(a, run_dir))
    if plots:
        _plots(a, run_dir / "plots")
    return report


def load_report(run_dir: Path) -> dict[str, Any]:
    path = run_dir / REPORT_JSON
    if not path.is_file():
        return write_report(run_dir, plots=False)
    obj: dict[str, Any] = orjson.loads(path.read_bytes())
    return obj
