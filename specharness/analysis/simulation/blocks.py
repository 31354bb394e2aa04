"""The block-level Monte Carlo of the speed interval: coverage, false verdicts and power of the block design.

Each simulated run is judged by the project's own interval and verdict functions, called as they are, and by the
methods they replaced. Entry points: :func:`run_study` / :func:`format_study`. Model and methods:
docs/method.md#the-error-rate-simulation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from specharness.analysis.simulation.model import (
    CONFIDENCE,
    DRIFT_CURVATURE,
    HEAVY_DF,
    OUTLIER_FACTOR,
    OUTLIER_PROB,
    mirrored_a_first,
)
from specharness.analysis.stats import RatioInterval, block_ratio_interval, look_confidence, t_quantile
from specharness.analysis.verdict import band_edges, speed_verdict
from specharness.experiment.plan import possible_looks

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
