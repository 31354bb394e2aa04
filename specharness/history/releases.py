"""Release review over ASV results: every tracked metric for vLLM release A vs release B on one machine.

``asv compare`` compares two *commits*; a release review compares two *environments* at the same harness commit.
This reads the same result files and prints metric, parameters, both values, the ratio, and whether the change is
significant: for the slowdown, when the two releases' 95% CIs (tracked as ``track_slowdown_ci_low/high``) do not
overlap; for other metrics, which carry no CI in ASV results, a change beyond ``factor`` is flagged as such.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from specharness._errors import ConfigError
from specharness.history.site import _latest, release_frame

__all__ = ["ReleaseChange", "compare_releases", "format_release_changes"]


@dataclass(frozen=True, slots=True)
class ReleaseChange:
    benchmark: str
    params: str
    value_a: float
    value_b: float
    ratio: float
    significant: str  # "yes", "no", "beyond factor", "within factor"


def compare_releases(results_dir: Path, release_a: str, release_b: str, machine: str | None = None,
                     factor: float = 1.1) -> list[ReleaseChange]:  # fmt: skip
    frame = _latest(release_frame(results_dir))
    if machine:
        frame = frame[frame["machine"] == machine]
    known = sorted(frame["release"].unique()) if not frame.empty else []
    for rel in (release_a, release_b):
        if rel not in known:
            raise ConfigError(f"release {rel!r} has no results in {results_dir}; releases there: {', '.join(known) or 'none'}")
    machines = frame["machine"].unique()
    if len(machines) > 1:
        raise ConfigError(f"results from several machines ({', '.join(machines)}); pass --machine NAME")
    a = frame[frame["release"] == release_a].set_index(["benchmark", "params"])["value"]
    b = frame[frame["release"] == release_b].set_index(["benchmark", "params"])["value"]
    both = pd.concat([a.rename("a"), b.rename("b")], axis=1, join="inner")
    changes: list[ReleaseChange] = []
    for (bench, params), row in both.iterrows():
        if str(bench).endswith(("_ci_low", "_ci_high")):
            continue
        ratio = row["b"] / row["a"] if row["a"] else math.nan
        sig = "beyond factor" if math.isfinite(ratio) and (ratio > factor or ratio < 1 / factor) else "within factor"
        if str(bench).endswith("track_slowdown"):
            stem = str(bench)
            try:
                lo_a, hi_a = both.loc[(stem + "_ci_low", params)], both.loc[(stem + "_ci_high", params)]
                overlap = not (hi_a["a"] < lo_a["b"] or hi_a["b"] < lo_a["a"])
                sig = "no" if overlap else "yes"
            except KeyError:
                pass
        changes.append(ReleaseChange(str(bench), str(params), float(row["a"]), float(row["b"]), ratio, sig))
    return changes


def format_release_changes(changes: list[ReleaseChange], release_a: str, release_b: str) -> str:
    head = f"{'benchmark':<52} {'params':<16} {'vLLM ' + release_a:>12} {'vLLM ' + release_b:>12} {'ratio':>7}  significant"
    rows = [head, "-" * len(head)]
    for c in changes:
        name = c.benchmark.split(".", 1)[-1]
        rows.append(f"{name:<52} {c.params:<16} {c.value_a:>12.4g} {c.value_b:>12.4g} {c.ratio:>7.3f}  {c.significant}")
    return "\n".join(rows)
