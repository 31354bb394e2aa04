"""A static page for the published site: each tracked metric against the vLLM release, read from ASV's results.

ASV's graphs put commits on the x axis; a release reviewer wants "metric vs engine release". This page reads every
result file (pandas), takes the release from the environment name (``...vllm-cpu0.31.0`` for matrix environments,
``existing-py_..._vllm-0.26.0_...`` for an existing one at a versioned path) and draws one small SVG per metric,
with the latest harness commit's value for each release, machine and parameter combination.
"""

from __future__ import annotations

import html
import itertools
import re
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["link_from_index", "release_frame", "write_release_page"]

PAGE = "releases.html"
_RELEASE = re.compile(r"vllm(?:-cpu)?[-_=]?(\d+\.\d+(?:\.\d+)?(?:\.post\d+)?)")


def release_of(env_name: str) -> str | None:
    m = _RELEASE.search(env_name)
    return m.group(1) if m else None


def _version_key(release: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", release))


def release_frame(results_dir: Path) -> pd.DataFrame:
    """One row per (machine, release, commit, benchmark, parameter combination) with its value."""
    from asv.results import iter_results

    rows: list[dict[str, Any]] = []
    for result in iter_results(str(results_dir)):
        release = release_of(result.env_name)
        if release is None:
            continue
        for key in result.get_all_result_keys():
            params = result.get_result_params(key)
            values = result.get_result_value(key, params)
            combos = list(itertools.product(*params)) if params else [()]
            if not isinstance(values, list):
                values = [values]
            for combo, value in zip(combos, values, strict=False):
                rows.append({"machine": result.params.get("machine", "?"), "release": release,
                             "commit": result.commit_hash[:8], "date": result.date, "benchmark": key,
                             "params": ", ".join(str(c).strip("'") for c in combo), "value": value})  # fmt: skip
    frame = pd.DataFrame(rows, columns=["machine", "release", "commit", "date", "benchmark", "params", "value"])
    return frame


def _latest(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.dropna(subset=["value"])
    if frame.empty:
        return frame
    idx = frame.groupby(["machine", "release", "benchmark", "params"])["date"].idxmax()
    return frame.loc[idx]


_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"]


def _svg(sub: pd.DataFrame, releases: list[str]) -> str:
    w, h, pad = 460, 200, 40
    lo, hi = float(sub["value"].min()), float(sub["value"].max())
    if hi == lo:
        lo, hi = lo - 0.5 * (abs(lo) or 1), hi + 0.5 * (abs(hi) or 1)
    x_of = {r: pad + (w - 2 * pad) * (i / max(len(releases) - 1, 1)) for i, r in enumerate(releases)}

    def y(v: float) -> float:
        return h - pad - (h - 2 * pad) * (v - lo) / (hi - lo)

    parts = [f'<svg class="metric" width="{w}" height="{h}" viewBox="0 0 {w} {h}" xmlns="http://www.w3.org/2000/svg">',
             f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="#999"/>',
             f'<text x="4" y="{pad}" font-size="10">{hi:.3g}</text>',
             f'<text x="4" y="{h - pad}" font-size="10">{lo:.3g}</text>']  # fmt: skip
    for r in releases:
        parts.append(f'<text x="{x_of[r] - 14:.0f}" y="{h - pad + 16}" font-size="11">{html.escape(r)}</text>')
    order = sorted(sub["params"].unique())
    for (machine, params), series in sub.groupby(["machine", "params"]):
        colour = _COLOURS[order.index(params) % len(_COLOURS)]
        series = series.assign(order=series["release"].map(releases.index)).sort_values("order")
        pts = [(x_of[r], y(v)) for r, v in zip(series["release"], series["value"], strict=True)]
        if len(pts) > 1:
            parts.append(f'<polyline fill="none" stroke="{colour}" points="{" ".join(f"{a:.1f},{b:.1f}" for a, b in pts)}"/>')
        for (px, py), r, v in zip(pts, series["release"], series["value"], strict=True):
            label = html.escape(f"{machine} [{params}] vLLM {r}: {v:.4g}")
            parts.append(f'<circle class="point" cx="{px:.1f}" cy="{py:.1f}" r="4" fill="{colour}" '
                         f'data-release="{html.escape(r)}" data-value="{v:.6g}"><title>{label}</title></circle>')  # fmt: skip
    parts.append("</svg>")
    return "".join(parts)


def write_release_page(results_dir: Path, html_dir: Path) -> Path:
    """Write html_dir/releases.html: per benchmark, value vs vLLM release, plus the table of latest values."""
    frame = _latest(release_frame(results_dir))
    out = html_dir / PAGE
    body = ["<!doctype html><html><head><meta charset='utf-8'><title>specharness: metrics by vLLM release</title>",
            "<style>body{font-family:sans-serif;margin:2em} table{border-collapse:collapse;font-size:12px}"
            "td,th{border:1px solid #ccc;padding:2px 6px} .bench{display:inline-block;margin:0 1em 1em 0;"
            "vertical-align:top}</style></head><body>",
            "<h1>Metrics by vLLM release</h1><p><a href='index.html'>ASV overview</a> · Every value is oriented so "
            "that a rise is worse (slowdown = 1/speedup, rejection rate = 1 − acceptance, …). Points: latest "
            "harness commit per release, machine and parameters (hover for values).</p>"]  # fmt: skip
    if frame.empty:
        body.append("<p id='empty'>No results with a vLLM release in their environment name yet.</p>")
    else:
        releases = sorted(frame["release"].unique(), key=_version_key)
        for (bench, machine), sub in frame.groupby(["benchmark", "machine"]):
            here = [r for r in releases if r in set(sub["release"])]
            legend = " · ".join(f"<span style='color:{_COLOURS[i % len(_COLOURS)]}'>●</span> {html.escape(str(p))}"
                                for i, p in enumerate(sorted(sub["params"].unique())))  # fmt: skip
            body.append(f"<div class='bench'><h3>{html.escape(str(bench).split('.', 1)[-1])}</h3>"
                        f"<div>machine {html.escape(str(machine))}</div>{_svg(sub, here)}<div>{legend}</div></div>")
        pivot = frame.pivot_table(index=["benchmark", "params", "machine"], columns="release", values="value",
                                  aggfunc="last")[releases]  # fmt: skip
        body.append("<h2>Latest values</h2>" + pivot.to_html(float_format=lambda v: f"{v:.4g}", na_rep="—"))
    body.append("</body></html>")
    out.write_text("\n".join(body))
    return out


def link_from_index(html_dir: Path) -> None:
    """Add a link to the release page in ASV's index.html navigation (idempotent)."""
    index = html_dir / "index.html"
    text = index.read_text()
    marker = f'href="{PAGE}"'
    if marker in text:
        return
    link = f'<li><a {marker} id="nav-li-releases">By vLLM release</a></li>'
    nav = re.search(r'<ul class="nav navbar-nav[^"]*">', text)
    if nav:
        text = text[: nav.end()] + link + text[nav.end() :]
    else:
        text = text.replace("<body>", f"<body><a {marker}>By vLLM release</a>", 1)
    index.write_text(text)
