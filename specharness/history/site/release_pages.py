"""One page per release across machines (``html/releases/<tag>.html``): what a reviewer of release B reads first.

Per machine series that measured B: the verdict of B against the release before it (changed with what, failed with
the reason, or "no change larger than ×N seen" with N the smallest change the pair could call), the scope (model,
prompts per workload, answer cap, clients, blocks, date, machine), a forest plot of every paired value with its 99%
interval against the ±rule, and the values. A machine with separate runs only says what release-compare judged there.
Flags come from :func:`~specharness.history.asv.flags.pair_flags`, the list every view shares.
"""

from __future__ import annotations

import contextlib
import html
import json
import math
import time
from pathlib import Path
from typing import Any

from specharness._errors import SpecharnessError
from specharness.analysis.verdict import RELEASE_FACTOR
from specharness.experiment.rundir import read_manifest
from specharness.history.asv.flags import failed_arms, flag_summary, pair_value_verdict
from specharness.history.asv.ledger import LEDGER
from specharness.history.asv.pairfile import PAIR_METRICS, PairRecord, PairValue, detectable, read_pairs
from specharness.history.asv.series import SUPERSEDED
from specharness.history.review.compare_view import judged_labels
from specharness.history.review.configurations import ConfigurationValue, configuration_values
from specharness.history.review.releases import find_pair, release_review
from specharness.history.review.values import release_values
from specharness.history.site.forest import ForestRow, forest_svg
from specharness.reporting.convention import CONVENTION, ratio, ratio_text

__all__ = ["COMMIT_URL", "FOLDER", "MARKS", "release_page", "write_release_pages"]

FOLDER = "releases"  # html/releases/<tag>.html, and html/releases/<commit>/ leading to it
COMMIT_URL = f"../{FOLDER}/"  # ASV's show_commit_url of every series' site: a ledger commit's link leads here
HASH_LENGTH = 8  # ASV's hash_length: the commit in its links is that long
MARKS = (
    (
        "+",
        "the later release is worse: its value's 99% interval lies apart from the earlier one's and the ratio is "
        "beyond --factor (for a release pair: the paired interval excludes 1 and the ratio lies beyond ×1.02)",
    ),
    ("-", "the later release is better, by the same rule"),
    ("!", "the value failed in the later release (its engine did not start); a failed arm is a change"),
    ("*", "the value failed in the earlier release and works in the later one (hidden by --only-changed)"),
    ("~", "the ratio is beyond --factor but the intervals overlap: not a change"),
    ("x", "the value was measured another way in the two releases (another method version): not compared"),
)
STYLE = (
    "body{font-family:sans-serif;margin:2em;max-width:1000px} table{border-collapse:collapse;font-size:.85em}"
    "td,th{border:1px solid #ccc;padding:2px 6px} .regressed{color:#c0392b} .improved{color:#1e8449}"
    ".failed{color:#c0392b;font-weight:bold} li{margin:.4em 0} .old{color:#777} code{background:#f4f4f4}"
)


def _previous(tag: str) -> str:
    for releases in LEDGER.values():
        tags = [r.tag for r in releases]
        if tag in tags and tags.index(tag) > 0:
            return tags[tags.index(tag) - 1]
    return ""


def _machines(results_dir: Path, tag: str, commit: str) -> list[str]:
    """The series with results for this release (its commit) or a pair run of it, the current ones first."""
    found = set()
    for machine_json in results_dir.glob("*/machine.json"):
        folder = machine_json.parent
        has_result = any(p.name.startswith(commit[:8]) for p in folder.glob("*.json"))
        if has_result or any(tag in (r.previous, r.current) for r in read_pairs(folder).values()):
            found.add(folder.name)
    return sorted(found, key=lambda m: (m in SUPERSEDED, m))


def _scope(results_dir: Path, machine: str, record: PairRecord) -> str:
    """Model, workloads and prompts per workload, answer cap, clients, blocks, date and machine of a pair run."""
    manifest: dict[str, Any] = {}
    folder = Path(record.run_dir) if record.run_dir else None
    if folder is not None and not folder.is_absolute():
        folder = results_dir.resolve().parent / folder
    if folder is not None:
        with contextlib.suppress(SpecharnessError):  # a run folder not in this checkout: scope "not recorded"
            manifest = read_manifest(folder)
    profile = manifest.get("config", {}).get("profile", {})
    workloads = ", ".join(str(w) for w in profile.get("workloads", [])) or "not recorded"
    blocks = max((v.blocks for v in record.values), default=0)
    info: dict[str, Any] = {}
    if (results_dir / machine / "machine.json").is_file():
        info = json.loads((results_dir / machine / "machine.json").read_text())
    hardware = ", ".join(f"{k} {info[k]}" for k in ("cpu", "num_cpu", "gpu") if info.get(k) and info[k] != "none")
    day = time.strftime("%Y-%m-%d", time.gmtime(record.measured_unix_s)) if record.measured_unix_s else "undated"
    wall = f", {record.wall_s / 60:.1f} min" if math.isfinite(record.wall_s) else ""
    items = [
        f"model {manifest.get('model', {}).get('name', 'not recorded')}",
        f"workloads {workloads}, {profile.get('requests_per_cell', '?')} prompts each",
        f"answer cap {profile.get('max_tokens_cap', '?')} tokens",
        f"clients {', '.join(str(c) for c in profile.get('clients', [])) or '?'}",
        f"{blocks} blocks",
        f"{day}{wall}",
        f"machine {machine} ({hardware or 'not recorded'})",
        f"run folder {record.run_dir or 'not recorded'}",
    ]
    return "; ".join(items)


def _overall_time(record: PairRecord) -> list[PairValue]:
    return [v for v in record.values if v.overall and v.metric == "time" and not v.failed]


def _answer(record: PairRecord) -> str:
    """The pair's verdict in one line: failed / changed / no change larger than ×N seen, and the time over all cells."""
    count, said = flag_summary(record)
    times = "; ".join(
        f"time over all cells, {v.arm}: {ratio_text(v.estimate, v.low, v.high)}" for v in _overall_time(record)
    )
    if any(f.side == "current" for f in failed_arms(record)):
        return f"<b class='failed'>failed, changed ({count})</b> — {html.escape(said)}. {html.escape(times)}"
    if count:
        return f"<b class='regressed'>changed ({count})</b> — {html.escape(said)}. {html.escape(times)}"
    seen = [d for d in (detectable(v) for v in _overall_time(record)) if math.isfinite(d)]
    limit = (
        f"no change larger than ×{ratio(max(seen))} seen" if seen else "no change called (smallest callable unknown)"
    )
    return f"<b>{limit}</b> — 0 of {len(record.values)} values changed. {html.escape(times)}"


def _verdict_cell(record: PairRecord, v: PairValue) -> str:
    verdict = pair_value_verdict(v)
    if verdict == "failed":
        side = "previous" if v.failed == "previous" else "current"
        return f"<td class='failed'>failed: {html.escape(record.failed.get(side, 'no reason recorded'))}</td>"
    words = {"regressed": "changed: worse", "improved": "changed: better", "not tested": "not tested: no interval"}
    return f"<td class='{verdict}'>{words.get(verdict, verdict)}</td>"


def _pair_block(results_dir: Path, machine: str, record: PairRecord) -> list[str]:
    order = {m: i for i, m in enumerate(PAIR_METRICS)}
    values = sorted(record.values, key=lambda v: (order.get(v.metric, 99), not v.overall, v.workload, v.clients, v.arm))
    rows = [
        ForestRow(f"{v.metric} · {v.cell} · {v.arm}", v.estimate, v.low, v.high, pair_value_verdict(v))
        for v in values
        if not v.failed
    ]
    table = "".join(
        f"<tr><td>{html.escape(v.metric)}</td><td>{html.escape(v.cell)}</td><td>{html.escape(v.arm)}</td>"
        f"<td>{html.escape(ratio_text(v.estimate, v.low, v.high)) if not v.failed else '—'}</td>"
        f"{_verdict_cell(record, v)}</tr>"
        for v in values
    )
    return [
        f"<p class='scope'>Scope: {html.escape(_scope(results_dir, machine, record))}.</p>",
        forest_svg(rows, f"{machine}: {record.current} over {record.previous}, 99% paired intervals"),
        "<details><summary>Every value</summary><table><tr><th>value</th><th>cell</th><th>arm</th>"
        f"<th>B over A [99% CI]</th><th>verdict</th></tr>{table}</table></details>",
    ]


def _separate_line(results_dir: Path, machine: str, previous: str, tag: str, ledger_dir: Path) -> str:
    try:
        changes = release_review(results_dir, previous, tag, machine, ledger_dir=ledger_dir).changes
    except Exception as exc:  # a release without results on one side: said, not raised
        return f"not compared ({html.escape(str(exc))})"
    judged = judged_labels(changes)
    failed = [c for c in changes if c.verdict == "failed" and c.changed]
    others = sorted(
        f"{c.benchmark.split('.', 1)[-1]}({c.params}) {c.verdict}" for c in changes if c.changed and c not in failed
    )
    said = [f"{len(failed)} values failed in {tag}: {failed[0].evidence}"] if failed else []
    said += others[:6] + ([f"and {len(others) - 6} more"] if len(others) > 6 else [])
    return (
        f"no pair run: separate runs only; release-compare judges {len(judged)} values and flags "
        f"{len(failed) + len(others)}"
        + (f": {html.escape('; '.join(said))}" if said else "")
        + " (separate runs carry the run-to-run offset: a pair run is the review)"
    )


def _configuration_block(machine: str, tag: str, found: list[ConfigurationValue]) -> list[str]:
    """A configuration pair measured at this release on this machine: its forest plot and values."""
    rows = [ForestRow(f"{c.metric} · {c.cell}", c.estimate, c.low, c.high, c.verdict) for c in found]
    table = "".join(
        f"<tr><td>{html.escape(c.metric)}</td><td>{html.escape(c.cell)}</td>"
        f"<td>{html.escape(ratio_text(c.estimate, c.low, c.high))}</td><td class='{html.escape(c.verdict)}'>"
        f"{html.escape(c.verdict)}</td></tr>"
        for c in found
    )
    changed = sum(c.verdict in ("regressed", "improved") for c in found)
    return [
        f"<h3 id='{machine}-configuration'>Configuration pair at {html.escape(tag)}</h3>",
        f"<p class='configuration'>Two configurations of {html.escape(tag)} in one paired run (ConfigurationPair): "
        f"the second over the first; {changed} of {len(found)} values changed.</p>",
        forest_svg(rows, f"{machine}: configuration pair at {tag}, 99% paired intervals"),
        "<table><tr><th>value</th><th>cell</th><th>second over first [99% CI]</th><th>verdict</th></tr>"
        f"{table}</table>",
    ]


def release_page(results_dir: Path, tag: str, commit: str, ledger_dir: Path) -> str:
    """The page of release ``tag`` (its ledger ``commit``) against the release before it, on every machine."""
    previous = _previous(tag)
    machines = _machines(results_dir, tag, commit)
    values = release_values(results_dir, ledger_dir)
    answers, sections = [], []
    for machine in machines:
        old = SUPERSEDED.get(machine)
        mark = f" <span class='old'>(superseded by {html.escape(old.by)})</span>" if old else ""
        record = find_pair(results_dir / machine, previous, tag) if previous else None
        configured = configuration_values([v for v in values if v.machine == machine], tag)
        block = _configuration_block(machine, tag, configured) if configured else []
        if record is not None and record.current == tag:
            answers.append(
                f"<li data-machine='{machine}'><a href='#{machine}'>{html.escape(machine)}</a>{mark}: "
                f"{_answer(record)}</li>"
            )
            block = [*_pair_block(results_dir, machine, record), *block]
        elif previous:
            answers.append(
                f"<li data-machine='{machine}'>{html.escape(machine)}{mark}: "
                f"{_separate_line(results_dir, machine, previous, tag, ledger_dir)}</li>"
            )
        if block:
            sections += [f"<h2 id='{machine}'>{html.escape(machine)}{mark}</h2>", *block]
    against = f" against {html.escape(previous)}" if previous else " (the first release of its branch: no review)"
    marks = "".join(f"<li><code>{html.escape(m)}</code> {html.escape(why)}</li>" for m, why in MARKS)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(tag)}: release review</title>"
        f"<style>{STYLE}</style></head><body><p><a href='../index.html'>all machines</a></p>"
        f"<h1>{html.escape(tag)}{against}</h1>"
        f"<p class='convention'>Every value: {CONVENTION}; changed when the interval excludes 1 and the ratio lies "
        f'beyond ×{RELEASE_FACTOR:g}. A failed arm is a change. "No change larger than ×N seen": N is the smallest '
        "change of the time over all cells the pair run could call (80% power); a smaller change may be there.</p>"
        f"<ul class='answers'>{''.join(answers) or '<li>No machine measured this release.</li>'}</ul>"
        + "".join(sections)
        + f"<h2>What asv compare's marks mean</h2><ul class='marks'>{marks}</ul></body></html>"
    )


def write_release_pages(results_dir: Path, html_dir: Path, tag_of: dict[str, str], ledger_dir: Path) -> list[str]:
    """Write ``html_dir/releases/<tag>.html`` for every ledger release with results (``tag_of``: commit -> tag);
    returns the tags written, in ledger order."""
    commit_of = {t: c for c, t in tag_of.items()}
    folder = html_dir / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for releases in LEDGER.values():
        for r in releases:
            commit = commit_of.get(r.tag, "")
            if not (commit and _machines(results_dir, r.tag, commit)):
                continue
            target = "../index.html"
            if _previous(r.tag):
                (folder / f"{r.tag}.html").write_text(release_page(results_dir, r.tag, commit, ledger_dir))
                written.append(r.tag)
                target = f"../{r.tag}.html"
            _commit_link(folder / commit[:HASH_LENGTH], r.tag, target)
    return written


def _commit_link(folder: Path, tag: str, target: str) -> None:
    """``releases/<commit>/``: where ASV's pages link a ledger commit (``show_commit_url`` + its hash), a page that
    names the release and leads to its page."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "index.html").write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><meta http-equiv='refresh' content='0; url={target}'>"
        f"<title>{html.escape(tag)}</title></head><body><a href='{target}'>{html.escape(tag)}</a></body></html>"
    )
