"""The greedy speed estimate over common prefixes (analysis.comparison), on stand-in records built here (no engine):
divergent pairs count for the work they share, failures remove only their own pair, timeouts count at the timeout,
loops and the covered share are shown, offsets widen the interval, and a second interval resamples cases."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from specharness.analysis.comparison import ComparisonRules, PairedComparison, compare_arms
from specharness.analysis.summary import summarise_arm
from specharness.records import RequestRecord
from specharness.traffic.client import _StreamState

RULES = ComparisonRules(margin=0.10, min_correct=0.5, timeout_s=60.0)


def chain(ids: list[int]) -> str:
    state = _StreamState()
    state._extend_chain(ids)
    return state.prefix_chain


def req(
    arm: str,
    block: int,
    case: int,
    ids: list[int],
    per_token_s: float,
    *,
    finish: str = "stop",
    error: str | None = None,
    chained: bool = True,
) -> RequestRecord:
    """One request writing ``ids`` one token per chunk, ``per_token_s`` apart (ttft one token's time)."""
    n = len(ids)
    arrivals = [per_token_s * (i + 1) for i in range(n)]
    timed_out = error == "timeout"
    ok = error is None
    verdict = ("complete" if finish == "stop" else "truncated") if ok else "failed"
    return RequestRecord(
        arm=arm,
        block=block,
        workload="w",
        group="g",
        case_id=f"c{case}",
        clients=1,
        warmup=False,
        cell=f"b{block}/w/c1/{arm}#s0",
        seq=case,
        started_unix_s=0.0,
        send_s=0.0,
        chunk_arrival_s=arrivals if ok or timed_out else [],
        chunk_tokens=[1] * n if ok or timed_out else [],
        ttft_s=arrivals[0] if n else math.nan,
        e2e_s=arrivals[-1] + 0.001 if ok and n else math.nan,
        completion_tokens=n if ok else None,
        finish_reason=finish if ok else None,
        text=" ".join(map(str, ids)),
        error_kind=error,
        verdict=verdict,
        saw_done=ok,
        correct=ok,
        check_detail="ok",
        output_digest=str(hash(tuple(ids))),
        prefix_chain=chain(ids) if chained else "",
    )


def compare(a: list[RequestRecord], b: list[RequestRecord], rules: ComparisonRules = RULES) -> PairedComparison:
    sa, sb = summarise_arm("baseline", "w", 1, a, []), summarise_arm("ngram", "w", 1, b, [])
    order = {k: (k % 4) in (0, 3) for k in {r.block for r in a}}
    return compare_arms(sa, sb, a, b, order, rules)


def outputs(case: int, n: int = 100) -> list[int]:
    return [100_000 + case * 1000 + i for i in range(n)]


def arms(
    cases: int = 8, blocks: int = 4, speed: float = 2.0, diverge_at: int | None = None, seed: int = 0, **kw: bool
) -> tuple[list[RequestRecord], list[RequestRecord]]:
    """Baseline at 10 ms a token, ngram ``speed`` times faster (noise 3% per request); with ``diverge_at`` the ngram
    output parts from the baseline's there (different tokens after it)."""
    rng = np.random.default_rng(seed)
    a, b = [], []
    for blk in range(blocks):
        for c in range(cases):
            ids = outputs(c)
            other = ids if diverge_at is None else ids[:diverge_at] + [900_000 + i for i in range(100 - diverge_at)]
            a.append(req("baseline", blk, c, ids, 0.01 * rng.lognormal(0, 0.03), **kw))
            b.append(req("ngram", blk, c, other, 0.01 / speed * rng.lognormal(0, 0.03), **kw))
    return a, b


def test_divergent_pairs_count_for_their_common_prefix() -> None:
    a, b = arms(diverge_at=60)
    c = compare(a, b)
    assert c.work is not None and c.work.identical_share == 0.0
    assert c.pair_counts.in_estimate == 32 and c.work.covered_token_share == pytest.approx(0.6)
    assert c.speedup.estimate == pytest.approx(2.0, rel=0.05) and c.speed.verdict == "helps"
    assert "prefix chains" in c.work.basis


def test_a_prefix_under_the_minimum_is_counted_and_the_covered_share_gates_the_verdict() -> None:
    a, b = arms(diverge_at=5)
    c = compare(a, b)
    assert c.pair_counts.short_prefix == 32 and c.pair_counts.in_estimate == 32  # whole answers: paced after token 5
    assert c.speedup.estimate == pytest.approx(2.0, rel=0.05)
    assert c.speed.verdict == "not comparable" and "output tokens" in c.speed.reason
    prefix = compare(a, b, replace(RULES, estimate="prefix"))
    assert prefix.pair_counts.short_prefix == 32 and prefix.pair_counts.in_estimate == 0


def test_old_journals_use_the_common_text_prefix_and_say_so() -> None:
    a, b = arms(diverge_at=60, chained=False)
    c = compare(a, b)
    assert c.work is not None and "texts" in c.work.basis
    assert 0.5 < c.work.covered_token_share <= 0.62 and c.speedup.estimate == pytest.approx(2.0, rel=0.06)


def test_identical_pairs_are_the_whole_output() -> None:
    a, b = arms()
    c = compare(a, b)
    assert c.work is not None and c.work.identical_share == 1.0 and c.work.covered_token_share == pytest.approx(1.0)
    assert c.work.identical.estimate == pytest.approx(c.speedup.estimate)


def test_a_failure_removes_only_its_own_pair_and_its_time_is_shown() -> None:
    a, b = arms()
    b[9] = req("ngram", 1, 1, outputs(1), 0.005, error="http_error")
    c = compare(a, b)
    assert c.pair_counts.in_estimate == 31 and c.work is not None
    assert c.work.excluded_time_share == pytest.approx(1 / 32, rel=0.1) and c.speed.verdict == "helps"
    many = [req("ngram", r.block, r.seq, outputs(r.seq), 0.005, error="http_error") if r.seq < 2 else r for r in b]
    d = compare(a, many)
    assert d.speed.verdict == "inconclusive" and "failed pairs hold 25%" in d.speed.reason


def test_a_timeout_counts_at_the_timeout_and_never_turns_a_loss_into_a_win() -> None:
    """Issue 20: 8 cases x 4 blocks, ngram 1.25x faster on 7 short cases and 3x slower on one long case. Dropping
    the case from every block on one ngram timeout read *helps*; counted at the timeout it stays a loss."""
    rng = np.random.default_rng(3)
    a, b = [], []
    for blk in range(4):
        for c in range(8):
            n, slow = (2000, 3.0) if c == 0 else (50, 0.8)
            a.append(req("baseline", blk, c, outputs(c, n), 0.01 * rng.lognormal(0, 0.02)))
            b.append(req("ngram", blk, c, outputs(c, n), 0.01 * slow * rng.lognormal(0, 0.02)))
    before = compare(a, b)
    b[16] = req("ngram", 2, 0, outputs(0, 1500), 0.03, error="timeout")  # 45 s in when the 60 s timeout hits
    after = compare(a, b)
    assert before.speed.verdict == after.speed.verdict == "hurts"
    assert after.pair_counts.censored == 1 and after.speedup.estimate < 0.6
    assert after.work is not None and after.work.censored_time_share > 0


def test_loops_to_the_cap_are_shown_with_the_estimate_without_them() -> None:
    a, b = arms(speed=1.0)
    loops = {2, 5}  # identical loops to the cap, ngram 3x faster on them
    a = [replace(r, finish_reason="length", verdict="truncated") if r.seq in loops else r for r in a]
    b = [
        replace(
            r,
            finish_reason="length",
            verdict="truncated",
            chunk_arrival_s=[t / 3 for t in r.chunk_arrival_s],
            e2e_s=r.e2e_s / 3,
        )
        if r.seq in loops
        else r
        for r in b
    ]
    c = compare(a, b)
    assert c.work is not None and c.work.capped_time_share == pytest.approx(0.25, abs=0.03)
    assert c.speedup.estimate == pytest.approx(1.2, abs=0.03) and c.work.without_capped.estimate == pytest.approx(
        1.0, abs=0.03
    )


def test_pairs_cut_at_the_cap_never_carry_a_helps() -> None:
    """Issue 35: 3 of 8 cases loop identically to the cap, ngram 4x faster there, the rest at a true 1.00. With the
    loops the interval lies above the band (*helps*); the verdict is the one without them, and it says why. A real
    gain outside the loops keeps its *helps*."""

    def looping(speed: float) -> PairedComparison:
        a, b = arms(speed=speed)
        loops = {2, 5, 7}
        a = [replace(r, finish_reason="length", verdict="truncated") if r.seq in loops else r for r in a]
        b = [
            replace(
                r,
                finish_reason="length",
                verdict="truncated",
                chunk_arrival_s=[t * speed / 4 for t in r.chunk_arrival_s],
                e2e_s=r.e2e_s * speed / 4,
            )
            if r.seq in loops
            else r
            for r in b
        ]
        return compare(a, b)

    carried = looping(1.0)
    assert carried.speedup.low > 1.1 and carried.work is not None and carried.work.capped_time_share > 0.3
    assert carried.speed.verdict == "equivalent", carried.speed
    assert "without the pairs cut at the cap" in carried.speed.reason and "would read helps" in carried.speed.reason
    real = looping(2.0)
    assert real.speed.verdict == "helps" and "cut at the cap" not in real.speed.reason


def test_the_offset_variance_widens_the_interval() -> None:
    a, b = arms(speed=1.0)
    plain, offset = compare(a, b), compare(a, b, replace(RULES, offset_var=0.05**2, offset_source="A/A"))
    assert offset.speedup.width > plain.speedup.width * 1.1
    assert offset.work is not None and offset.work.offset_sd == pytest.approx(0.05)
    assert plain.speed.verdict == "equivalent" and offset.speed.verdict == "inconclusive"


def test_from_16_cases_the_interval_resamples_cases_and_decides() -> None:
    """Issue 35: from 16 cases the verdict is about traffic like these prompts (cases resampled as well as blocks);
    the interval over blocks alone, about these prompts, is kept beside it. Under 16 it is the only one."""
    few, many = compare(*arms(cases=15, seed=4)), compare(*arms(cases=16, seed=4))
    assert few.work is not None and few.work.over_cases.blocks == 0 and few.work.these_prompts.blocks == 0
    assert many.work is not None and many.work.cases == 16
    assert many.speedup == many.work.over_cases and "cases resampled" in many.speedup.method
    fixed = many.work.these_prompts
    assert many.speedup.low <= fixed.low and many.speedup.high >= fixed.high and fixed.width < many.speedup.width


def test_a_population_interval_covers_the_population_where_the_fixed_prompts_one_does_not() -> None:
    """Issue 35: 16 cases drawn from a population whose per-case speedup has log sd 0.3 (true population ratio
    1.3 e^(-0.045)), 4 mirrored blocks, 200 simulated runs: the interval over blocks alone covers the population ratio
    in 70% of runs, the case-resampled one (the verdict's) in 98.5%."""
    from specharness.analysis.comparison import speed_from_pairs
    from specharness.analysis.simulation.model import mirrored_a_first
    from specharness.analysis.simulation.traffic_records import run_records
    from specharness.analysis.simulation.traffic_scenarios import TrafficScenario

    sc = TrafficScenario(
        "population", cases=16, true_speedup=1.3, case_speed_sd=0.3, jitter_sd=0.05, recorded_offset_sd_upper=0.0
    )
    population = 1.3 * math.exp(-(0.3**2) / 2)
    rng, a_first = np.random.default_rng(1), mirrored_a_first(4)
    order = {b: bool(a_first[b]) for b in range(4)}
    fixed = resampled = 0
    for _ in range(200):
        pairs, *_ = run_records(sc, rng, a_first)
        ci, _, work = speed_from_pairs(pairs, order, RULES)
        resampled += ci.low <= population <= ci.high
        fixed += work.these_prompts.low <= population <= work.these_prompts.high
    assert fixed / 200 < 0.85 and resampled / 200 >= 0.95, (fixed, resampled)


def test_report_shows_what_the_speed_estimate_stands_on(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A SYNTHETIC run folder (made-up records): report.json carries the work behind each speedup and report.md
    names the covered share, the identical-only estimate, the estimand and the offset from the A/A record."""
    from specharness.experiment.synthetic import write_synthetic_run
    from specharness.reporting.report import write_report

    run = write_synthetic_run(tmp_path / "run", records=160)
    report = write_report(run, plots=False)
    work = report["comparisons"][0]["work"]
    assert work["covered_token_share"] == pytest.approx(1.0) and work["identical_share"] == pytest.approx(1.0)
    assert work["identical"]["estimate"] == pytest.approx(report["comparisons"][0]["speedup"]["estimate"])
    md = (run / "report.md").read_text()
    assert "Common prefixes cover 100% of the baseline's output tokens" in md
    assert "The interval is about these" in md and "engine-instance offset of sd" in md


def test_the_declared_minimum_prefix_decides_which_pairs_count_apart() -> None:
    a, b = arms(diverge_at=20)
    assert compare(a, b, replace(RULES, min_prefix_tokens=8)).pair_counts.short_prefix == 0
    strict = compare(a, b, replace(RULES, min_prefix_tokens=30))
    assert strict.pair_counts.short_prefix == 32 and strict.work is not None and strict.work.min_prefix_tokens == 30
    assert not math.isfinite(strict.work.prefix.estimate) and math.isfinite(strict.speedup.estimate)


def test_a_report_rebuilt_from_the_run_folder_uses_the_declared_rules(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A SYNTHETIC run folder whose manifest declares --min-prefix-tokens 40 and --max-excluded-time 0.25: the
    rebuilt analysis uses them and report.md states them where the rule is given."""
    import json

    from specharness.experiment.synthetic import write_synthetic_run
    from specharness.reporting.report import write_report

    run = write_synthetic_run(tmp_path / "run", records=160)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["config"]["profile"].update(min_prefix_tokens=40, max_excluded_time=0.25)
    (run / "manifest.json").write_text(json.dumps(manifest))
    report = write_report(run, plots=False)
    assert {c["work"]["min_prefix_tokens"] for c in report["comparisons"]} == {40}
    md = (run / "report.md").read_text()
    assert (
        "common prefix is under 40 tokens is left out of that one only" in md
        and "more than 25% of the baseline's time" in md
    )


def test_each_pair_is_timed_over_the_baseline_whole_answer_when_divergence_follows_gain() -> None:
    """Issue 35: half the cases gain 4x and part late (token 90), half gain nothing and part early (token 10). The
    common prefixes weigh the fast cases nine times as much (3.08); timing each pair over the baseline's whole answer
    (B's own pace after the prefix) gives the true 2 s / 1.25 s = 1.6."""
    a, b = [], []
    for blk in range(4):
        for c in range(8):
            fast = c % 2 == 0
            cut = 90 if fast else 10
            ids = outputs(c)
            other = ids[:cut] + [900_000 + i for i in range(100 - cut)]
            a.append(req("baseline", blk, c, ids, 0.01))
            b.append(req("ngram", blk, c, other, 0.0025 if fast else 0.01))
    whole, prefix = compare(a, b), compare(a, b, replace(RULES, estimate="prefix"))
    assert whole.work is not None and whole.work.whole and "whole answer" in whole.work.basis
    assert whole.speedup.estimate == pytest.approx(1.6, rel=0.01)
    assert prefix.speedup.estimate == pytest.approx(3.08, rel=0.01)
    assert whole.work.prefix.estimate == pytest.approx(prefix.speedup.estimate)
    assert whole.work.covered_token_share == pytest.approx(0.5)


def test_the_pace_after_the_prefix_reads_the_continuation_or_the_whole_output() -> None:
    from specharness.analysis.comparison.work import _whole_b_s

    long_tail = req("ngram", 0, 0, list(range(100)), 0.01)
    assert _whole_b_s(long_tail, 40, 100) == pytest.approx(0.40 + 60 * (1.001 - 0.40) / 60)
    assert _whole_b_s(long_tail, 40, 150) == pytest.approx(0.40 + 110 * (1.001 - 0.40) / 60)
    assert _whole_b_s(long_tail, 40, 30) == pytest.approx(0.40)  # A's answer ends inside the common prefix's chunk
    short_tail = req("ngram", 0, 0, list(range(42)), 0.01)  # 2 tokens after the prefix: its pace after the first chunk
    assert _whole_b_s(short_tail, 40, 100) == pytest.approx(0.40 + 60 * (0.421 - 0.01) / 41)


def test_a_continuation_cut_at_the_cap_is_a_capped_pair() -> None:
    a, b = arms(diverge_at=50)
    b = [replace(r, finish_reason="length", verdict="truncated") if r.seq == 3 else r for r in b]
    c = compare(a, b)
    assert c.work is not None and c.work.capped_time_share == pytest.approx(1 / 8, rel=0.1)
    assert compare(a, b, replace(RULES, estimate="prefix")).work.capped_time_share == 0  # type: ignore[union-attr]


def test_pairs_that_part_at_the_first_token_count_in_every_share() -> None:
    """Review of issue 35's estimator: 3 of 8 cases part at the first token and ngram loops to the cap 10x faster
    there; the rest are identical at 1.02x the baseline's time. Those pairs hold their time in the capped share,
    so the loops cannot carry a *helps*, and their cases are counted."""
    a, b = [], []
    for blk in range(4):
        for c in range(8):
            ids = outputs(c)
            a.append(req("baseline", blk, c, ids, 0.01))
            if c < 3:
                b.append(req("ngram", blk, c, [900_000 + i for i in range(100)], 0.001, finish="length"))
            else:
                b.append(req("ngram", blk, c, ids, 0.01 / 1.02))
    c = compare(a, b, replace(RULES, min_same_work=0.0))
    assert c.work is not None and c.work.cases == 8
    assert c.work.capped_time_share == pytest.approx(3 / 8, rel=0.05)
    assert c.speed.verdict != "helps" and "cut at the cap" in c.speed.reason


def test_the_pace_is_read_after_the_chunk_that_holds_the_last_common_token() -> None:
    """ngram's chunks hold 4 tokens: B's time runs to the chunk holding common token 42 (tokens 41-44), then its
    own pace after that chunk; A's remaining tokens count from B's position."""
    from specharness.analysis.comparison.work import _whole_b_s

    n = 100
    r = req("ngram", 0, 0, list(range(n)), 0.01)
    chunked = replace(
        r,
        chunk_tokens=[4] * (n // 4),
        chunk_arrival_s=[0.04 * (i + 1) for i in range(n // 4)],
        e2e_s=0.04 * (n // 4),
    )
    t_44, pace = 0.44, (1.0 - 0.44) / (n - 44)
    assert _whole_b_s(chunked, 42, 120) == pytest.approx(t_44 + (120 - 44) * pace)
    assert _whole_b_s(chunked, 42, 43) == pytest.approx(t_44)  # A's answer ends inside that chunk
    assert math.isnan(_whole_b_s(replace(chunked, chunk_tokens=[0] * (n // 4)), 42, 120))  # no chunk holds it


def test_text_prefixes_of_unequal_length_count_a_remaining_tokens_from_its_own_prefix() -> None:
    """Journals without chains map the common text to tokens in proportion, so A's and B's prefixes differ in
    tokens; B is charged A's tokens after A's prefix, at B's pace."""
    a, b = arms(diverge_at=60, chained=False)
    c = compare(a, b)
    assert c.work is not None and c.speedup.estimate == pytest.approx(2.0, rel=0.06)
