"""The crossover read off the whole speedup curve (:func:`specharness.analysis.sweep.fit_crossings`), without an
engine: the committed AMD EPYC figures, and simulated sweeps with the block noise the CPU and H200 runs measured.

Noise calibration (4 blocks, t interval with 3 df): a block sd of 0.05 on the log scale gives intervals like the
EPYC sweep's (1.18 [1.09, 1.28]); 0.16 gives the H200's median CI width (high / low 1.68). Levels are hand-built
:class:`SweepLevel` records (a stand-in for an analysed run) with no arms unless a test needs delivery.
"""

from __future__ import annotations

import math

import numpy as np

from specharness.analysis.stats import RatioInterval, block_ratio_interval
from specharness.analysis.sweep import LevelArm, SweepLevel, _crossing_position, crossover, fit_crossings
from specharness.analysis.verdict import speed_verdict

MARGIN = 0.10
LOADS = (3.5, 7.0, 14.0, 21.0, 28.0, math.inf)  # the default ladder's shape on a 2-core CPU


def level(load: float, interval: RatioInterval, delivered: bool | None = None) -> SweepLevel:
    arms = {}
    if delivered is not None:
        arm = LevelArm("baseline", 8, 30, 40, 100, load, load, 100, load, 1.0, 1.0, 1.0, delivered, 0.02)
        arms = {"baseline": arm, "ngram": arm}
    return SweepLevel(
        "transform",
        f"r{load:g}",
        load,
        True,
        interval,
        speed_verdict(interval, MARGIN).verdict,
        "holds",
        2.0,
        0.5,
        arms,
    )


def stated(estimate: float, low: float, high: float) -> RatioInterval:
    return RatioInterval(estimate, low, high, 0.95, 4, 3, "stand-in")


def symmetric(estimate: float, factor: float = 1.06) -> RatioInterval:
    return stated(estimate, estimate / factor, estimate * factor)


def epyc(seven: RatioInterval) -> list[SweepLevel]:
    """The issue's AMD EPYC transform sweep; the 14, 21 and all-at-once intervals were not quoted and get the
    quoted levels' typical half-width (6%)."""
    intervals = [
        stated(1.22, 1.15, 1.29),
        seven,
        symmetric(1.10),
        symmetric(1.08),
        stated(1.09, 1.03, 1.14),
        symmetric(0.92),
    ]
    return [level(x, iv) for x, iv in zip(LOADS, intervals, strict=True)]


def test_epyc_sweep_does_not_jump_when_one_interval_grazes_the_band() -> None:
    grazing = epyc(stated(1.18, 1.09, 1.28))  # as measured: its interval touches the band's edge 1.10
    clearing = epyc(stated(1.18, 1.11, 1.25))  # the same estimate, an interval that just clears it
    old = [crossover(levels)[0] for levels in (grazing, clearing)]
    assert old[0] is not None and (old[0].below, old[0].at) == ("r3.5", "r7")  # "stops helping between 3.5 and 7"
    assert old[1] is not None and (old[1].below, old[1].at) == ("r7", "r14")  # the level-by-level answer jumps
    band = [fit_crossings(levels, MARGIN)[0] for levels in (grazing, clearing)]
    assert band[0] is not None and band[1] is not None
    assert 7.0 < band[0].load < 28.0  # from the curve: past 7 req/s, where 1.18, 1.10, 1.08, 1.09 fall to the edge
    assert abs(math.log(band[1].load / band[0].load)) < math.log(1.2)
    assert band[0].load_low < 7.0 < 14.0 < band[0].load_high  # the bracket says how far the noise lets it move
    one = fit_crossings(grazing, MARGIN)[1]
    assert one is not None and one.text.startswith("between 28 requests/s and all at once")


def simulate(curve: list[float], block_sd: float, runs: int, seed: int, offset_sd: float = 0.0) -> dict[str, float]:
    """``runs`` sweeps with 4 block values per level drawn around ``curve``; how far each reading lands from the
    true crossing of the band edge (in levels), and how often the brackets hold the true crossings. ``offset_sd``:
    one engine-instance offset per sweep, shared by every level, and every interval holding its variance (as a run
    adds the machine's recorded allowance)."""
    rng = np.random.default_rng(seed)
    truth = np.log(curve)
    true_band = _crossing_position(truth, math.log(1 + MARGIN))
    true_one = _crossing_position(truth, 0.0)
    new_error, old_error, covered_band, covered_one, one_beyond = [], [], 0, 0, 0
    for run in range(runs):
        shared = rng.normal(0.0, offset_sd) if offset_sd > 0 else 0.0
        levels = [
            level(x, block_ratio_interval(list(rng.normal(t + shared, block_sd, 4)), offset_var=offset_sd**2))
            for x, t in zip(LOADS, truth, strict=True)
        ]
        band, one, _, _ = fit_crossings(levels, MARGIN, draws=400, seed=run)
        assert band is not None and one is not None
        new_error.append(abs(band.position - true_band))
        covered_band += band.position_low <= true_band <= band.position_high
        covered_one += one.position_low <= true_one <= one.position_high
        one_beyond += one.position_high > len(LOADS) - 1
        stops = crossover(levels)[0]  # old: the first level after the heaviest "helps", as a position
        names = [lv.load for lv in levels]
        old = len(LOADS) - 0.5 if stops is None else -0.5 if stops.below is None else names.index(stops.at) - 0.5
        old_error.append(abs(old - true_band))
    return {
        "new_error": float(np.mean(new_error)),
        "old_error": float(np.mean(old_error)),
        "new_far": float(np.mean(np.array(new_error) > 1)),
        "old_far": float(np.mean(np.array(old_error) > 1)),
        "covered_band": covered_band / runs,
        "covered_one": covered_one / runs,
        "one_beyond": one_beyond / runs,
    }


def gentle() -> list[float]:
    """1.24 at 3.5 req/s falling log-linearly to 1.05 at 28, 0.92 all at once: the band edge is crossed between 14
    and 21 req/s, 1 between 28 and all at once (the shape the EPYC and Xeon sweeps measured)."""
    x = np.log(np.array(LOADS[:-1]) / 3.5) / math.log(8)
    return [*np.exp(math.log(1.24) + x * math.log(1.05 / 1.24)), 0.92]


def test_the_curve_is_stable_at_cpu_noise_where_level_verdicts_are_not() -> None:
    r = simulate(gentle(), 0.05, 150, 1)
    assert r["new_far"] <= 0.10 and r["old_far"] >= 0.4  # more than one level away from the true crossing
    assert r["new_error"] < r["old_error"] / 2
    assert r["covered_band"] >= 0.9 and r["covered_one"] >= 0.9


def test_the_bracket_holds_at_h200_noise() -> None:
    r = simulate(gentle(), 0.16, 150, 2)
    assert r["covered_band"] >= 0.9 and r["covered_one"] >= 0.9
    assert r["new_error"] < r["old_error"]


def test_the_bracket_holds_with_an_offset_shared_by_every_level() -> None:
    """Issue 35: one engine-instance offset moves the whole curve. The brackets hold with it: the rule before (each
    level's error read back at its blocks' df, redrawn per level) covered 0.88 and 0.77 here. This test holds the
    coverage; the reading at the interval's own se and the shared draw both serve it (the shared draw alone does not
    decide it at these settings)."""
    for offset_sd, seed in ((0.027, 4), (0.05, 5)):
        r = simulate(gentle(), 0.05, 150, seed, offset_sd=offset_sd)
        assert r["covered_band"] >= 0.9 and r["covered_one"] >= 0.9, (offset_sd, r)


def test_a_real_crossover_is_found() -> None:
    steep = [1.8, 1.37, 1.05, 0.9, 0.8, 0.6]  # falls through the band and below 1 between 7 and 21 req/s
    r = simulate(steep, 0.16, 150, 3)
    assert r["new_far"] <= 0.05 and r["one_beyond"] <= 0.05  # "stops being above 1" found within the range
    assert r["covered_band"] >= 0.9 and r["covered_one"] >= 0.9


def test_levels_not_delivered_or_not_judged_are_left_out_and_listed() -> None:
    levels = [
        level(1.0, symmetric(1.5), True),
        level(2.0, symmetric(0.5), False),
        level(4.0, symmetric(1.2), True),
        level(8.0, RatioInterval(math.nan, math.nan, math.nan, 0.95, 0, 0, "none"), True),
        level(math.inf, symmetric(0.8), True),
    ]
    band, one, fitted, left_out = fit_crossings(levels, MARGIN)
    assert left_out == ["r2", "r8"]
    assert math.isnan(fitted[1]) and math.isnan(fitted[3]) and fitted[0] > fitted[2] > fitted[4]
    assert band is not None and one is not None and 1.0 < band.load <= 4.0
    assert one.text.startswith("between 4 requests/s and all at once")
    assert fit_crossings(levels[:2], MARGIN)[0] is None  # one level left to fit: no reading


def test_the_fit_is_monotone_and_weights_the_tighter_level() -> None:
    rising = [level(1.0, symmetric(1.2, 1.02)), level(2.0, symmetric(1.4, 1.5)), level(4.0, symmetric(0.9))]
    _, _, fitted, _ = fit_crossings(rising, MARGIN)
    assert fitted[0] == fitted[1]  # a rise is pooled
    assert abs(math.log(fitted[0] / 1.2)) < abs(math.log(fitted[0] / 1.4))  # toward the tight level


def test_a_level_whose_blocks_did_not_vary_is_left_out_not_pinned() -> None:
    """With an offset allowance every interval has width, so a level whose block ratios are identical (all pairs timed
    out in both arms, say) entered the fit with its own error floored near zero and pinned the curve; it is left
    out and listed, as it is without an offset."""
    flat = block_ratio_interval([0.0, 0.0, 0.0, 0.0], offset_var=0.027**2)
    levels = [
        level(LOADS[0], block_ratio_interval([0.25, 0.2, 0.22, 0.18], offset_var=0.027**2)),
        level(LOADS[1], flat),
        level(LOADS[2], block_ratio_interval([0.2, 0.15, 0.22, 0.17], offset_var=0.027**2)),
        level(LOADS[3], block_ratio_interval([0.05, 0.02, 0.08, 0.04], offset_var=0.027**2)),
    ]
    _, _, fitted, left_out = fit_crossings(levels, MARGIN, draws=200)
    assert left_out == [levels[1].load] and math.isnan(fitted[1])
    assert fitted[2] > 1.15  # not pulled down to the flat level's 1.00
