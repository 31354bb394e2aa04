"""Configuration pairs at a release: ASV's ``ConfigurationPair`` values (two configurations of one release in one
paired run, the second over the first, with the paired 99% interval in the value's note), judged by the paired rule.

They are the configuration's effect at that release, not a change between releases: release-compare and the release
pages show them at the later release, and release-compare does not test them as values of separate runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specharness.analysis.verdict import RELEASE_FACTOR, pair_change
from specharness.history.review.values import ReleaseValue
from specharness.reporting.convention import ratio_text

__all__ = [
    "CONFIGURATION_CLASS",
    "ConfigurationValue",
    "configuration_lines",
    "configuration_values",
    "is_configuration",
]

CONFIGURATION_CLASS = "bench_release.ConfigurationPair"


def is_configuration(benchmark: str) -> bool:
    return benchmark.startswith(CONFIGURATION_CLASS + ".")


@dataclass(frozen=True, slots=True)
class ConfigurationValue:
    """One value of the second configuration over the first at one release, in one cell, judged."""

    metric: str
    cell: str  # "copy, 1"
    estimate: float
    low: float
    high: float
    verdict: str  # regressed / improved / unchanged / not tested / failed: <reason>


def configuration_values(
    values: list[ReleaseValue], tag: str, factor: float = RELEASE_FACTOR
) -> list[ConfigurationValue]:
    """The configuration pair's values measured at release ``tag`` (one machine's values), each with its verdict."""
    out = []
    for v in sorted(
        (v for v in values if v.tag == tag and is_configuration(v.benchmark)), key=lambda v: (v.benchmark, v.params)
    ):
        metric = v.benchmark.rsplit(".track_", 1)[-1]
        verdict = f"failed: {v.failed}" if v.failed else pair_change(v.value, v.ci_low, v.ci_high, factor)
        out.append(ConfigurationValue(metric, v.params, v.value, v.ci_low, v.ci_high, verdict))
    return out


def configuration_lines(found: list[ConfigurationValue], tag: str, factor: float = RELEASE_FACTOR) -> list[str]:
    """release-compare's section: each value and its verdict, then what changed (none: no section)."""
    if not found:
        return []
    rows = [
        f"Configuration pair at {tag}: the second configuration over the first in one paired run (above 1: the "
        f"second slower or worse), 99% interval; changed when it excludes 1 and the ratio lies beyond ×{factor:g}."
    ]
    for c in found:
        shown = ratio_text(c.estimate, c.low, c.high) if math.isfinite(c.estimate) else "—"
        rows.append(f"{c.metric:<24} {c.cell:<14} {shown:<28} {c.verdict}")
    changed = [f"{c.metric} {c.cell} {c.verdict}" for c in found if c.verdict in ("regressed", "improved")]
    rows += [f"Changed by the configuration ({len(changed)}): " + ("; ".join(changed) or "none"), ""]
    return rows
