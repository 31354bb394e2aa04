"""The decision report: ``report.md``, ``report.json`` and PNG plots, rebuilt from the run folder alone."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any

import orjson

from specharness.analysis.analyse import Analysis, analyse
from specharness.analysis.structured_validity import structured_validity
from specharness.analysis.sweep import WorkloadSweep, sweeps
from specharness.analysis.verdict import band_edges
from specharness.experiment.rundir import read_manifest
from specharness.reporting.answer import load_text
from specharness.reporting.group_tables import groups_chart
from specharness.reporting.html_report import REPORT_HTML, write_html_report
from specharness.reporting.markdown import render_markdown

__all__ = ["REPORT_HTML", "REPORT_JSON", "REPORT_MD", "REPORT_SCHEMA", "load_report", "report_json", "write_report"]

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
# report.json history: 1 — first; 2 — comparisons carry speed and quality verdicts, intervals as objects;
# 3 — summaries and comparisons carry ``load`` and ``rate``, summaries delivery and SLO goodput; ``sweeps``;
# ``group_decisions`` (per comparison: the pooled row and one per group: verdicts, acceptance, token lengths,
# copyability) and ``feature_correlations``; later within 3: ``refusals``, ``structured_validity`` (per workload,
# load, arm and check type: requests by the first stage they failed); 4 — the greedy speedup is over the pairs'
# common prefixes with the engine-instance offset in its interval; comparisons carry ``work`` (what the speed
# estimate stands on: covered and identical shares, identical-only and without-loops estimates, failed and censored
# time shares, the cases-resampled interval, the offset and its source); pair counts ``in_estimate``,
# ``short_prefix``, ``censored``; quality is judged over cases: ``answers`` and ``completion`` carry ``pvalue``,
# ``statistic``, ``n_cases``, ``cases_lost``, ``cases_gained``, ``margin``, ``confidence``, ``method`` (was
# ``pvalue_b_worse`` per pair), comparisons ``identity`` (``by_case``, ``control``: against the A/A arm); engines
# ``engine_env`` and ``start_phases_s``; later within 4: a run without an A/A arm has its identity ``control`` from
# the machine's recorded A/A (``source``, ``record_cases``), ``identity.max_output_tokens``; sampled runs carry
# ``work`` too (time per output token, pair by pair); engines ``reused`` (the engine pool's record, or null).
REPORT_SCHEMA = 4


def _legend(ax: Any, fontsize: int) -> None:
    """A legend only where something carries a label (matplotlib warns on an empty one)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=fontsize)


def _engine_rows(a: Analysis) -> list[dict[str, Any]]:
    return [
        {
            "arm": e.arm,
            "vllm_version": e.vllm_version,
            "start_s": e.start_s,
            "async_scheduling": e.async_scheduling,
            "speculative_config": e.speculative_config,
            "command": e.command,
            "log": e.log_path,
            "memory": e.memory,
            "effective_settings": e.effective_settings,
            "engine_env": e.engine_env,
            "start_phases_s": e.start_phases_s,
            "first_request_s": e.first_request_s,
            "reused": e.reused,
        }
        for e in a.contents.engines
    ]


def _plots(a: Analysis, plot_dir: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    plot_dir.mkdir(exist_ok=True)
    cells = sorted({(w, c) for (w, c, _arm) in a.summaries})
    fig, axes = plt.subplots(1, max(len(cells), 1), figsize=(4.5 * max(len(cells), 1), 3.6), squeeze=False)
    for ax, (workload, load) in zip(axes[0], cells, strict=False):
        for (w, c, arm), rs in a.measured.items():
            if (w, c) != (workload, load):
                continue
            vals = np.sort([r.tpot_s * 1000 for r in rs if math.isfinite(r.tpot_s)])
            if vals.size:
                ax.step(vals, np.arange(1, vals.size + 1) / vals.size, where="post", label=arm)
        ax.set_title(f"{workload}, {load_text(load)}")
        ax.set_xlabel("TPOT (ms)")
        ax.set_ylabel("fraction of requests")
        _legend(ax, 8)
    fig.tight_layout()
    fig.savefig(plot_dir / "tpot_cdf.png", dpi=90)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 3.6))
    labels, points, lows, highs = [], [], [], []
    for comp in a.comparisons:
        r = comp.speedup
        if math.isfinite(r.estimate):
            labels.append(f"{comp.workload}\n{comp.load}\n{comp.arm_b}/{comp.arm_a}\n{comp.speed.verdict}")
            points.append(r.estimate)
            lows.append(r.estimate - r.low if math.isfinite(r.low) else 0)
            highs.append(r.high - r.estimate if math.isfinite(r.high) else 0)
    if points:
        ax.errorbar(range(len(points)), points, yerr=[lows, highs], fmt="o", capsize=4)
        ax.set_xticks(range(len(points)), labels, fontsize=7)
    margin = a.rules.margin
    down, up = band_edges(margin)
    ax.axhspan(down, up, color="grey", alpha=0.2, label=f"no-difference band ±{margin:.0%}")
    ax.axhline(1.0, color="grey", linestyle="--")
    ax.set_yscale("log")
    ax.set_ylabel("same-work speedup (CI, log scale)")
    _legend(ax, 7)
    fig.tight_layout()
    fig.savefig(plot_dir / "speedup.png", dpi=90)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 3.6))
    for (workload, load, arm), s in a.summaries.items():
        if s.accepted_per_position:
            ax.plot(
                range(len(s.accepted_per_position)),
                s.accepted_per_position,
                marker="o",
                label=f"{workload} {load} {arm}",
            )
    ax.set_xlabel("draft position")
    ax.set_ylabel("accepted per draft")
    ax.set_ylim(0, 1.05)
    _legend(ax, 7)
    fig.tight_layout()
    fig.savefig(plot_dir / "acceptance_by_position.png", dpi=90)
    plt.close(fig)


def _sweep_plots(found: list[WorkloadSweep], margin: float, plot_dir: Path) -> None:
    """Speedup against load with its CI band, and each arm's latency-throughput curve, one column per workload."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    if not found:
        return
    plot_dir.mkdir(exist_ok=True)
    down, up = band_edges(margin)

    def xs(sw: WorkloadSweep) -> tuple[list[float], list[str]]:
        finite = [lv.offered for lv in sw.levels if math.isfinite(lv.offered)]
        top = max(finite, default=1.0) * 1.6  # "all at once" drawn past the highest rate
        return [lv.offered if math.isfinite(lv.offered) else top for lv in sw.levels], [
            "all at once" if math.isinf(lv.offered) else f"{lv.offered:g}" for lv in sw.levels
        ]

    fig, axes = plt.subplots(1, len(found), figsize=(5.2 * len(found), 3.8), squeeze=False)
    for ax, sw in zip(axes[0], found, strict=True):
        x, labels = xs(sw)
        est = [lv.speedup.estimate for lv in sw.levels]
        ax.fill_between(
            x,
            [lv.speedup.low for lv in sw.levels],
            [lv.speedup.high for lv in sw.levels],
            alpha=0.3,
            label="speedup CI",
        )
        ax.plot(x, est, marker="o", label="same-work speedup")
        fit = [(xi, f) for xi, f in zip(x, sw.fitted_speedup, strict=False) if math.isfinite(f)]
        if fit:
            ax.plot([p[0] for p in fit], [p[1] for p in fit], color="black", linewidth=1.2, label="monotone fit")
        left = [(xi, lv.speedup.estimate) for xi, lv in zip(x, sw.levels, strict=True) if lv.load in sw.left_out]
        if left:
            ax.scatter(
                [p[0] for p in left],
                [p[1] for p in left],
                marker="x",
                color="red",
                zorder=3,
                label="left out of the fit",
            )
        for crossing, color in ((sw.stops_clearing_band, "tab:green"), (sw.stops_above_one, "tab:red")):
            if crossing is None or not 0 < crossing.load < math.inf:
                continue
            top = max(x)
            low = crossing.load_low if crossing.load_low > 0 else min(x)
            high = crossing.load_high if math.isfinite(crossing.load_high) else top
            ax.axvspan(low, max(high, low), color=color, alpha=0.12)
            ax.axvline(
                crossing.load,
                color=color,
                linewidth=1,
                linestyle=":",
                label=f"fit reaches {crossing.threshold:.2f} (95% bracket shaded)",
            )
        ax.axhspan(down, up, color="grey", alpha=0.2, label=f"no-difference band ±{margin:.0%}")
        ax.axhline(1.0, color="grey", linestyle="--", linewidth=0.8)
        for xi, lv in zip(x, sw.levels, strict=True):
            ax.annotate(
                lv.speed_verdict, (xi, lv.speedup.estimate), fontsize=7, textcoords="offset points", xytext=(0, 6)
            )
        ax.set_xscale("log")
        ax.set_xticks(x, labels, fontsize=8)
        ax.minorticks_off()
        ax.set_xlabel(f"offered load ({sw.unit})")
        ax.set_ylabel("ngram same-work speedup (log scale)")
        ax.set_yscale("log")
        times = FuncFormatter(lambda v, _pos: f"{v:.3g}×")
        ax.yaxis.set_major_formatter(times)
        ax.yaxis.set_minor_formatter(times)
        ax.tick_params(axis="y", which="minor", labelsize=7)
        ax.set_title(textwrap.fill(f"{sw.workload}: {sw.crossover_text}", 70), fontsize=8)
        _legend(ax, 7)
    fig.tight_layout()
    fig.savefig(plot_dir / "sweep_speedup.png", dpi=90)
    plt.close(fig)

    fig, axes = plt.subplots(1, len(found), figsize=(5.2 * len(found), 3.8), squeeze=False)
    for ax, sw in zip(axes[0], found, strict=True):
        for arm, color in (("baseline", "tab:blue"), ("ngram", "tab:orange")):
            tput = [lv.arms[arm].output_tok_s for lv in sw.levels]
            ax.plot(tput, [lv.arms[arm].tpot_p50_ms for lv in sw.levels], marker="o", color=color, label=f"{arm} p50")
            ax.plot(
                tput,
                [lv.arms[arm].tpot_p95_ms for lv in sw.levels],
                marker="^",
                linestyle="--",
                color=color,
                label=f"{arm} p95",
            )
        ax.set_xlabel("delivered output throughput (tokens/s)")
        ax.set_ylabel("TPOT (ms per output token)")
        ax.set_title(f"{sw.workload}: latency against throughput, one point per load level", fontsize=8)
        _legend(ax, 7)
    fig.tight_layout()
    fig.savefig(plot_dir / "sweep_latency_throughput.png", dpi=90)
    plt.close(fig)


def report_json(
    a: Analysis, engines: list[dict[str, Any]] | None = None, found: list[WorkloadSweep] | None = None
) -> dict[str, Any]:
    """The JSON report of an analysed run (what ``report.json`` holds); nothing is written. ``engines`` and ``found``
    (its engine rows and sweeps) where the caller has them already."""
    engines = _engine_rows(a) if engines is None else engines
    found = sweeps(a) if found is None else found
    report = {
        "schema": REPORT_SCHEMA,
        "status": a.manifest.get("status"),
        "manifest": a.manifest,
        "engines": engines,
        "summaries": [s.to_dict() for s in a.summaries.values()],
        "comparisons": [c.to_dict() for c in a.comparisons],
        "groups": a.groups,
        "reconciliation": a.reconciliation,
        "invalid_cells": a.invalid_cells,
        "missing_cells": a.missing_cells,
        "resumed_cells": a.resumed_cells,
        "counts": a.counts,
        "sweeps": [sw.to_dict() for sw in found],
        "group_decisions": [d.to_dict() for d in a.group_decisions],
        "feature_correlations": [c.to_dict() for c in a.feature_correlations],
        "refusals": [r.to_dict() for r in a.refusals],
        "structured_validity": [
            v.to_dict() for v in structured_validity((r for rs in a.measured.values() for r in rs), a.manifest)
        ],
    }
    if a.changes:  # a run of declared arms (releases, configurations): every value B over A, paired by block
        report["changes"] = [c.to_dict() for c in a.changes]
    if a.failed_arms:  # arms whose engine did not start: the run went on without them
        report["failed_arms"] = dict(a.failed_arms)
    return report


def write_report(run_dir: Path, *, plots: bool = True) -> dict[str, Any]:
    """Rebuild report.md, report.json, plots and report.html from the run folder; returns the JSON report."""
    a = analyse(run_dir, read_manifest(run_dir))
    found = sweeps(a)
    engines = _engine_rows(a)
    report = report_json(a, engines, found)
    (run_dir / REPORT_JSON).write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    markdown = render_markdown(a, run_dir, engines, found)
    (run_dir / REPORT_MD).write_text(markdown)
    if plots:
        _plots(a, run_dir / "plots")
        _sweep_plots(found, a.rules.margin, run_dir / "plots")
        groups_chart(a.group_decisions, run_dir / "plots" / "groups.png", margin=a.rules.margin)
    write_html_report(run_dir, markdown, plots=plots)  # report.md as one page, the plots just drawn inlined
    return report


def load_report(run_dir: Path) -> dict[str, Any]:
    """report.json of a run folder, or, when it is missing or of an older schema, the report built from the journal
    in memory (the folder is left as it was)."""
    path = run_dir / REPORT_JSON
    if path.is_file():
        obj: dict[str, Any] = orjson.loads(path.read_bytes())
        if obj.get("schema") == REPORT_SCHEMA:
            return obj
    return report_json(analyse(run_dir, read_manifest(run_dir)))
