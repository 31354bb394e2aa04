"""Open-loop load without an engine: load levels and cell keys, sweep rates, SLO rules, the crossover and capacity
read off a sweep, and the identical schedule both arms of a block receive.

The sweep levels here are hand-built :class:`SweepLevel` records (a stand-in for an analysed run): the rules are
pure functions of the verdicts and fractions, so each case states its inputs and the answer the rule must give.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from specharness._errors import ConfigError
from specharness.analysis.slo import meets_slo, within_slo
from specharness.analysis.stats import RatioInterval
from specharness.analysis.sweep import LevelArm, SweepLevel, capacity, crossover
from specharness.experiment.design import get_profile, override, plan_cells
from specharness.experiment.peak import sweep_rates
from specharness.records import RequestRecord, cell_key, load_label, rate_text
from specharness.traffic.arrivals import ArrivalSpec, block_seed, schedule


def test_load_labels_and_cell_keys_keep_closed_loop_keys_unchanged() -> None:
    assert load_label(4) == "c4" and load_label(0, "2") == "r2" and load_label(0, "inf") == "rinf"
    assert cell_key(0, "copy", "c4", "ngram") == "b0/copy/c4/ngram"  # schema 1-2 keys read the same
    assert rate_text(0.5) == "0.5" and rate_text(2.0) == "2" and rate_text(math.inf) == "inf"
    assert float(rate_text(1 / 3)) == pytest.approx(1 / 3, rel=1e-5)


def test_rates_alone_plan_open_loop_cells_only() -> None:
    profile = override(get_profile("quick"), clients=(), rates=("0.5", "inf"), workloads=("copy",))
    plans = plan_cells(profile)
    assert {p.load.label for p in plans} == {"r0.5", "rinf"}
    assert all(p.load.open_loop and p.clients == 0 for p in plans)
    assert plans[0].key("ngram") == "b0/copy/r0.5/ngram"
    assert profile.measured_requests() == 4 * 2 * 4 * 2  # blocks x loads x requests x arms
    mixed = override(get_profile("quick"), rates=("2",), workloads=("copy",))
    assert [x.label for x in mixed.loads("copy")] == ["c1", "c4", "r2"]


@pytest.mark.parametrize(
    ("changes", "flag"),
    [
        ({"clients": (), "rates": ()}, "--clients/--rates"),
        ({"rates": ("0",)}, "--rates"),
        ({"burstiness": 0.0}, "--burstiness"),
        ({"max_concurrency": 0}, "--max-concurrency"),
        ({"slo": {"ttft": 5.0}}, "--slo"),
        ({"slo": {"ttft_ms": -1.0}}, "--slo"),
        ({"slo_fraction": 1.5}, "--slo-fraction"),
        ({"sweep_levels": (0.0,)}, "--levels"),
    ],
)
def test_bad_load_settings_name_their_flag(changes: dict, flag: str) -> None:
    with pytest.raises(ConfigError, match=flag.replace("-", r"\-")):
        override(get_profile("quick"), **changes)


def test_sweep_rates_scale_the_reference_peak_and_end_all_at_once() -> None:
    assert sweep_rates((0.25, 0.5, 1.0, 1.5), 3.0) == ("0.75", "1.5", "3", "4.5", "inf")
    assert sweep_rates((0.5, 0.51), 2.0) == ("1", "inf")  # rounding to the same rate keeps one level
    with pytest.raises(ConfigError, match="peak probe"):
        sweep_rates((1.0,), 0.0)


def test_both_arms_of_a_block_get_the_identical_schedule_and_blocks_differ() -> None:
    def offsets(block: int) -> tuple[float, ...]:
        return schedule(ArrivalSpec(2.0, seed=block_seed(0, block, "copy", 2.0)), 8)

    assert offsets(0) == offsets(0)  # the driver draws a block's schedule from (seed, block, workload, rate) only
    assert offsets(0) != offsets(1)
    assert block_seed(0, 0, "copy", 2.0) != block_seed(0, 0, "transform", 2.0)


def _request(**kw: object) -> RequestRecord:
    base = {
        "arm": "ngram",
        "block": 0,
        "workload": "copy",
        "group": "g",
        "case_id": "c",
        "clients": 0,
        "warmup": False,
        "cell": "b0/copy/r2/ngram#s0",
        "seq": 0,
        "started_unix_s": 0.0,
        "send_s": 0.0,
        "ttft_s": 0.2,
        "e2e_s": 1.0,
        "completion_tokens": 33,
        "verdict": "complete",
        "correct": True,
        "check_detail": "ok",
        "saw_done": True,
        "finish_reason": "stop",
        "rate": "2",
        "scheduled_s": 0.0,
        "send_lateness_s": 0.0,
    }
    return RequestRecord(**{**base, **kw})  # type: ignore[arg-type]


def test_slo_counts_latency_from_the_scheduled_send_and_goodput_needs_a_right_answer() -> None:
    slo = {"ttft_ms": 500.0, "tpot_ms": 30.0}
    ok = _request()  # TTFT 200 ms, TPOT (1.0 - 0.2) / 32 = 25 ms
    assert within_slo(ok, slo) and meets_slo(ok, slo)
    late = _request(send_lateness_s=0.4)  # sent 400 ms late: the user waited 600 ms for the first token
    assert not within_slo(late, slo)
    assert not within_slo(_request(e2e_s=1.2), slo)  # TPOT 31 ms
    wrong = _request(correct=False)
    assert within_slo(wrong, slo) and not meets_slo(wrong, slo)
    cut = _request(verdict="truncated", finish_reason="length")
    assert within_slo(cut, slo) and not meets_slo(cut, slo)  # timely, but a truncated answer is never right
    failed = _request(error_kind="http", verdict="failed")
    assert not within_slo(failed, {})


def _level(load: str, offered: float, verdict: str, goodput: tuple[float, float] = (1.0, 1.0)) -> SweepLevel:
    def arm(name: str, fraction: float) -> LevelArm:
        return LevelArm(name, 8, 30, 40, 100, offered, offered, 100, offered, fraction, fraction, 1.0, True, 0.02)

    return SweepLevel(
        "copy",
        load,
        offered,
        True,
        RatioInterval(1.5, 1.2, 1.9, 0.95, 4, 3, "stand-in"),
        verdict,
        "holds",
        3.0,
        0.5,
        {"baseline": arm("baseline", goodput[0]), "ngram": arm("ngram", goodput[1])},
    )


def test_crossover_brackets_where_ngram_stops_helping_and_starts_hurting() -> None:
    levels = [
        _level("r1", 1, "helps"),
        _level("r2", 2, "helps"),
        _level("r4", 4, "inconclusive"),
        _level("r8", 8, "hurts"),
        _level("rinf", math.inf, "hurts"),
    ]
    stops, hurts, helps_up_to, dips, skipped = crossover(levels)
    assert stops is not None and (stops.below, stops.at) == ("r2", "r4") and dips == []
    assert hurts is not None and (hurts.below, hurts.at) == ("r4", "r8")
    assert helps_up_to == 2 and skipped == []


def test_no_crossover_in_range_and_no_help_at_the_lightest_load() -> None:
    stops, hurts, helps_up_to, _, _ = crossover([_level("r1", 1, "helps"), _level("rinf", math.inf, "helps")])
    assert stops is None and hurts is None and helps_up_to == math.inf
    stops, hurts, helps_up_to, _, _ = crossover([_level("r1", 1, "hurts"), _level("r2", 2, "inconclusive")])
    assert stops is not None and stops.below is None and stops.at == "r1" and math.isnan(helps_up_to)
    assert hurts is not None and hurts.at == "r1"


def test_a_dip_below_a_helping_level_is_listed_not_taken_for_the_crossover() -> None:
    levels = [
        _level("r4", 4, "helps"),
        _level("r8", 8, "inconclusive"),
        _level("r16", 16, "helps"),
        _level("rinf", math.inf, "inconclusive"),
    ]
    stops, hurts, helps_up_to, dips, _ = crossover(levels)
    assert stops is not None and (stops.below, stops.at) == ("r16", "rinf") and helps_up_to == 16
    assert dips == ["r8"] and hurts is None


def test_unjudged_levels_are_skipped_not_read_as_a_crossover() -> None:
    levels = [_level("r1", 1, "helps"), _level("r2", 2, "not comparable"), _level("r4", 4, "helps")]
    stops, _, helps_up_to, _, skipped = crossover(levels)
    assert stops is None and helps_up_to == 4 and skipped == ["r2"]


def test_capacity_needs_every_lighter_level_to_hold() -> None:
    levels = [
        _level("r1", 1, "helps", (0.95, 0.95)),
        _level("r2", 2, "helps", (0.80, 0.95)),
        _level("r4", 4, "helps", (0.95, 0.70)),
        _level("rinf", math.inf, "helps", (0.95, 0.95)),
    ]
    c = capacity(levels, ("baseline", "ngram"), 0.9, "goodput")
    assert c.max_load == {"baseline": 1, "ngram": 2}  # baseline's lucky r4 and rinf do not count
    assert c.ratio == 2.0
    none = capacity([_level("r1", 1, "helps", (0.5, 0.95))], ("baseline", "ngram"), 0.9, "goodput")
    assert none.max_load["baseline"] is None and none.censored and none.ratio == 2.0  # at least 1 / (1 / 2)
    neither = capacity([_level("r1", 1, "helps", (0.5, 0.5))], ("baseline", "ngram"), 0.9, "goodput")
    assert math.isnan(neither.ratio)
    both = capacity([replace(levels[0]), levels[3]], ("baseline", "ngram"), 0.9, "latency")
    assert both.max_load == {"baseline": math.inf, "ngram": math.inf} and both.ratio == 1.0


def test_capacity_ratio_is_a_bound_when_one_arm_held_every_level() -> None:
    levels = [
        _level("r2", 2, "helps", (0.95, 0.95)),
        _level("r8", 8, "helps", (0.5, 0.95)),
        _level("rinf", math.inf, "helps", (0.5, 0.95)),
    ]
    c = capacity(levels, ("baseline", "ngram"), 0.9, "latency")
    assert c.max_load == {"baseline": 2, "ngram": math.inf}
    assert c.censored and c.ratio == 4.0  # at least 8 / 2: ngram's capacity lies beyond the heaviest finite rate


def test_load_metrics_stay_finite_when_ngram_helps_nowhere() -> None:
    from specharness.history.asv.metrics import load_metrics

    report = {
        "sweeps": [
            {
                "workload": "copy",
                "helps_up_to": None,
                "helps_everywhere": False,
                "levels": [{"offered": 4.0}, {"offered": None}],
                "goodput_capacity": {"ratio": None},
                "latency_capacity": {"ratio": 0.5},
                "peak_rps": {"baseline": 10.0, "ngram": 5.0},
            }
        ]
    }
    m = load_metrics(report)
    assert m["copy/load/crossover_gap_s"] == 0.5  # twice the lightest level's gap (1/4 s)
    assert m["copy/load/capacity_loss_latency"] == 2.0 and m["copy/load/peak_rate_loss"] == 2.0
    assert math.isnan(m["copy/load/capacity_loss"])
