"""The release page's release pairs: each pair run of a branch with every value, the paired rule's verdict, a failed
side as a failed arm with its reason, the smallest change it could call, and the commands that measure a pair."""

from __future__ import annotations

import html
import math
import time
from pathlib import Path

from specharness.analysis.verdict import RELEASE_FACTOR, pair_change
from specharness.history.asv.flags import flag_summary, pair_flags
from specharness.history.asv.ledger import LEDGER, tag_release
from specharness.history.asv.pairfile import (
    PAIR_METRICS,
    PairRecord,
    PairValue,
    detectable,
    read_pairs,
)
from specharness.numbers import fmt as _fmt
from specharness.reporting.convention import ratio, ratio_text

__all__ = ["branch_of", "commands_block", "pair_records", "pair_rule", "pairs_section"]


def branch_of(tag: str) -> str:
    """The ledger branch a release tag is on ("" off the ledger)."""
    return next((b for b, releases in LEDGER.items() if any(r.tag == tag for r in releases)), "")


def pair_records(machine_dir: Path, branch: str) -> list[PairRecord]:
    """The machine's latest pair records whose two releases are on ``branch``, the latest release first."""
    order = [r.tag for r in LEDGER.get(branch, ())]
    found = [r for r in read_pairs(machine_dir).values() if r.previous in order and r.current in order]
    return sorted(found, key=lambda r: (order.index(r.current), order.index(r.previous)), reverse=True)


def pair_rule(factor: float = RELEASE_FACTOR) -> str:
    """The paired rule in words, as the page states it."""
    return (
        f"A value changed when its paired 99% interval excludes 1 and its ratio lies beyond ×{factor:g}; this is "
        f"what <code>asv compare --factor {factor:g}</code> and the regressions page flag on these values."
    )


def _pair_heading(record: PairRecord) -> str:
    when = time.strftime("%Y-%m-%d", time.gmtime(record.measured_unix_s)) if record.measured_unix_s else "undated"
    wall = f"{record.wall_s:.0f} s" if math.isfinite(record.wall_s) else "wall time not recorded"
    return f"{record.previous} → {record.current}: one paired run, {when}, {wall}"


def _failed_side(record: PairRecord, value: PairValue) -> tuple[str, str]:
    """(the failed release's tag, or both tags, and the engine's reason) of a value whose side failed."""
    sides = ("previous", "current") if value.failed == "both" else (value.failed,)
    tags = " and ".join(record.previous if s == "previous" else record.current for s in sides)
    reason = "; ".join(record.failed.get(s, "") for s in sides if record.failed.get(s)) or "no reason recorded"
    return tags, reason


def _no_interval(value: PairValue) -> str:
    if not math.isfinite(value.estimate):
        return "no interval: the run recorded no value for it"
    if value.blocks < 2:
        return f"no interval: {value.blocks} block(s) with a value in both releases, at least 2 are needed"
    return "no interval: the run recorded none"


def _pair_row(record: PairRecord, value: PairValue) -> str:
    where = ("all cells", "all") if value.overall else (value.workload, str(value.clients))
    cell = f"<td>{html.escape(value.metric)}</td><td>{html.escape(where[0])}</td><td>{html.escape(where[1])}</td>"
    if value.failed:
        tags, reason = _failed_side(record, value)
        return (
            f"<tr class='failed'>{cell}<td class='failed-arm'>{html.escape(value.arm)} of {html.escape(tags)} "
            f"failed</td><td>—</td><td class='verdict'>failed</td><td class='failed-reason'>{html.escape(reason)}"
            "</td></tr>"
        )
    verdict = pair_change(value.estimate, value.low, value.high, RELEASE_FACTOR)
    if verdict == "not tested":
        shown, note = (_fmt(value.estimate) if math.isfinite(value.estimate) else "—"), _no_interval(value)
    else:
        shown = ratio_text(value.estimate, value.low, value.high)
        note = f"{value.blocks} blocks"
    if value.speed:
        note += f"; run: speed {value.speed}, quality {value.quality}, identical outputs {value.identical}"
    return (
        f"<tr class='pair-value {html.escape(verdict.replace(' ', '-'))}'>{cell}<td>{html.escape(value.arm)}</td>"
        f"<td>{shown}</td><td class='verdict'>{html.escape(verdict)}</td><td class='n'>{html.escape(note)}</td></tr>"
    )


def _detectable_line(record: PairRecord) -> str:
    """The smallest change of the time value the pair run could call, per cell and arm (80% power)."""
    times = [v for v in record.values if v.metric == "time" and not v.failed]
    found = [(v, detectable(v)) for v in times]
    items = [f"{v.arm} {v.cell} ×{ratio(d)}" for v, d in found if math.isfinite(d)]
    if not items:
        what = "its time values have no standard error recorded" if times else "no time value ran on both sides"
        return f"<p class='detectable'>Smallest change of the time for the same work this run could call: not computable ({what}).</p>"
    missing = len(found) - len(items)
    rest = f"; {missing} more without a standard error recorded" if missing else ""
    return (
        "<p class='detectable'>Smallest change of the time for the same work this run could call (80% power, "
        f"two-sided 99%): {html.escape('; '.join(items))}{rest}. A change within ×{RELEASE_FACTOR:g} is not called "
        "whatever its interval.</p>"
    )


def pairs_section(records: list[PairRecord], branch: str) -> list[str]:
    """Each pair run of the branch: heading, failed sides, every value with the paired verdict, the detectable change."""
    out = [
        f"<h3 id='release-pairs'>Release pairs: both releases in one paired run</h3><p class='rule'>{pair_rule()} "
        "Each value is the later release over the earlier one for the same work (above 1: the later is worse).</p>"
    ]
    if not records:
        return [*out, f"<p class='no-pairs'>No release pair of {html.escape(branch)} releases on this machine yet.</p>"]
    order = {m: i for i, m in enumerate((*PAIR_METRICS, "engine_failed"))}
    for record in records:
        values = sorted(record.values, key=lambda v: (order.get(v.metric, len(order)), v.workload, v.clients, v.arm))
        count, said = flag_summary(record)
        flagged = "".join(f"<li>{html.escape(f.name)}</li>" for f in pair_flags(record))
        failed = "".join(
            f"<li class='failed-release'><b>{html.escape(record.previous if side == 'previous' else record.current)}"
            f"</b>'s engine failed in the pair: {html.escape(reason)}</li>"
            for side, reason in sorted(record.failed.items())
        )
        out += [
            f"<div class='pair' data-pair='{html.escape(record.pair)}'><h4>{html.escape(_pair_heading(record))}</h4>",
            f"<p class='pair-setup'>Setup: {html.escape(record.setup or 'not recorded')}; run folder "
            f"{html.escape(record.run_dir or 'not recorded')}.</p>",
            f"<ul class='failed-releases'>{failed}</ul>" if failed else "",
            f"<p class='called'>Called changed ({count}): {html.escape(said)}.</p>",
            f"<details class='flagged'><summary>The {len(pair_flags(record))} values flagged, as asv compare and the "
            f"regressions page name them</summary><ul>{flagged}</ul></details>",
            "<table class='pair-values'><tr><th>value</th><th>workload</th><th>clients</th><th>arm</th>"
            "<th>ratio [99% CI]</th><th>verdict</th><th>evidence</th></tr>"
            + "".join(_pair_row(record, v) for v in values)
            + "</table>",
            _detectable_line(record) + "</div>",
        ]
    return out


def commands_block(machine: str, branch: str, releases: list[str], records: list[PairRecord]) -> str:
    """The commands that measure and compare this series' latest two releases (CPU: an ASV range; CUDA: an existing
    environment, one ledger commit per run)."""
    order = [r.tag for r in LEDGER.get(branch, ())]
    if records:
        a, b = records[0].previous, records[0].current
    else:
        b = max(releases, key=lambda t: order.index(t) if t in order else -1) if releases else order[-1]
        a = order[order.index(b) - 1] if b in order and order.index(b) > 0 else b
    release = tag_release(b)
    if release is not None and release.cpu_build:
        run = f"asv run --machine {machine} --bench ReleasePair {a}..{b}"
    else:
        run = (
            f"asv run --environment existing:/path/to/python --set-commit-hash $(git -C .asv/ledger rev-parse {b}) "
            f"--machine {machine} --bench ReleasePair"
        )
    lines = [
        run,
        f"asv compare --factor {RELEASE_FACTOR:g} {a} {b} --machine {machine}",
        f"specharness release-compare {a} {b} --machine {machine}",
    ]
    why = (
        "ASV runs the pair at the later release: a range of ledger commits"
        if release is not None and release.cpu_build
        else "an existing environment runs one release per call, named by its ledger commit; ASV takes no range there"
    )
    return (
        f"<p class='commands'>Measure and compare {html.escape(a)} and {html.escape(b)} ({html.escape(why)}):</p>"
        f"<pre class='commands'>{html.escape(chr(10).join(lines))}</pre>"
    )
