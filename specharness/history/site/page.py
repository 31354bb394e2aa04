"""The release page of the published site (``releases.html``): what a release reviewer reads in a minute.

:func:`write_release_page` writes the page from the staged ASV results on the ledger, their notes and the
machines' release pairs (values from :func:`specharness.history.review.values.release_values`), one section per
machine and ledger branch, made of the section modules beside this one: its release pairs and commands
(``pair_section``), thresholds (``thresholds_section``), then its separate runs (``separate_section``);
:func:`link_from_index` links it from ASV's ``index.html``. What the page shows: docs/asv-site.md#the-release-page.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from specharness.history.asv.ledger import LEDGER
from specharness.history.asv.pairfile import is_pair_benchmark
from specharness.history.asv.spreadfile import load_spread
from specharness.history.review.values import ReleaseValue, release_values
from specharness.history.site.pair_section import branch_of as _branch_of
from specharness.history.site.pair_section import commands_block as _commands
from specharness.history.site.pair_section import pair_records as _pair_records
from specharness.history.site.pair_section import pair_rule
from specharness.history.site.pair_section import pairs_section as _pairs_section
from specharness.history.site.release_pages import MARKS
from specharness.history.site.separate_section import separate_section as _separate_section
from specharness.history.site.thresholds_section import entry_names as _entry_names
from specharness.history.site.thresholds_section import thresholds_section as _thresholds_section

__all__ = ["PAGE", "link_from_index", "pair_rule", "write_release_page"]

PAGE = "releases.html"


def _order(tags: list[str]) -> list[str]:
    ledger = [r.tag for releases in LEDGER.values() for r in releases]
    return sorted(tags, key=lambda t: ledger.index(t) if t in ledger else len(ledger))


def _unpublished(results_dir: Path, vals: list[ReleaseValue]) -> list[str]:
    try:
        known = json.loads((results_dir / "benchmarks.json").read_text())
    except (OSError, json.JSONDecodeError):
        return []
    measured = {v.benchmark for v in vals if math.isfinite(v.value) or v.failed}
    machines = {v.machine for v in vals}
    where = f"on {next(iter(machines))}" if len(machines) == 1 else "on a committed machine"  # one site per machine
    why = {
        "UserWorkload": "runs only with SPECHARNESS_ASV_WORKLOAD set (your own traffic)",
        "StructuredOutput": f"not run {where} yet",
        "SampledDistribution": f"not run {where} yet",
        "ReleasePair": f"no release pair run {where} yet",
    }
    missing = sorted(k for k in known if k != "version" and k not in measured)
    if not missing:
        return []
    items = "".join(
        f"<li>{html.escape(m)}: {html.escape(next((w for c, w in why.items() if c in m), f'no results {where} yet'))}</li>"
        for m in missing
    )
    return [
        f"<h2 id='unpublished'>Benchmarks without results</h2><p>ASV's own graph pages for these are empty; "
        f"this is why:</p><ul>{items}</ul>"
    ]


def _machine_text(results_dir: Path, machine: str) -> str:
    try:
        info = json.loads((results_dir / machine / "machine.json").read_text())
    except (OSError, json.JSONDecodeError):
        info = {}
    keys = ("cpu", "num_cpu", "ram", "gpu", "gpu_memory", "gpu_driver")
    return ", ".join(f"{k} {info[k]}" for k in keys if info.get(k)) or "machine details not recorded"


def _series_section(
    results_dir: Path,
    site: Path,
    machine: str,
    branch: str,
    mv: list[ReleaseValue],
    known: Mapping[str, Any],
    thresholds: Mapping[str, float],
    first: bool,
) -> list[str]:
    """One machine's releases of one ledger branch: the release pairs first, then the values of separate runs."""
    releases = _order(sorted({v.tag for v in mv}))
    records = _pair_records(results_dir / machine, branch)
    return [
        f"<h2>{html.escape(branch)} on {html.escape(machine)}</h2>",
        f"<p class='machine'>{html.escape(_machine_text(results_dir, machine))}</p>",
        *_pairs_section(records, branch),
        _commands(machine, branch, releases, records),
        *_thresholds_section(thresholds, branch, site, _entry_names(known)),
        *_separate(mv, releases, load_spread(results_dir, machine), known, first),
    ]


def _separate(
    mv: list[ReleaseValue], releases: list[str], spread: dict[str, Any], known: Mapping[str, Any], first: bool
) -> list[str]:
    """The separate runs' section, from the values that are not a release pair's (those are above, with their own
    interval and date); one line when there are none."""
    separate = [v for v in mv if not is_pair_benchmark(v.benchmark)]
    if not separate:
        return [
            "<p class='no-separate'>No separate runs on this machine: every value here comes from release pairs.</p>"
        ]
    return _separate_section(separate, releases, spread, known, first)


def write_release_page(
    results_dir: Path,
    html_dir: Path,
    ledger_dir: Path | None = None,
    thresholds: Mapping[str, float] | None = None,
) -> Path:
    """Write ``html_dir/releases.html`` from the ASV results on the ledger and the machines' release pairs;
    ``thresholds`` are the ``regressions_thresholds`` of the configuration the site was published with."""
    vals = release_values(results_dir, ledger_dir)
    try:
        known = json.loads((results_dir / "benchmarks.json").read_text())
    except (OSError, json.JSONDecodeError):
        known = {}
    body = [
        "<!doctype html><html><head><meta charset='utf-8'><title>specharness: by vLLM release</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:1200px} table{border-collapse:collapse;"
        "font-size:12px;margin:.5em 0 1.5em} td,th{border:1px solid #ccc;padding:2px 6px} .bench,.cell"
        "{display:inline-block;margin:0 1em 1em 0;vertical-align:top} tr.failed td{background:#fee} "
        "tr.regressed td{background:#fdd} tr.improved td{background:#dfd} .failed-release{color:#a00}</style>"
        "</head><body>",
        "<h1>By vLLM release</h1><p><a href='index.html'>ASV graphs</a> · Releases sit on ASV's axis through the "
        "release ledger and are named here by their ledger tags. Each section starts with its release pairs (both "
        "releases side by side in one run), then gives the commands for its releases.</p>",
    ]
    if not vals:
        body.append("<p id='empty'>No results on the release ledger yet.</p>")
    by_series: dict[tuple[str, str], list[ReleaseValue]] = defaultdict(list)
    for v in vals:
        by_series[(v.machine, _branch_of(v.tag) or v.tag.rsplit("-", 1)[0])].append(v)
    for i, ((machine, branch), mv) in enumerate(sorted(by_series.items())):
        body += _series_section(results_dir, html_dir, machine, branch, mv, known, thresholds or {}, i == 0)
    body += _unpublished(results_dir, vals)
    body.append(
        "<h2 id='marks'>What asv compare's marks mean</h2><ul class='marks'>"
        + "".join(f"<li><code>{html.escape(m)}</code> {html.escape(why)}</li>" for m, why in MARKS)
        + "</ul>"
    )
    body.append("</body></html>")
    out = html_dir / PAGE
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
