"""The release page's separate runs (each release measured in its own run) on one machine and ledger branch: the
days and setups, failed releases, the same-work speedup per cell, the speculative configuration view and every other
tracked value, each charted across releases (an SVG drawn here) with its band or interval.
"""

from __future__ import annotations

import html
import math
import re
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from specharness.history.asv.pairfile import is_pair_benchmark
from specharness.history.asv.spreadfile import MIN_SPREAD_DF, spread_missing, spread_sd
from specharness.history.review.values import ReleaseValue
from specharness.numbers import fmt as _fmt

__all__ = ["nice_ticks", "separate_section"]

MIN_SPAN = 0.10  # a chart's y axis spans at least 10% of the level it shows
PLUS_MINUS = (
    "In <code>asv compare</code> and <code>asv show</code>, a value's ± is half the interquartile range "
    "of its blocks (ASV's <code>q_25</code>/<code>q_75</code>) and <code>ci_99</code> is a 99% interval "
    "(t over blocks for the slowdown; the measured run-to-run spread for absolute values, none where that spread "
    "is not estimable); their overlap is ASV's screen. The test of a change between separate runs is "
    "<code>specharness release-compare</code>'s (Holm across the slowdown cells, Benjamini–Hochberg q = 0.10 over "
    "everything else, which is exploratory); a release pair's values are judged by the paired rule above."
)
_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"]


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (1, 2, 2.5, 5 × 10^k steps)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi <= lo:
        lo, hi = lo - (abs(lo) or 1) * 0.1, hi + (abs(hi) or 1) * 0.1
    raw = (hi - lo) / max(count - 1, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks, t = [], start
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 10))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(t, 10))
    return ticks


def _unit(benchmark: str, units: dict[str, str]) -> str:
    """The benchmark's ASV ``unit`` (``units``, from ``benchmarks.json``; it says which way is worse, e.g. ``ms
    (higher is worse)``); from its name where none is listed."""
    if units.get(benchmark):
        return units[benchmark]
    name = benchmark.rsplit(".", 1)[-1]
    if "_ms" in name:
        return "ms (higher is worse)"
    if "memory_mib" in name:
        return "MiB (higher is worse)"
    if name.endswith("_s"):
        return "s (higher is worse)"
    if any(w in name for w in ("fraction", "rejection_rate")):
        return "fraction (higher is worse)"
    if "steps_per_token" in name:
        return "verify steps per token (higher is worse)"
    if "failed" in name:
        return "1 = failed"
    return "ratio (higher is worse)"


def _chart(
    series: dict[str, list[tuple[str, float, float, float]]],
    releases: list[str],
    failed: set[str],
    y_label: str,
    css: str = "metric",
    ref_line: float | None = None,
) -> str:
    """SVG: x = releases, per series points (value) with an optional band (low, high); failed releases crossed."""
    w, h, left, right, top, bottom = 520, 230, 62, 16, 14, 44
    values = [x for pts in series.values() for _, v, lo, hi in pts for x in (v, lo, hi) if math.isfinite(x)]
    if ref_line is not None:
        values.append(ref_line)
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    mid = (lo + hi) / 2
    if values and hi - lo < MIN_SPAN * abs(mid):  # a 1% move must not fill the axis: show at least ±5% of the level
        lo, hi = min(lo, mid * (1 - MIN_SPAN / 2)), max(hi, mid * (1 + MIN_SPAN / 2))
    ticks = nice_ticks(lo, hi)
    y0, y1 = ticks[0], ticks[-1]
    x_of = {r: left + (w - left - right) * ((i + 0.5) / max(len(releases), 1)) for i, r in enumerate(releases)}

    def y(v: float) -> float:
        return top + (h - top - bottom) * (1 - (v - y0) / ((y1 - y0) or 1))

    p = [
        f'<svg class="{css}" width="{w}" height="{h}" viewBox="0 0 {w} {h}" xmlns="http://www.w3.org/2000/svg">',
        f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="#888"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="#888"/>',
        f'<text x="12" y="{(h - bottom + top) / 2:.0f}" font-size="11" transform="rotate(-90 12 '
        f'{(h - bottom + top) / 2:.0f})" text-anchor="middle" class="y-label">{html.escape(y_label)}</text>',
    ]
    for t in ticks:
        p.append(
            f'<line x1="{left - 4}" y1="{y(t):.1f}" x2="{w - right}" y2="{y(t):.1f}" stroke="#eee"/>'
            f'<text class="tick" x="{left - 6}" y="{y(t) + 4:.1f}" font-size="10" text-anchor="end">{_fmt(t)}</text>'
        )
    if ref_line is not None:
        p.append(
            f'<line x1="{left}" y1="{y(ref_line):.1f}" x2="{w - right}" y2="{y(ref_line):.1f}" stroke="#444" '
            f'stroke-dasharray="4 3"/>'
        )
    for r in releases:
        p.append(
            f'<text x="{x_of[r]:.0f}" y="{h - bottom + 16}" font-size="10" text-anchor="middle">'
            f"{html.escape(r.rsplit('-', 1)[-1])}</text>"
        )
        if r in failed:
            cx, cy = x_of[r], h - bottom - 8
            p.append(
                f'<g class="failed-marker" data-release="{html.escape(r)}"><title>{html.escape(r)} failed</title>'
                f'<line x1="{cx - 6}" y1="{cy - 6}" x2="{cx + 6}" y2="{cy + 6}" stroke="#c00" stroke-width="3"/>'
                f'<line x1="{cx - 6}" y1="{cy + 6}" x2="{cx + 6}" y2="{cy - 6}" stroke="#c00" stroke-width="3"/></g>'
            )
    p.append(
        f'<text x="{(left + w - right) / 2:.0f}" y="{h - 8}" font-size="11" text-anchor="middle">'
        f"{html.escape(releases[0].rsplit('-', 1)[0] if releases else '')} release</text>"
    )
    for i, (name, pts) in enumerate(sorted(series.items())):
        colour = _COLOURS[i % len(_COLOURS)]
        pts = [pt for pt in pts if pt[0] in x_of and math.isfinite(pt[1])]
        pts.sort(key=lambda pt: releases.index(pt[0]))
        band = [pt for pt in pts if math.isfinite(pt[2]) and math.isfinite(pt[3])]
        if len(band) >= 2:
            upper = " ".join(f"{x_of[r]:.1f},{y(hi):.1f}" for r, _, _, hi in band)
            lower = " ".join(f"{x_of[r]:.1f},{y(lo):.1f}" for r, _, lo, _ in reversed(band))
            p.append(f'<polygon class="ci-band" points="{upper} {lower}" fill="{colour}" fill-opacity="0.18"/>')
        for r, _, lo, hi in band:
            p.append(
                f'<line class="ci-bar" x1="{x_of[r]:.1f}" y1="{y(lo):.1f}" x2="{x_of[r]:.1f}" y2="{y(hi):.1f}" '
                f'stroke="{colour}" stroke-width="2"/>'
            )
        if len(pts) > 1:
            p.append(
                f'<polyline fill="none" stroke="{colour}" points="'
                + " ".join(f"{x_of[r]:.1f},{y(v):.1f}" for r, v, _, _ in pts)
                + '"/>'
            )
        for r, v, lo, hi in pts:
            ci = f" [{_fmt(lo)}, {_fmt(hi)}]" if math.isfinite(lo) else ""
            p.append(
                f'<circle class="point" cx="{x_of[r]:.1f}" cy="{y(v):.1f}" r="4" fill="{colour}" '
                f'data-release="{html.escape(r)}" data-value="{v:.6g}"><title>{html.escape(name)} {html.escape(r)}: '
                f"{_fmt(v)}{ci}</title></circle>"
            )
    p.append("</svg>")
    legend = " · ".join(
        f"<span style='color:{_COLOURS[i % len(_COLOURS)]}'>●</span> {html.escape(n)}"
        for i, n in enumerate(sorted(series))
    )
    return "".join(p) + (f"<div class='legend'>{legend}</div>" if len(series) > 1 else "")


def _inv(v: float) -> float:
    return 1 / v if v and math.isfinite(v) else math.nan


def _speedup(v: ReleaseValue) -> tuple[str, float, float, float]:
    """A chart point (release, speedup, low, high) from a tracked slowdown: speedup = 1 / slowdown, ends swapped."""
    return v.tag, _inv(v.value), _inv(v.ci_high), _inv(v.ci_low)


def _speedup_text(v: ReleaseValue) -> str:
    _, est, low, high = _speedup(v)
    if math.isfinite(low):
        return f"{_fmt(est)} [{_fmt(low)}, {_fmt(high)}]"
    why = "its results have no note for it" if not (v.source or v.blocks) else "its note records none"
    return f"{_fmt(est)} (no interval: {why})"


def _by(values: list[ReleaseValue], benchmark_suffix: str) -> dict[tuple[str, str], ReleaseValue]:
    return {(v.params, v.tag): v for v in values if v.benchmark.endswith(benchmark_suffix)}


def _paired_section(vals: list[ReleaseValue], releases: list[str], failed: dict[str, str]) -> list[str]:
    slow = _by(vals, "PairedNgram.track_slowdown")
    cells = sorted(
        {p for p, _ in slow}, key=lambda s: (s.split(", ")[0], int(s.split(", ")[-1]) if s[-1].isdigit() else 0)
    )
    rej, good = _by(vals, "PairedNgram.track_rejection_rate"), _by(vals, "PairedNgram.track_goodput_loss")
    mem_b, mem_n = _by(vals, "track_peak_memory_mib_baseline"), _by(vals, "track_peak_memory_mib_ngram")
    if not any(math.isfinite(v.value) for v in slow.values()) and not failed:
        return []  # nothing to chart: no empty heading
    out = [
        "<h3>Same-work speedup of ngram over baseline, per workload and client count</h3>",
        "<p>Band: the 95% CI over blocks (a release whose CI lies inside the equivalence band is "
        "<i>equivalent</i>; the dashed line is no change). Speedup = 1 / the tracked slowdown.</p>",
    ]
    for cell in cells:
        if not any(math.isfinite(slow[(cell, r)].value) for r in releases if (cell, r) in slow):
            continue
        pts = [_speedup(slow[(cell, r)]) for r in releases if (cell, r) in slow]
        workload, _, clients = cell.partition(", ")
        rows = []
        for r in releases:
            v = slow.get((cell, r))
            if r in failed:
                rows.append(
                    f"<tr class='failed'><td>{html.escape(r)}</td><td colspan='7' class='failed-reason'>"
                    f"{html.escape(failed[r])}</td></tr>"
                )
                continue
            if v is None or not math.isfinite(v.value):
                continue
            acc = 1 - rej[(cell, r)].value if (cell, r) in rej else math.nan
            gr = _inv(good[(cell, r)].value) if (cell, r) in good else math.nan
            mem = (
                f"{_fmt(mem_b[(cell, r)].value)} / {_fmt(mem_n[(cell, r)].value)}"
                if (cell, r) in mem_b and (cell, r) in mem_n
                else "—"
            )
            n = f"{v.blocks} blocks" if v.blocks else (v.source or "")
            rows.append(
                f"<tr><td>{html.escape(r)}</td><td>{_speedup_text(v)}</td>"
                f"<td class='verdict'>{html.escape(v.speed_verdict or 'not recorded')}</td>"
                f"<td class='verdict'>{html.escape(v.quality_verdict or 'not recorded')}</td>"
                f"<td>{_fmt(100 * acc) + ' %' if math.isfinite(acc) else '—'}</td><td>{_fmt(gr)}</td>"
                f"<td>{mem}</td><td class='n'>{html.escape(n[:60])}</td></tr>"
            )
        out.append(
            f"<div class='cell'><h4>{html.escape(workload)}, {html.escape(clients)} client(s)</h4>"
            + _chart({"speedup": pts}, releases, set(failed), "same-work speedup (×)", "metric speedup", 1.0)
            + "<table><tr><th>release</th><th>speedup [95% CI]</th><th>speed verdict</th><th>quality verdict</th>"
            "<th>acceptance</th><th>goodput ratio ngram/baseline</th><th>peak memory MiB base / ngram</th>"
            "<th>evidence</th></tr>" + "".join(rows) + "</table></div>"
        )
    return out


def _config_section(vals: list[ReleaseValue], releases: list[str]) -> list[str]:
    slow = _by(vals, "NgramConfigSweep.track_slowdown")
    rej = _by(vals, "NgramConfigSweep.track_rejection_rate")
    here = [r for r in releases if any(t == r and math.isfinite(v.value) for (_, t), v in slow.items())]
    if not here:
        return []
    configs = sorted({p for p, _ in slow}, key=lambda s: tuple(int(x) for x in re.findall(r"\d+", s)))
    series = {
        f"k={c.split(', ')[0]}, lookup max {c.split(', ')[1]}": [_speedup(slow[(c, r)]) for r in here if (c, r) in slow]
        for c in configs
    }
    head = "".join(f"<th>{html.escape(r)}</th>" for r in here)
    rows = []
    for c in configs:
        cells = []
        for r in here:
            v = slow.get((c, r))
            acc = 1 - rej[(c, r)].value if (c, r) in rej else math.nan
            cells.append(
                "<td>—</td>"
                if v is None or not math.isfinite(v.value)
                else f"<td>{_speedup_text(v)}, {v.speed_verdict or 'speed verdict not recorded'}; "
                f"acceptance {_fmt(100 * acc)} %</td>"
            )
        k, mx = c.split(", ")
        rows.append(f"<tr><td>num_speculative_tokens={k}, prompt_lookup_max={mx}</td>{''.join(cells)}</tr>")
    return [
        "<h3 id='config-view'>Speculative configuration across releases (copy, 1 client)</h3>",
        _chart(series, here, set(), "same-work speedup (×)", "metric config", 1.0),
        f"<table class='config'><tr><th>configuration</th>{head}</tr>{''.join(rows)}</table>",
    ]


def _band(v: ReleaseValue, spread: dict[str, Any]) -> tuple[float, float]:
    """One run's value ×/÷ exp(s): ± one sd of its log (:func:`spread_sd`: the day-to-day sd where it is estimable and
    the larger, else the run-to-run sd); NaN where the spread is not estimable. One sd, not a t interval."""
    sd = spread_sd(spread, v.benchmark)
    if sd is None or not math.isfinite(v.value):
        return math.nan, math.nan
    return v.value * math.exp(-sd[0]), v.value * math.exp(sd[0])


def _no_band(spread: dict[str, Any], benchmark: str) -> str:
    """Why a value has no band ("" where it has one), in :func:`spread_missing`'s words: a spread measured over fewer
    than three runs (or days) is not estimable from them."""
    return "" if spread_sd(spread, benchmark) is not None else f"no band: {spread_missing(spread, benchmark)}"


def _other_section(
    vals: list[ReleaseValue], releases: list[str], failed: dict[str, str], spread: dict[str, Any], units: dict[str, str]
) -> list[str]:
    skip = ("PairedNgram.track_slowdown", "NgramConfigSweep.", "track_engine_failed")
    groups: dict[str, list[ReleaseValue]] = defaultdict(list)
    for v in vals:
        if not any(s in v.benchmark for s in skip) and not is_pair_benchmark(v.benchmark):
            groups[v.benchmark].append(v)
    out = [
        "<h3>Every other tracked value (oriented so that a rise is worse; exploratory)</h3>",
        "<p>Band: ± one standard deviation of one run's value (log scale), from this machine's measured spread (the "
        "paragraph on days above says which); a value whose spread is not estimable has no band, and its chart says "
        "why. The tests (release-compare) use t with the spread's degrees of freedom. The y axis spans at least 10% "
        "of the level.</p>",
    ]
    for bench in sorted(groups):
        vs = groups[bench]
        if not any(math.isfinite(v.value) for v in vs):
            continue
        series: dict[str, list[tuple[str, float, float, float]]] = defaultdict(list)
        for v in vs:
            series[v.params or "value"].append((v.tag, v.value, *_band(v, spread)))
        name = bench.split(".", 1)[-1]
        why = _no_band(spread, bench)
        out.append(
            f"<div class='bench'><h4>{html.escape(name)}</h4>"
            + _chart(dict(series), releases, set(failed), _unit(bench, units))
            + (f"<p class='no-band'>{html.escape(why)}</p>" if why else "")
            + "</div>"
        )
    return out


def _setups(vals: list[ReleaseValue], releases: list[str]) -> list[str]:
    """What each release's values were measured with (profile, engine options; their notes), where recorded; a
    warning when the releases of one series were measured more than one way."""
    found = {r: sorted({v.setup for v in vals if v.tag == r and v.setup}) for r in releases}
    if not any(found.values()):
        return []
    listed = "; ".join(f"{r}: {' | '.join(s) or 'not recorded'}" for r, s in found.items())
    ways = {s for setups in found.values() for s in setups}
    warning = (
        " The releases on this machine were measured more than one way: release-compare calls a value not "
        "comparable where its two releases' setups differ, and ASV's graphs and asv compare do not know it."
        if len(ways) > 1
        else ""
    )
    cls = "setups mixed-setups" if warning else "setups"
    return [f"<p class='{cls}'>Measured with: {html.escape(listed)}.{html.escape(warning)}</p>"]


def _spread_words(spread: dict[str, Any]) -> str:
    """Where the spread of absolute values comes from on this machine, and what is not estimable."""
    runs, release = int(spread.get("runs", 0) or 0), spread.get("release", "?")
    if not runs:
        out = "No run-to-run spread was measured on this machine: absolute values have no band and are not tested. "
    elif runs < MIN_SPREAD_DF + 1:
        out = (
            f"The run-to-run spread is not estimable from {runs} runs of {release}: absolute values (latencies, ms per "
            "token, memory) have no band and are not tested. "
        )
    else:
        out = f"The run-to-run spread was measured from {runs} runs of {release}. "
    days = [str(d) for d in spread.get("days") or []]
    if len(days) >= 2 and spread.get("day_sd_log"):
        n, df = len(days), int(spread.get("day_df", len(days) - 1))
        on = f"{n} days, {', '.join(days)}" + (f" ({spread['day_source']})" if spread.get("day_source") else "")
        out += (
            f"The spread across days was measured over {on}; absolute values carry it where it is the larger. "
            if df >= MIN_SPREAD_DF
            else f"The spread across days rests on {on}: not estimable from {n} days, so a value whose spread across "
            "days is the larger has no band. "
        )
    else:
        out += (
            "No repeat on a second day is recorded: the spread across days is not estimable, and absolute values may "
            "move more between days than any band shows. "
        )
    return out + (
        "The slowdown uses its interval over blocks within each run; a release pair's values carry neither spread "
        "(both releases in one run)."
    )


def _days(vals: list[ReleaseValue], releases: list[str], spread: dict[str, Any]) -> str:
    """Which days each release was measured on, and where the spread of absolute values comes from."""
    days = {r: sorted({v.measured_on for v in vals if v.tag == r and v.measured_on}) for r in releases}
    listed = "; ".join(f"{html.escape(r)}: {', '.join(d) or 'not recorded'}" for r, d in days.items())
    repeated = [r for r, d in days.items() if len(d) >= 2]
    here = (
        f"Values of {', '.join(repeated)} were measured on two or more days (different benchmarks). "
        if repeated
        else ""
    )
    return f"<p class='days'>Days measured (ASV's started_at, UTC): {listed}. {html.escape(here + _spread_words(spread))}</p>"


def _failed_releases(mv: list[ReleaseValue]) -> dict[str, str]:
    """Each failed release's reason; the paired experiment's first: it is the release's own run, the others may be
    migrated records."""
    failed: dict[str, str] = {}
    for v in sorted(mv, key=lambda v: not v.benchmark.startswith("bench_paired.")):
        if v.failed and v.tag not in failed:
            failed[v.tag] = v.failed
    return failed


def separate_section(
    mv: list[ReleaseValue], releases: list[str], spread: dict[str, Any], known: Mapping[str, Any], first: bool
) -> list[str]:
    """The separate runs of one machine's releases of one ledger branch (``mv``, ``releases`` in ledger order):
    ``spread`` is the machine's measured spread, ``known`` ASV's ``benchmarks.json`` (each value's unit)."""
    units = {k: str(v.get("unit") or "") for k, v in known.items() if isinstance(v, dict)}
    failed = _failed_releases(mv)
    body = [
        "<h3 id='separate-runs'>Separate runs: each release measured in its own run</h3>",
        f"<p{' id=plus-minus' if first else ''} class='plus-minus'>{PLUS_MINUS}</p>",
    ]
    if failed:
        body.append(
            "<ul class='failed-releases'>"
            + "".join(
                f"<li class='failed-release'><b>{html.escape(t)}</b>: {html.escape(r)}</li>" for t, r in failed.items()
            )
            + "</ul>"
        )
    body.append(_days(mv, releases, spread))
    body += _setups(mv, releases)
    body += _paired_section(mv, releases, failed) + _config_section(mv, releases)
    return body + _other_section(mv, releases, failed, spread, units)
