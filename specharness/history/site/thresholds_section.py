"""The release page's account of the regressions page: its thresholds for a branch (ASV takes the largest matching
one) and what it lists, each step named by its releases' ledger tags."""

from __future__ import annotations

import html
import itertools
import json
import re
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from specharness.history.asv.ledger import LEDGER
from specharness.numbers import fmt as _fmt

__all__ = ["entry_names", "step_tag", "thresholds_section"]


def _applies(pattern: str, branch: str) -> bool:
    """Whether a ``regressions_thresholds`` pattern can match on ``branch`` (one naming another branch cannot)."""
    return not any(pattern.endswith(f"@{b}$") for b in LEDGER if b != branch)


def entry_names(known: Mapping[str, Any]) -> list[str]:
    """ASV's regressions entry names (``bench.Class.track_x('copy', 1)``) of every benchmark in ``benchmarks.json``."""
    out = []
    for name, info in known.items():
        params = info.get("params") if isinstance(info, dict) else None
        if isinstance(params, list):
            out += [f"{name}({', '.join(combo)})" if combo else name for combo in itertools.product(*params)]
    return out


def _threshold_for(name: str, branch: str, thresholds: Mapping[str, float]) -> float:
    """ASV's threshold for an entry (``asv.plugins.regressions``): the largest whose pattern matches
    ``<name>@<branch>``, 5% where none does."""
    found = [float(t) for p, t in thresholds.items() if re.match(p, f"{name}@{branch}")]
    return max(found) if found else 0.05


def _regressions_listed(site: Path, branch: str, thresholds: Mapping[str, float]) -> str:
    """What the site's regressions page lists, each step named by its releases' ledger tags."""
    try:
        entries = json.loads((site / "regressions.json").read_text()).get("regressions", [])
        tags = json.loads((site / "index.json").read_text()).get("tags", {})
    except (OSError, json.JSONDecodeError):
        return ""
    tag_of = {int(rev): tag for tag, rev in tags.items()}
    items = []
    for name, *_, jumps in entries:
        for rev_a, rev_b, val_a, val_b in jumps:
            ratio = f"×{val_b / val_a:.3g}" if val_a else "from 0"
            items.append(
                f"<li>{html.escape(name)}: {html.escape(step_tag(rev_a, tag_of))} → "
                f"{html.escape(step_tag(rev_b, tag_of))}"
                f", {_fmt(val_a)} → {_fmt(val_b)} ({ratio}, threshold {_threshold_for(name, branch, thresholds):.0%})"
                "</li>"
            )
    listed = "".join(items) or "<li>nothing</li>"
    return f"<p>What the regressions page lists, by release tag:</p><ul class='regressions-listed'>{listed}</ul>"


def step_tag(revision: int | None, tag_of: Mapping[int, str]) -> str:
    """A regressions page step's end as a release tag: ASV writes no revision (None) for a step from the series' first
    value (a release pair's series starts at its earlier release)."""
    if revision is None:
        return "its first value"
    return tag_of.get(revision, "a revision off the ledger")


def _threshold_rows(thresholds: Mapping[str, float], branch: str, names: list[str]) -> str:
    """One row per pattern that can match on ``branch``: its threshold and how many values it decides (ASV takes the
    largest matching threshold, so an entry under a broader, larger one decides none)."""
    decides: dict[str, int] = defaultdict(int)
    matches: dict[str, int] = defaultdict(int)
    for name in names:
        matching = [(float(t), p) for p, t in thresholds.items() if re.match(p, f"{name}@{branch}")]
        for _, p in matching:
            matches[p] += 1
        if matching:
            decides[max(matching)[1]] += 1
    rows = []
    for p, t in thresholds.items():
        if _applies(p, branch):
            n = decides.get(p, 0)
            used = (
                f"{n} value(s)"
                if n
                else "none: a larger threshold matches the same values"
                if matches.get(p)
                else "none: no benchmark in benchmarks.json matches"
            )
            rows.append(
                f"<tr><td><code>{html.escape(p)}</code></td><td>{float(t):g}</td><td>×{1 + float(t):.4g}</td>"
                f"<td class='decides'>{used}</td></tr>"
            )
    return "".join(rows)


def thresholds_section(thresholds: Mapping[str, float], branch: str, site: Path, names: list[str]) -> list[str]:
    """The regressions page's thresholds for this branch (from the configuration the site was published with)."""
    out = ["<h3 id='thresholds'>The regressions page's thresholds</h3>"]
    rows = _threshold_rows(thresholds, branch, names)
    if rows:
        out.append(
            "<p>ASV flags a step on the regressions page when a value moves beyond the relative threshold of the "
            f"entries below whose pattern matches <code>&lt;benchmark&gt;(&lt;params&gt;)@{html.escape(branch)}</code> "
            "(the largest of them; 5% where none matches). <code>ReleasePair</code> and <code>ReleasePairOverall</code> entries are further kept only "
            "when the paired rule calls them regressed (<code>specharness site</code>).</p>"
            "<table class='thresholds'><tr><th>pattern</th><th>relative threshold</th><th>a step beyond</th>"
            f"<th>decides</th></tr>{rows}</table>"
        )
    else:
        out.append(
            "<p class='thresholds'>No <code>regressions_thresholds</code> in the configuration this site was "
            "published with: ASV flags steps beyond 5%. <code>ReleasePair</code> and <code>ReleasePairOverall</code> entries are further kept only when "
            "the paired rule calls them regressed.</p>"
        )
    return [*out, _regressions_listed(site, branch, thresholds)]
