"""The regressions page as a review view: a step of a separate-run value stays on a published site's
``regressions.json`` only when release-compare flags that value regressed between the step's two releases.

ASV's step detection compares a value against its threshold alone; release-compare tests it against the measured
run-to-run spread (or cannot test it), so without this the page lists steps no other view calls a change. Release
pair values are kept by :func:`~specharness.history.asv.pairs.filter_regressions`.
"""

from __future__ import annotations

import json
from pathlib import Path

from specharness.history.asv.ledger import ledger_tags
from specharness.history.asv.pairfile import is_pair_benchmark
from specharness.history.review.compare_view import asv_label
from specharness.history.review.releases import ReleaseChange, compare_releases

__all__ = ["filter_separate_regressions", "regressed_labels"]


def regressed_labels(changes: list[ReleaseChange]) -> set[str]:
    """The values release-compare flags as worse in B: regressed, a rise it discovers, or a release that now fails."""
    return {
        f"{c.benchmark}({c.params})"
        for c in changes
        if c.changed and (c.verdict in ("regressed", "failed") or c.verdict.startswith("exploratory: rise"))
    }


def filter_separate_regressions(site: Path, results_dir: Path, machine: str, ledger_dir: Path) -> int:
    """Drop from ``site``'s regressions page each separate-run step release-compare does not flag regressed (an
    entry with no step left goes). Returns how many steps were dropped."""
    path, index = site / "regressions.json", site / "index.json"
    if not (path.is_file() and index.is_file()):
        return 0
    data = json.loads(path.read_text())
    tag_of = ledger_tags(ledger_dir)
    revisions = json.loads(index.read_text())["revision_to_hash"]
    order = sorted(revisions, key=int)
    flagged: dict[tuple[str, str], set[str]] = {}
    kept, dropped = [], 0
    for entry in data.get("regressions", []):
        name, steps = str(entry[0]), entry[6]
        if is_pair_benchmark(name):
            kept.append(entry)
            continue
        keep_steps = []
        for step in steps:
            after = str(step[1])
            before = str(step[0]) if step[0] is not None else order[max(order.index(after) - 1, 0)]
            a, b = tag_of.get(revisions[before], ""), tag_of.get(revisions[after], "")
            if (a, b) not in flagged:
                flagged[(a, b)] = regressed_labels(compare_releases(results_dir, a, b, machine, ledger_dir=ledger_dir))
            if asv_label(name) in flagged[(a, b)]:
                keep_steps.append(step)
        dropped += len(steps) - len(keep_steps)
        if keep_steps:
            kept.append([*entry[:6], keep_steps, *entry[7:]])
    data["regressions"] = kept
    path.write_text(json.dumps(data))
    return dropped
