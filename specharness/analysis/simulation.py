"""Error rates of the speed interval and verdict, by Monte Carlo on a stated data-generating model.

Each simulated run is judged by the project's own interval and verdict functions, called as they are, and by the
methods they replaced. Entry points: :func:`run_study` / :func:`format_study` (the block design's coverage, false
verdicts and power) and :func:`run_traffic_study` / :func:`format_traffic_study` (the verdict on real traffic).
Model and methods: docs/method.md#the-error-rate-simulation.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from specharness.analysis.stats import RatioInterval, block_ratio_interval, look_confidence, t_quantile
from specharness.analysis.verdict import band_edges, speed_verdict
from specharness.experiment.design import possible_looks
from specharness.records import RequestRecord

__all__ = [
    "METHODS",
    "Scenario",
    "ScenarioResult",
    "default_scenarios",
    "false_verdicts_by_offset",
    "format_study",
    "run_study",
    "simulate",
]

METHODS = ("new", "old-1", "old-2")
CONFIDENCE = 0.95
OUTLIER_PROB = 0.01
OUTLIER_FACTOR = 5.0
HEAVY_DF = 3
DRIFT_CURVATURE = 2.0  # shape(t) = (1 - exp(-k t)) / (1 - exp(-k)); k = 2 gives +13% then +7% over thirds


@dataclass(frozen=True, slots=True)
class Scenario:
    """One simulated experiment design and world. Fractions are of time or speed, as named; sds are on the log scale.

    ``true_speedup`` is S = speed B / speed A. ``instance_offset`` makes B's engine that fraction slower for the whole
    run; ``instance_sd`` draws a persistent offset per arm per run. ``drift`` is the fractional rise in speed over the
    planned run (``max_blocks`` blocks when sequential); ``order_effect`` the fractional speed gain of the arm that
    runs second in a block. ``max_blocks`` set means until-decided, starting from ``blocks``.
    """

    name: str
    blocks: int = 4
    cases: int = 8
    true_speedup: float = 1.0
    instance_offset: float = 0.0
    instance_sd: float = 0.0
    drift: float = 0.0
    order_effect: float = 0.0
    heavy_tails: bool = False
    jitter_sd: float = 0.025
    block_sd: float = 0.05
    noise_sd: float = 0.10
    case_sd: float = 0.5
    max_blocks: int | None = None
    margin: float = 0.10

    def __post_init__(self) -> None:
        if self.blocks < 2 or self.cases < 1 or self.true_speedup <= 0:
            raise ValueError(f"{self.name}: needs at least 2 blocks, 1 case and a positive speedup")
        if self.max_blocks is not None and (self.max_blocks < self.blocks or (self.max_blocks - self.blocks) % 2):
            raise ValueError(f"{self.name}: max_blocks must be blocks plus a whole number of block pairs")

    @property
    def sequential(self) -> bool:
        return self.max_blocks is not None

    @property
    def planned_blocks(self) -> int:
        return self.max_blocks if self.max_blocks is not None else self.blocks

    @property
    def looks(self) -> int:
        return possible_looks(self.blocks, self.max_blocks)

    @property
    def inside_band(self) -> bool:
        down, up = band_edges(self.margin)
        return down <= self.true_speedup <= up


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    """Rates over ``runs`` simulated runs of one scenario by one method.

    ``false_verdict_rate``: helps or hurts when S lies inside the band; when S lies outside it, the wrong direction
    or "equivalent". ``power``: the right decisive verdict (the right direction outside the band, "equivalent" inside
    it). Coverage is of S (``coverage_true``) and of S times the run's engine-instance offset
    (``coverage_identifiable``). ``median_ci_width`` is high/low.
    """

    scenario: str
    method: str
    runs: int
    true_speedup: float
    coverage_true: float
    coverage_identifiable: float
    false_verdict_rate: float
    power: float
    equivalent_rate: float
    inconclusive_rate: float
    helps_rate: float
    hurts_rate: float
    median_ci_width: float
    mean_blocks: float

    def se(self, rate: float) -> float:
        """Monte-Carlo standard error of a rate from these runs."""
        return math.sqrt(max(rate * (1.0 - rate), 1e-12) / self.runs)


def default_scenarios() -> list[Scenario]:
    """The study's scenarios: A/A (S = 1) worlds for false verdicts and coverage, then a known slowdown and an effect
    inside the band, then two worlds built to break the former methods. The default design is 4 blocks x 8 cases,
    noise sd 10% per request, jitter 2.5% per arm-block; the known slowdown is run at 6 x 8 (the design whose power
    is claimed) and at 4 x 8 (too few blocks for that claim)."""
    return [
        Scenario("clean"),
        Scenario("two-blocks", blocks=2),
        Scenario("drift", drift=0.20),
        Scenario("order", order_effect=0.08),
        Scenario("instance-4%", instance_offset=0.04),
        Scenario("instance-sd3%", instance_sd=0.03),
        Scenario("heavy-tails", heavy_tails=True),
        Scenario("sequential-drift", blocks=4, max_blocks=12, drift=0.20),
        Scenario("slowdown-0.80", true_speedup=0.80, blocks=6, cases=8),
        Scenario("slowdown-0.80-4x8", true_speedup=0.80),
        Scenario("inside-band-1.03", true_speedup=1.03, blocks=8, cases=16),
        # where the former methods break: block jitter dominating request noise (the bootstrap cannot see it with
        # few blocks), and drift with few, widely spread cases that differ by block (the pooled point of old-1 is
        # weighted by each block's case mix, so the drift no longer cancels)
        Scenario("jitter-dominated", noise_sd=0.03, jitter_sd=0.03),
        Scenario("drift-few-cases", blocks=12, cases=2, case_sd=1.0, drift=0.30, noise_sd=0.03, jitter_sd=0.01),
    ]


# ---------------------------------------------------------------------------------------------------------------
# data


def mirrored_a_first(blocks: int) -> np.ndarray:
    """A runs first in block b of the mirrored plan AB BA BA AB AB BA ... (as experiment.design.block_orders)."""
    b = np.arange(blocks)
    return (b % 2 == 0) == ((b // 2) % 2 == 0)


def _alternating_a_first(blocks: int) -> np.ndarray:
    return np.arange(blocks) % 2 == 0


@dataclass(frozen=True, slots=True)
class _Draw:
    time_a: np.ndarray  # (runs, blocks, cases) seconds
    time_b: np.ndarray
    tokens: np.ndarray  # (runs, blocks, cases), the same in both arms
    a_first: np.ndarray  # (blocks,)
    identifiable: np.ndarray  # (runs,) S * exp(inst_A - inst_B)


def _draw(sc: Scenario, runs: int, rng: np.random.Generator, a_first: np.ndarray, distinct_cases: bool) -> _Draw:
    nb, r = a_first.size, sc.cases
    shape = (runs, nb, r)
    base = rng.normal(0.0, sc.case_sd, (runs, nb if distinct_cases else 1, r)) + math.log(2.0)
    base = np.broadcast_to(base, shape)
    inst_a = rng.normal(0.0, sc.instance_sd, runs) if sc.instance_sd > 0 else np.zeros(runs)
    inst_b = math.log1p(sc.instance_offset) + (
        rng.normal(0.0, sc.instance_sd, runs) if sc.instance_sd > 0 else np.zeros(runs)
    )
    block = rng.normal(0.0, sc.block_sd, (runs, nb, 1))
    jitter = rng.normal(0.0, sc.jitter_sd, (runs, nb, 2, 1))
    if sc.heavy_tails:
        noise = rng.standard_t(HEAVY_DF, (runs, nb, 2, r)) * (sc.noise_sd / math.sqrt(HEAVY_DF / (HEAVY_DF - 2)))
        noise += np.where(rng.random((runs, nb, 2, r)) < OUTLIER_PROB, math.log(OUTLIER_FACTOR), 0.0)
    else:
        noise = rng.normal(0.0, sc.noise_sd, (runs, nb, 2, r))
    # place in time: block, then slot (first or second arm), then request; over the planned run
    horizon = sc.planned_blocks * 2 * r
    slot_a = np.where(a_first, 0, 1)[:, None]  # (blocks, 1)
    idx = np.arange(nb)[:, None] * 2 * r + np.arange(r)[None, :]
    t_a, t_b = (idx + slot_a * r + 0.5) / horizon, (idx + (1 - slot_a) * r + 0.5) / horizon
    k = DRIFT_CURVATURE
    drift = math.log1p(sc.drift)
    trend_a, trend_b = (-drift * (1 - np.exp(-k * t)) / (1 - math.exp(-k)) for t in (t_a, t_b))
    order = -math.log1p(sc.order_effect)
    log_a = (
        base
        + inst_a[:, None, None]
        + trend_a
        + np.where(a_first, 0.0, order)[:, None]
        + block
        + jitter[:, :, 0]
        + noise[:, :, 0]
    )
    log_b = (
        base
        - math.log(sc.true_speedup)
        + inst_b[:, None, None]
        + trend_b
        + np.where(a_first, order, 0.0)[:, None]
        + block
        + jitter[:, :, 1]
        + noise[:, :, 1]
    )
    tokens = np.round(40.0 * np.exp(base))
    return _Draw(np.exp(log_a), np.exp(log_b), tokens, a_first, sc.true_speedup * np.exp(inst_a - inst_b))


# ---------------------------------------------------------------------------------------------------------------
# intervals: the project's, and the two former methods


def _new_interval(d: _Draw, run: int, blocks: int, confidence: float) -> RatioInterval:
    logs = np.log(d.time_a[run, :blocks].sum(axis=1) / d.time_b[run, :blocks].sum(axis=1))
    signs = [1 if first else -1 for first in d.a_first[:blocks]]
    return block_ratio_interval(logs, signs, confidence)


def _old1_t_over_blocks_different_cases(d: _Draw, run: int, blocks: int, confidence: float) -> RatioInterval:
    """The former CI (stats.speedup_interval before the mirrored design): pooled point, t over block log ratios."""
    tok = d.tokens[run, :blocks].sum(axis=1)
    sa, sb = d.time_a[run, :blocks].sum(axis=1), d.time_b[run, :blocks].sum(axis=1)
    point = float((tok.sum() / sb.sum()) / (tok.sum() / sa.sum()))
    logs = np.log((tok / sb) / (tok / sa))
    n = logs.size
    half = t_quantile(1 - (1 - confidence) / 2, n - 1) * float(logs.std(ddof=1)) / math.sqrt(n)
    return RatioInterval(
        point,
        point * math.exp(-half),
        point * math.exp(half),
        confidence,
        n,
        n - 1,
        "old-1: pooled point, t over blocks",
    )


def _old2_two_stage_bootstrap(
    d: _Draw, run: int, blocks: int, confidence: float, rng: np.random.Generator, resamples: int
) -> RatioInterval:
    """The bootstrap the block t interval replaced: blocks with replacement, then paired requests within them."""
    ta, tb, tok = d.time_a[run, :blocks], d.time_b[run, :blocks], d.tokens[run, :blocks]
    r = ta.shape[1]
    bi = rng.integers(0, blocks, (resamples, blocks, 1))
    ri = rng.integers(0, r, (resamples, blocks, r))
    k = tok[bi, ri].sum(axis=(1, 2))
    ratios = (k / tb[bi, ri].sum(axis=(1, 2))) / (k / ta[bi, ri].sum(axis=(1, 2)))
    q = (1 - confidence) / 2
    low, high = np.quantile(ratios, [q, 1 - q])
    point = float((tok.sum() / tb.sum()) / (tok.sum() / ta.sum()))
    return RatioInterval(point, float(low), float(high), confidence, blocks, blocks - 1, "old-2: two-stage bootstrap")


# ---------------------------------------------------------------------------------------------------------------
# simulation


def simulate(
    scenario: Scenario,
    method: str = "new",
    runs: int = 1000,
    seed: int = 0,
    resamples: int = 2000,
    confidence: float | None = None,
) -> ScenarioResult:
    """Simulate ``runs`` experiments of ``scenario`` analysed by ``method`` ("new", "old-1", "old-2"; ``resamples``
    is old-2's bootstrap count) and return the rates. Seeded: the same arguments give the same result.
    ``confidence`` replaces the per-look level (only to run deliberately wrong methods: a 50% interval, or naive
    sequential looks each at 95%)."""
    if method not in METHODS:
        raise ValueError(f"method {method!r}: use one of {', '.join(METHODS)}")
    if method == "old-2" and scenario.sequential:
        raise ValueError("old-2 is not simulated with the sequential design")
    rng = np.random.default_rng([seed, METHODS.index(method)])
    nb = scenario.planned_blocks
    if method == "new":
        d = _draw(scenario, runs, rng, mirrored_a_first(nb), distinct_cases=False)
        interval: Callable[[_Draw, int, int, float], RatioInterval] = _new_interval
    elif method == "old-1":
        d = _draw(scenario, runs, rng, _alternating_a_first(nb), distinct_cases=True)
        interval = _old1_t_over_blocks_different_cases
    else:
        d = _draw(scenario, runs, rng, _alternating_a_first(nb), distinct_cases=False)
        boot = np.random.default_rng([seed, 99])

        def interval(d: _Draw, run: int, blocks: int, conf: float) -> RatioInterval:
            return _old2_two_stage_bootstrap(d, run, blocks, conf, boot, resamples)

    conf = look_confidence(CONFIDENCE, scenario.looks) if confidence is None else confidence
    verdicts: list[str] = []
    lows, highs, used = np.empty(runs), np.empty(runs), np.empty(runs)
    for run in range(runs):
        blocks = scenario.blocks
        while True:
            ci = interval(d, run, blocks, conf)
            v = speed_verdict(ci, scenario.margin).verdict
            if v != "inconclusive" or blocks >= nb:
                break
            blocks += 2
        verdicts.append(v)
        lows[run], highs[run], used[run] = ci.low, ci.high, blocks
    return _summarise(scenario, method, np.array(verdicts), lows, highs, used, d.identifiable)


def _summarise(
    sc: Scenario,
    method: str,
    verdicts: np.ndarray,
    lows: np.ndarray,
    highs: np.ndarray,
    used: np.ndarray,
    identifiable: np.ndarray,
) -> ScenarioResult:
    def rate(mask: np.ndarray) -> float:
        return float(np.mean(mask))

    helps, hurts, equiv = verdicts == "helps", verdicts == "hurts", verdicts == "equivalent"
    _, up = band_edges(sc.margin)
    s = sc.true_speedup
    if sc.inside_band:
        false, right = helps | hurts, equiv
    elif s > up:
        false, right = hurts | equiv, helps
    else:
        false, right = helps | equiv, hurts
    with np.errstate(invalid="ignore", divide="ignore"):
        widths = highs / lows
    finite = np.isfinite(widths)
    return ScenarioResult(
        scenario=sc.name,
        method=method,
        runs=int(verdicts.size),
        true_speedup=s,
        coverage_true=rate((lows <= s) & (s <= highs)),
        coverage_identifiable=rate((lows <= identifiable) & (identifiable <= highs)),
        false_verdict_rate=rate(false),
        power=rate(right),
        equivalent_rate=rate(equiv),
        inconclusive_rate=rate(verdicts == "inconclusive"),
        helps_rate=rate(helps),
        hurts_rate=rate(hurts),
        median_ci_width=float(np.median(widths[finite])) if finite.any() else math.nan,
        mean_blocks=float(used.mean()),
    )


def run_study(
    runs: int = 1000, seed: int = 0, scenarios: Sequence[Scenario] | None = None, resamples: int = 2000
) -> list[ScenarioResult]:
    """Every scenario by every method (old-2 not in sequential scenarios)."""
    out = []
    for sc in scenarios if scenarios is not None else default_scenarios():
        for method in METHODS:
            if method == "old-2" and sc.sequential:
                continue
            out.append(simulate(sc, method, runs, seed, resamples))
    return out


def false_verdicts_by_offset(
    offsets: Sequence[float], base: Scenario | None = None, runs: int = 1000, seed: int = 0
) -> list[tuple[float, float]]:
    """The new method's false-verdict rate (helps or hurts, S = 1) when B's engine instance is slower by each
    fixed fraction in ``offsets``: how large a persistent offset the band absorbs."""
    sc = base if base is not None else Scenario("offset")
    return [
        (o, simulate(replace(sc, name=f"offset {o:.0%}", instance_offset=o), "new", runs, seed).false_verdict_rate)
        for o in offsets
    ]


def format_study(results: Sequence[ScenarioResult]) -> str:
    """A markdown table of a study's results, one row per scenario and method."""
    head = (
        "| scenario | S | method | runs | coverage of S | coverage identifiable | false verdict | power | "
        "equivalent | inconclusive | helps | hurts | median CI width | mean blocks |"
    )
    lines = [head, "|" + "---|" * 14]
    for r in results:
        lines.append(
            f"| {r.scenario} | {r.true_speedup:.2f} | {r.method} | {r.runs} | {r.coverage_true:.3f} | "
            f"{r.coverage_identifiable:.3f} | {r.false_verdict_rate:.3f} | {r.power:.3f} | {r.equivalent_rate:.3f} | "
            f"{r.inconclusive_rate:.3f} | {r.helps_rate:.3f} | {r.hurts_rate:.3f} | {r.median_ci_width:.3f} | "
            f"{r.mean_blocks:.1f} |"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------
# the speed verdict on real traffic (issue 20): divergent outputs, failures, timeouts, loops, offsets, GPU noise
#
# Each simulated run is turned into request records (chunk arrivals, tokens per chunk, prefix chains, digests) and
# judged by the project's own functions: the new rules by comparison.speed_from_pairs (common prefixes, failures
# drop their pair, timeouts at the timeout, the offset variance from the A/A record in the interval, the band from
# the same record), the old rules by the functions that judged before (comparison._classify: identical outputs, a
# case that is not the same work everywhere leaves every block; no offset; the fixed 10% band). Deliberately wrong
# methods are simulated too, so that the error-rate tests are seen to fail for them.
#
# The world, per run (log scale, all terms independent unless said):
#     case c: base time b_c ~ N(log 2, case_sd), tokens n_c = 40 exp(b_c) (at least 12), its own speedup
#             log S_c = log S + N(0, case_speed_sd)
#     time(arm, block, case) = exp(b_c - log S_c [B] + instance(arm) + drift + order + block + jitter(arm, block)
#                                  + noise(request)), heavy tails as in the study above
#     divergence: with probability p_div a pair's outputs part at a uniform point of the output (common prefix
#             u n_c tokens); ``div_bias`` > 0 makes cases that gain more diverge less often (the identical subset
#             is then biased toward them)
#     loops: a share of cases loops to the cap identically in both arms (4x the tokens), B ``loop_speedup`` times
#             faster there
#     failures: each request fails (HTTP error) with probability p_fail; a request slower than ``timeout_s``
#             times out (its chunks up to the timeout kept)
# The truth is the ratio of summed noiseless times over all cases (loops included: the verdict is about the time
# for the same work, and the report shows the loops' share and the estimate without them, whose coverage of the
# truth without the looping cases is counted apart); the identifiable truth multiplies it by the run's
# engine-instance offset.

TRAFFIC_METHODS = ("new", "old", "new-50%-interval", "new-naive-looks", "new-drop-case")
TIMEOUT_NONE = math.inf


@dataclass(frozen=True, slots=True)
class TrafficScenario:
    """One simulated world for the speed verdict on real traffic (see the comment above for every term)."""

    name: str
    blocks: int = 4
    cases: int = 16
    true_speedup: float = 1.0
    case_speed_sd: float = 0.0
    instance_sd: float = 0.0  # per arm, per run: the A/B offset has sd instance_sd * sqrt(2)
    recorded_offset_sd_upper: float = 0.027  # what the machine's A/A record says (an 8-run GPU record)
    drift: float = 0.0
    order_effect: float = 0.0
    heavy_tails: bool = False
    jitter_sd: float = 0.12  # calibrated on the GPU's block noise (docs/results.md)
    block_sd: float = 0.05
    noise_sd: float = 0.15
    case_sd: float = 0.5
    p_div: float = 0.0
    div_bias: float = 0.0
    loop_share: float = 0.0
    loop_speedup: float = 3.0
    p_fail: float = 0.0
    timeout_factor: float = TIMEOUT_NONE  # timeout = this x the slowest case's noiseless baseline time
    long_case: tuple[float, float] | None = None  # (token factor, its own speedup) for case 0
    max_blocks: int | None = None

    @property
    def planned_blocks(self) -> int:
        return self.max_blocks if self.max_blocks is not None else self.blocks


def traffic_scenarios() -> list[TrafficScenario]:
    """The issue-20 study: A/A worlds with what real traffic brings, a known slowdown, and the worlds that broke the
    old rules (divergence, a slow long case that times out, loops)."""
    return [
        TrafficScenario("aa-clean"),
        TrafficScenario("aa-divergent", p_div=0.56),
        TrafficScenario("aa-drift-order", drift=0.20, order_effect=0.08, p_div=0.3),
        TrafficScenario("aa-heavy-tails", heavy_tails=True, p_div=0.3),
        TrafficScenario("aa-offset-sd6%", instance_sd=0.06 / math.sqrt(2), p_div=0.3),
        TrafficScenario("aa-failures-2%", p_fail=0.02, p_div=0.3),
        TrafficScenario("aa-sequential", blocks=4, max_blocks=12, p_div=0.3),
        # at the band's lower edge (the GPU record's band, ±10%): "equivalent" here is a false verdict, and the
        # hardest place to avoid it; a correct method says it in at most 5% of runs, sequential looks included
        TrafficScenario("edge-0.91", true_speedup=1 / 1.10, p_div=0.3),
        TrafficScenario("edge-0.91-sequential", true_speedup=1 / 1.10, blocks=4, max_blocks=12, p_div=0.3),
        # a machine whose A/A record rules out offsets (upper limit 0: band 10%, nothing added): the interval is
        # then at its nominal level, the world where too-short intervals and naive looks show
        TrafficScenario("edge-0.91-no-offset", true_speedup=1 / 1.10, recorded_offset_sd_upper=0.0, p_div=0.3),
        TrafficScenario(
            "edge-0.91-no-offset-sequential",
            true_speedup=1 / 1.10,
            recorded_offset_sd_upper=0.0,
            blocks=4,
            max_blocks=12,
            p_div=0.3,
        ),
        TrafficScenario("aa-no-offset", recorded_offset_sd_upper=0.0, p_div=0.3),
        TrafficScenario("slowdown-0.70-divergent", true_speedup=0.70, p_div=0.56),
        TrafficScenario("slowdown-0.70-identical", true_speedup=0.70),
        # the same world judged with a record of 3 A/A runs (offset upper limit 0.086, band ±19%)
        TrafficScenario("slowdown-0.70-3-aa-runs", true_speedup=0.70, recorded_offset_sd_upper=0.086),
        TrafficScenario("slowdown-0.70-12-blocks", true_speedup=0.70, blocks=12, p_div=0.56),
        TrafficScenario("speedup-1.40-biased-div", true_speedup=1.40, case_speed_sd=0.25, p_div=0.5, div_bias=2.0),
        TrafficScenario("offset-sd6%-true-0.87", true_speedup=0.87, instance_sd=0.06 / math.sqrt(2), blocks=12),
        TrafficScenario(
            "long-case-timeout",
            cases=8,
            true_speedup=1.25,
            long_case=(10.0, 1 / 3),
            timeout_factor=2.6,
            jitter_sd=0.03,
            noise_sd=0.05,
        ),
        TrafficScenario("loops-25%", loop_share=0.25, loop_speedup=3.0, p_div=0.3),
    ]


@dataclass(frozen=True, slots=True)
class TrafficResult:
    """Rates over ``runs`` simulated runs of one traffic scenario judged by one method; the verdict's right and wrong
    answers are against the method's own band (the old rules: the fixed 10%; the new: the A/A record's)."""

    scenario: str
    method: str
    runs: int
    true_speedup: float
    margin: float
    coverage_true: float
    coverage_identifiable: float
    false_verdict_rate: float
    power: float
    equivalent_rate: float
    inconclusive_rate: float
    not_comparable_rate: float
    helps_rate: float
    hurts_rate: float
    median_ci_width: float
    mean_covered_share: float
    without_capped_coverage: float  # how often the estimate without loops covers the truth without the looping cases


def _run_records(
    sc: TrafficScenario, rng: np.random.Generator, a_first: np.ndarray
) -> tuple[list[tuple[RequestRecord, RequestRecord]], float, float, float, float]:
    """One simulated run as request pairs, with its true speedup (all cases, loops included: what the verdict is
    about), the identifiable one, the true speedup without the looping cases, and the request timeout (300 s when
    the scenario has none)."""
    nb, r = a_first.size, sc.cases
    base = rng.normal(math.log(2.0), sc.case_sd, r)
    tokens = np.maximum(12, np.round(40.0 * np.exp(base))).astype(int)
    z = rng.normal(0.0, 1.0, r)
    log_s = math.log(sc.true_speedup) + sc.case_speed_sd * z
    if sc.long_case is not None:
        factor, own = sc.long_case
        tokens[0] = int(tokens.max() * factor)
        base[0] = math.log(tokens[0] / 40.0)
        log_s[0] = math.log(own)
    loops = np.zeros(r, dtype=bool)
    loops[: round(sc.loop_share * r)] = True
    tok = np.where(loops, tokens * 4, tokens)
    log_base = np.where(loops, base + math.log(4.0), base)
    log_s = np.where(loops, math.log(sc.loop_speedup), log_s)
    kept = ~loops
    truth = float(np.exp(log_base).sum() / np.exp(log_base - log_s).sum())
    truth_no_loops = float(np.exp(log_base[kept]).sum() / np.exp(log_base[kept] - log_s[kept]).sum())
    inst = rng.normal(0.0, sc.instance_sd, 2) if sc.instance_sd > 0 else np.zeros(2)
    timeout = sc.timeout_factor * float(np.exp(log_base).max())
    p_div = (
        np.clip(sc.p_div * np.exp(-sc.div_bias * sc.case_speed_sd * z), 0.0, 1.0)
        if sc.div_bias
        else np.full(r, sc.p_div)
    )
    horizon = sc.planned_blocks * 2 * r
    k = DRIFT_CURVATURE
    pairs = []
    for blk in range(nb):
        block = rng.normal(0.0, sc.block_sd)
        for arm in (0, 1):
            jitter = rng.normal(0.0, sc.jitter_sd)
            slot = (0 if a_first[blk] else 1) if arm == 0 else (1 if a_first[blk] else 0)
            t = (blk * 2 * r + slot * r + np.arange(r) + 0.5) / horizon
            trend = -math.log1p(sc.drift) * (1 - np.exp(-k * t)) / (1 - math.exp(-k))
            order = -math.log1p(sc.order_effect) if slot == 1 else 0.0
            if sc.heavy_tails:
                noise = rng.standard_t(HEAVY_DF, r) * (sc.noise_sd / math.sqrt(HEAVY_DF / (HEAVY_DF - 2)))
                noise += np.where(rng.random(r) < OUTLIER_PROB, math.log(OUTLIER_FACTOR), 0.0)
            else:
                noise = rng.normal(0.0, sc.noise_sd, r)
            secs = np.exp(log_base - (log_s if arm else 0.0) + inst[arm] + trend + order + block + jitter + noise)
            if arm == 0:
                secs_a = secs
            else:
                secs_b = secs
        diverge = (rng.random(r) < p_div) & ~loops
        cut = np.maximum(1, np.floor(rng.random(r) * tok)).astype(int)
        fail = rng.random((2, r)) < sc.p_fail
        for c in range(r):
            n = int(tok[c])
            common = int(cut[c]) if diverge[c] else n
            recs = []
            for arm, secs in ((0, secs_a), (1, secs_b)):
                chain = "0000" * n if arm == 0 or not diverge[c] else "0000" * common + "1111" * (n - common)
                digest = f"c{c}" if arm == 0 or not diverge[c] else f"c{c}-b{blk}"
                recs.append(
                    _sim_record(
                        ("baseline", "ngram")[arm],
                        blk,
                        c,
                        n,
                        float(secs[c]),
                        chain,
                        digest,
                        "failed" if fail[arm, c] else ("truncated" if loops[c] else "complete"),
                        timeout,
                    )
                )
            pairs.append((recs[0], recs[1]))
    return (
        pairs,
        truth,
        truth * math.exp(inst[0] - inst[1]),
        truth_no_loops,
        timeout if math.isfinite(timeout) else 300.0,
    )


def _sim_record(
    arm: str, block: int, case: int, n: int, secs: float, chain: str, digest: str, verdict: str, timeout: float
) -> RequestRecord:
    chunks = min(n, 8)
    per = [n // chunks + (1 if i < n % chunks else 0) for i in range(chunks)]
    arrivals = [secs * x / n for x in itertools.accumulate(per)]
    error = None
    if verdict == "failed":
        error, arrivals, per, cut_chain = "http_error", [], [], ""
    elif secs > timeout:
        keep = [i for i, t in enumerate(arrivals) if t <= timeout]
        error, verdict = "timeout", "failed"
        arrivals, per = [arrivals[i] for i in keep], [per[i] for i in keep]
        cut_chain = chain[: 4 * int(sum(per))]
    else:
        cut_chain = chain
    ok = error is None
    return RequestRecord(
        arm=arm,
        block=block,
        workload="sim",
        group="g",
        case_id=f"c{case}",
        clients=1,
        warmup=False,
        cell="",
        seq=case,
        started_unix_s=0.0,
        send_s=0.0,
        chunk_arrival_s=arrivals,
        chunk_tokens=per,
        e2e_s=secs if ok else math.nan,
        completion_tokens=n if ok else None,
        error_kind=error,
        verdict=verdict,
        saw_done=ok,
        finish_reason=("length" if verdict == "truncated" else "stop") if ok else None,
        output_digest=digest,
        prefix_chain=cut_chain,
    )


def _drop_case_on_failure(
    pairs: Sequence[tuple[RequestRecord, RequestRecord]],
) -> list[tuple[RequestRecord, RequestRecord]]:
    """The wrong rule: a case with a failure or timeout in any block leaves every block."""
    bad = {x.case_id for x, y in pairs if x.error_kind or y.error_kind}
    return [(x, y) for x, y in pairs if x.case_id not in bad]


def _traffic_verdict(
    pairs: Sequence[tuple[RequestRecord, RequestRecord]],
    order: dict[int, bool],
    method: str,
    sc: TrafficScenario,
    confidence: float,
    timeout: float,
) -> tuple[RatioInterval, str, float, RatioInterval]:
    from specharness.analysis.comparison import (
        ComparisonRules,
        _block_log_speedups,
        _classify,
        speed_from_pairs,
    )

    if method == "old":
        by_block, counts = _classify(pairs, True)
        logs = _block_log_speedups(by_block, True)
        blocks = sorted(logs)
        ci = block_ratio_interval([logs[k] for k in blocks], [1 if order[k] else -1 for k in blocks], confidence)
        v = speed_verdict(ci, 0.10, same_work_fraction=counts.same_work_fraction, min_same_work=0.5).verdict
        return ci, v, math.nan, NO_INTERVAL_SIM
    rules = ComparisonRules(
        margin=traffic_margin(sc, method),
        confidence=confidence,
        timeout_s=timeout,
        offset_var=sc.recorded_offset_sd_upper**2,
    )
    if method == "new-drop-case":
        pairs = _drop_case_on_failure(pairs)
    ci, verdict, work = speed_from_pairs(pairs, order, rules)
    return ci, verdict.verdict, work.covered_token_share, work.without_capped


NO_INTERVAL_SIM = RatioInterval(math.nan, math.nan, math.nan, CONFIDENCE, 0, 0, "none")


def traffic_margin(sc: TrafficScenario, method: str) -> float:
    """The band a method judges by: the old rules' fixed 10%, else the band from the scenario's A/A record."""
    if method == "old":
        return 0.10
    return max(0.10, math.ceil((math.exp(1.96 * sc.recorded_offset_sd_upper) - 1) * 100 - 1e-9) / 100)


def simulate_traffic(sc: TrafficScenario, method: str = "new", runs: int = 500, seed: int = 0) -> TrafficResult:
    """Simulate ``runs`` runs of ``sc`` judged by ``method`` (:data:`TRAFFIC_METHODS`). Seeded."""
    if method not in TRAFFIC_METHODS:
        raise ValueError(f"method {method!r}: use one of {', '.join(TRAFFIC_METHODS)}")
    rng = np.random.default_rng([seed, TRAFFIC_METHODS.index(method)])
    nb = sc.planned_blocks
    a_first = mirrored_a_first(nb)
    looks = possible_looks(sc.blocks, sc.max_blocks)
    conf = {"new-50%-interval": 0.50, "new-naive-looks": CONFIDENCE}.get(method, look_confidence(CONFIDENCE, looks))
    verdicts, lows, highs, idents, truths, covered, wc = [], [], [], [], [], [], []
    for _ in range(runs):
        pairs, truth, ident, no_loops, timeout = _run_records(sc, rng, a_first)
        blocks = sc.blocks
        while True:
            kept = [(x, y) for x, y in pairs if x.block < blocks]
            order = {b: bool(a_first[b]) for b in range(blocks)}
            ci, v, share, without = _traffic_verdict(kept, order, method, sc, conf, timeout)
            if v != "inconclusive" or blocks >= nb:
                break
            blocks += 2
        verdicts.append(v)
        lows.append(ci.low)
        highs.append(ci.high)
        idents.append(ident)
        truths.append(truth)
        covered.append(share)
        wc.append(without.low <= no_loops <= without.high if math.isfinite(without.low) else math.nan)
    return _traffic_summary(sc, method, verdicts, lows, highs, truths, idents, covered, wc)


def _traffic_summary(
    sc: TrafficScenario,
    method: str,
    verdicts: list[str],
    lows: list[float],
    highs: list[float],
    truths: list[float],
    idents: list[float],
    covered: list[float],
    wc: list[float],
) -> TrafficResult:
    v = np.array(verdicts)
    lo, hi, s, ident = (np.asarray(x, dtype=float) for x in (lows, highs, truths, idents))
    margin = traffic_margin(sc, method)
    down, up = band_edges(margin)
    s0 = float(np.median(s))
    helps, hurts, equiv = v == "helps", v == "hurts", v == "equivalent"
    if down <= s0 <= up:
        false, right = helps | hurts, equiv
    elif s0 > up:
        false, right = hurts | equiv, helps
    else:
        false, right = helps | equiv, hurts
    with np.errstate(invalid="ignore", divide="ignore"):
        widths = hi / lo
    finite = np.isfinite(widths)
    wcs = np.asarray(wc, dtype=float)
    return TrafficResult(
        scenario=sc.name,
        method=method,
        runs=int(v.size),
        true_speedup=s0,
        margin=margin,
        coverage_true=float(np.mean((lo <= s) & (s <= hi))),
        coverage_identifiable=float(np.mean((lo <= ident) & (ident <= hi))),
        false_verdict_rate=float(np.mean(false)),
        power=float(np.mean(right)),
        equivalent_rate=float(np.mean(equiv)),
        inconclusive_rate=float(np.mean(v == "inconclusive")),
        not_comparable_rate=float(np.mean(v == "not comparable")),
        helps_rate=float(np.mean(helps)),
        hurts_rate=float(np.mean(hurts)),
        median_ci_width=float(np.median(widths[finite])) if finite.any() else math.nan,
        mean_covered_share=float(np.nanmean(covered)) if np.isfinite(covered).any() else math.nan,
        without_capped_coverage=float(np.nanmean(wcs)) if np.isfinite(wcs).any() else math.nan,
    )


def run_traffic_study(
    runs: int = 500,
    seed: int = 0,
    scenarios: Sequence[TrafficScenario] | None = None,
    methods: Sequence[str] = ("old", "new"),
) -> list[TrafficResult]:
    """Every traffic scenario by each method (old rules vs new by default)."""
    return [simulate_traffic(sc, m, runs, seed) for sc in (scenarios or traffic_scenarios()) for m in methods]


def format_traffic_study(results: Sequence[TrafficResult]) -> str:
    """A markdown table: old rules vs new, one row per scenario and method."""
    head = (
        "| scenario | S | method | band | runs | coverage of S | coverage identifiable | false verdict | power | "
        "equivalent | inconclusive | not comparable | helps | hurts | median CI width | covered share | "
        "coverage without loops |"
    )
    lines = [head, "|" + "---|" * 17]
    for r in results:
        lines.append(
            f"| {r.scenario} | {r.true_speedup:.2f} | {r.method} | ±{r.margin:.0%} | {r.runs} | {r.coverage_true:.3f} | "
            f"{r.coverage_identifiable:.3f} | {r.false_verdict_rate:.3f} | {r.power:.3f} | {r.equivalent_rate:.3f} | "
            f"{r.inconclusive_rate:.3f} | {r.not_comparable_rate:.3f} | {r.helps_rate:.3f} | {r.hurts_rate:.3f} | "
            f"{r.median_ci_width:.3f} | {r.mean_covered_share:.2f} | {r.without_capped_coverage:.3f} |"
        )
    return "\n".join(lines)
