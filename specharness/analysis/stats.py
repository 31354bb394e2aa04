"""Statistics: pure functions from numbers to small result objects; an empty sample gives NaN, never 0.

:func:`block_ratio_interval` turns one log ratio per block into an estimate and a Student t interval
(:class:`RatioInterval`), with the order term and the engine-instance offset allowance;
:func:`case_resampled_interval` widens it for traffic like the run's prompts; :func:`percentile_table`,
:func:`min_samples_for`, :func:`look_confidence` and :func:`ratio_change` serve the reports and comparisons.
Rules: docs/method.md#the-block-interval.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import special as spc
from scipy import stats as sps
from scipy.optimize import brentq

__all__ = [
    "INSTANCES_METHOD",
    "PERCENTILES",
    "RatioInterval",
    "block_ratio_interval",
    "case_resampled_interval",
    "instance_ratio_interval",
    "look_confidence",
    "min_samples_for",
    "percentile_table",
    "ratio_change",
    "t_quantile",
]

PERCENTILES = (50, 95, 99)
ORDER_EFFECT_BLOCKS = 4  # blocks (both orders present) from which the order effect is estimated and reported
ORDER_TERM_BLOCKS = 6  # blocks from which the interval itself comes from the fit with the order term
INSTANCES_METHOD = "t, engine instances as replicates"  # how an interval over engine instances names its method


@dataclass(frozen=True, slots=True)
class RatioInterval:
    """A ratio (B over A) with its confidence interval over blocks, and the evidence behind it."""

    estimate: float
    low: float
    high: float
    confidence: float
    blocks: int
    df: int
    method: str
    order_effect: float = math.nan  # ratio factor when A runs first vs the mean (exp(delta)); NaN when not estimated
    order_effect_low: float = math.nan
    order_effect_high: float = math.nan
    offset_var: float = 0.0  # the engine-instance offset variance (log scale) the interval holds beside its blocks'
    se_log: float = math.nan  # the standard error of the log estimate, offset included
    t_df: float = math.nan  # the degrees of freedom its t quantile used (Satterthwaite when an offset is added)

    @property
    def width(self) -> float:
        """high / low: 1.0 is a point; NaN without an interval."""
        return self.high / self.low if self.low > 0 and math.isfinite(self.high) else math.nan

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "width": self.width}


NO_INTERVAL = RatioInterval(math.nan, math.nan, math.nan, 0.95, 0, 0, "none")


def t_quantile(q: float, df: float) -> float:
    """Student t quantile, ``scipy.stats.t.ppf(q, df)``: for 0 < q < 1 the same function (``scipy.special.stdtrit``,
    which ``t.ppf`` calls) without the distribution object's per-call argument handling, for the simulations that call
    it many times; NaN where df is not positive."""
    if 0.0 < q < 1.0:
        return float(spc.stdtrit(df, q))
    return float(sps.t.ppf(q, df))


def _with_offset(se2: float, df: float, offset_var: float, q: float, welch: float | None = None) -> tuple[float, float]:
    """Standard error once the engine-instance offset variance is added, and the t degrees of freedom to use with it.

    The allowance widens an interval and never narrows it: the half-width is the wider of the blocks' own t interval
    (``df``) and the Welch–Satterthwaite interval with the offset term taken as known. Satterthwaite alone raises the
    degrees of freedom with the known term, and with few blocks that makes intervals narrower than the blocks' own;
    the allowance is an upper limit, so the true offset is usually smaller and the blocks' own interval must still
    hold. When the blocks' own interval is the wider, the returned degrees of freedom are those whose t quantile
    (level ``q``) times the returned error gives it. ``welch``: the Satterthwaite denominator of ``se2`` when it is a
    sum of several estimated variances (the sum of each one's square over its df; default ``se2² / df``)."""
    if offset_var <= 0:
        return math.sqrt(se2), float(df)
    total = se2 + offset_var
    welch = se2**2 / df if welch is None else welch
    df_known = total**2 / welch if welch > 0 else math.inf
    own = t_quantile(q, df) * math.sqrt(se2)
    if t_quantile(q, df_known) * math.sqrt(total) >= own:
        return math.sqrt(total), df_known
    target = own / math.sqrt(total)  # a t quantile between those at df_known and at df
    return math.sqrt(total), float(brentq(lambda d: t_quantile(q, d) - target, df, df_known))


def block_ratio_interval(
    log_ratios: Sequence[float],
    order_signs: Sequence[int] | None = None,
    confidence: float = 0.95,
    offset_var: float = 0.0,
) -> RatioInterval:
    """Point estimate exp(mean log ratio) and its t interval; the order model and the engine-instance offset variance
    ``offset_var`` (log scale) added to the mean's: docs/method.md#the-block-interval."""
    y = np.asarray(log_ratios, dtype=float)
    keep = np.isfinite(y)
    y = y[keep]
    signs = None if order_signs is None else np.asarray(order_signs, dtype=float)[keep]
    n = int(y.size)
    if n == 0:
        return RatioInterval(math.nan, math.nan, math.nan, confidence, 0, 0, "none")
    q = 1.0 - (1.0 - confidence) / 2.0
    order: dict[str, float] = {}
    if signs is not None and n >= ORDER_EFFECT_BLOCKS and (signs > 0).any() and (signs < 0).any():
        x = np.column_stack([np.ones(n), signs])
        coef, *_ = np.linalg.lstsq(x, y, rcond=None)
        resid = y - x @ coef
        df = n - 2
        cov = float(resid @ resid) / df * np.linalg.inv(x.T @ x)
        t = t_quantile(q, df)
        mu = float(coef[0])
        delta, se_delta = float(coef[1]), math.sqrt(max(cov[1, 1], 0.0))
        order = {
            "order_effect": math.exp(delta),
            "order_effect_low": math.exp(delta - t * se_delta),
            "order_effect_high": math.exp(delta + t * se_delta),
        }
        if n >= ORDER_TERM_BLOCKS:
            se_mu, df_mu = _with_offset(max(cov[0, 0], 0.0), df, offset_var, q)
            t = t_quantile(q, df_mu)
            return RatioInterval(
                math.exp(mu),
                math.exp(mu - t * se_mu),
                math.exp(mu + t * se_mu),
                confidence,
                n,
                df,
                "t, blocks as replicates, order term" + _offset_note(offset_var),
                **order,
                offset_var=offset_var,
                se_log=se_mu,
                t_df=df_mu,
            )
    mu = float(y.mean())
    if n < 2:
        return RatioInterval(math.exp(mu), math.nan, math.nan, confidence, n, 0, "one block: no interval")
    df = n - 1
    se, df_se = _with_offset(float(y.var(ddof=1)) / n, df, offset_var, q)
    t = t_quantile(q, df_se)
    method = "t, blocks as replicates" + _offset_note(offset_var)
    if signs is not None and float(signs.sum()) != 0.0:
        method += "; arm orders unbalanced, so the mean carries part of any order effect"
    return RatioInterval(
        math.exp(mu),
        math.exp(mu - t * se),
        math.exp(mu + t * se),
        confidence,
        n,
        df,
        method,
        **order,
        offset_var=offset_var,
        se_log=se,
        t_df=df_se,
    )


def instance_ratio_interval(
    log_ratios: Sequence[float], instances: Sequence[int], confidence: float = 0.95
) -> RatioInterval:
    """Blocks nested in engine instances: the estimate is exp(mean of the instances' mean log ratios), each instance
    (a fresh engine per arm, serving consecutive blocks) weighted equally, and the Student t interval comes from the
    spread of those instance means with instances - 1 degrees of freedom. An instance mean varies with its engines'
    offset and with its blocks' noise, so the interval holds the engine-instance offset as measured in this run,
    with no allowance from a machine record (docs/method.md#engine-instances-as-replicates). Fewer than two
    instances give no interval."""
    groups: dict[int, list[float]] = {}
    for y, inst in zip(log_ratios, instances, strict=True):
        if math.isfinite(y):
            groups.setdefault(inst, []).append(float(y))
    n = sum(len(g) for g in groups.values())
    if not groups:
        return RatioInterval(math.nan, math.nan, math.nan, confidence, 0, 0, "none")
    means = np.array([np.mean(g) for g in groups.values()])
    mu = float(means.mean())
    e = int(means.size)
    method = f"{INSTANCES_METHOD} ({e} instances, {n} blocks)"
    if e < 2:
        return RatioInterval(math.exp(mu), math.nan, math.nan, confidence, n, 0, method + ": one instance, no interval")
    se = float(means.std(ddof=1)) / math.sqrt(e)
    t = t_quantile(1.0 - (1.0 - confidence) / 2.0, e - 1)
    return RatioInterval(
        math.exp(mu),
        math.exp(mu - t * se),
        math.exp(mu + t * se),
        confidence,
        n,
        e - 1,
        method,
        se_log=se,
        t_df=float(e - 1),
    )


def _offset_note(offset_var: float) -> str:
    return f", engine-instance offset sd {math.sqrt(offset_var):.3f} added" if offset_var > 0 else ""


def case_resampled_interval(
    block_case_logs: Sequence[dict[str, tuple[float, float]]],
    interval: RatioInterval,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> RatioInterval:
    """The interval for traffic like these prompts: ``interval`` (over blocks, about these prompts) widened by the
    variance of the estimate when the *cases* are drawn again (a case bootstrap within blocks: one draw of case
    ids with replacement, used in every block, block ratio of summed times over the drawn cases).
    ``block_case_logs[b][case] = (time_a, time_b)`` summed over the case's pairs in block b. The two variances
    are added (conservative: the case draw also sees request noise that the block term holds); the t quantile is
    :func:`_with_cases`'s."""
    cases = sorted({c for block in block_case_logs for c in block})
    if not math.isfinite(interval.se_log) or len(cases) < 2 or not block_case_logs:
        return NO_INTERVAL
    index = {c: i for i, c in enumerate(cases)}
    ta = np.zeros((len(block_case_logs), len(cases)))
    tb = np.zeros_like(ta)
    for b, block in enumerate(block_case_logs):
        for c, (a, bb) in block.items():
            ta[b, index[c]], tb[b, index[c]] = a, bb
    rng = np.random.default_rng(seed)
    draw = rng.integers(0, len(cases), (resamples, len(cases)))
    flat = (draw + len(cases) * np.arange(resamples)[:, None]).ravel()  # each draw's count of every case
    weights = np.bincount(flat, minlength=resamples * len(cases)).reshape(resamples, len(cases)).astype(float)
    sa, sb = weights @ ta.T, weights @ tb.T  # (resamples, blocks)
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(sa / sb)
    means = np.nanmean(np.where(np.isfinite(logs), logs, np.nan), axis=1)
    case_var = float(np.nanvar(means, ddof=1))
    q = 1.0 - (1.0 - confidence) / 2.0
    se, half, t_df = _with_cases(interval, case_var, len(cases) - 1, q)
    mu = math.log(interval.estimate)
    return RatioInterval(
        interval.estimate,
        math.exp(mu - half),
        math.exp(mu + half),
        confidence,
        interval.blocks,
        interval.df,
        interval.method + f"; cases resampled ({len(cases)} cases, "
        f"{resamples} draws, case sd {math.sqrt(case_var):.3f} added)",
        offset_var=interval.offset_var,
        se_log=se,
        t_df=t_df,
    )


def _with_cases(interval: RatioInterval, case_var: float, case_df: int, q: float) -> tuple[float, float, float]:
    """(standard error, half-width, t degrees of freedom) of a block interval widened by the cases' variance. Without
    the offset: the wider of the blocks' t (their df) and the Welch–Satterthwaite t over the blocks and the cases
    (``case_df``), times √(blocks' variance + cases'); with it, :func:`_with_offset` on that, never narrower than the
    one without (the t quantile falls as a known term grows: docs/method.md#the-block-interval). So a larger
    allowance never narrows the interval."""
    if interval.df < 1 or not math.isfinite(case_var):
        return math.nan, math.nan, math.nan
    own2 = max(interval.se_log**2 - interval.offset_var, 0.0)  # the blocks' own variance of the mean
    spread = own2 + case_var
    welch = own2**2 / interval.df + (case_var**2 / case_df if case_df > 0 else 0.0)
    floor_df = min(float(interval.df), spread**2 / welch if welch > 0 else math.inf)
    se, t_df = _with_offset(spread, floor_df, interval.offset_var, q, welch)
    return se, t_quantile(q, t_df) * se, t_df


def look_confidence(confidence: float, looks: int) -> float:
    """Per-look confidence for a sequential design with up to ``looks`` looks (Bonferroni): the chance that any look
    gives a wrong verdict stays at most 1 - ``confidence``, however the looks depend on each other."""
    return 1.0 - (1.0 - confidence) / max(looks, 1)


def min_samples_for(pct: float) -> int:
    """Samples a percentile needs before it is claimed: at least one sample beyond it (p95: 20, p99: 100)."""
    return math.ceil(1.0 / (1.0 - pct / 100.0) - 1e-9)


def percentile_table(values_s: Iterable[float], failed: int = 0, failed_at_s: float = math.inf) -> dict[str, float]:
    """p50/p95/p99 in ms with failed requests counted at ``failed_at_s`` (the run's request timeout: the longest a
    user waits for an answer that never comes), NaN where the sample is too small for that percentile; ``n`` and
    ``failed`` travel with the numbers, and ``p<k>_failed`` is 1 when that percentile lands on a failure."""
    arr = np.fromiter((math.nan if v is None else v for v in values_s), dtype=float)
    arr = arr[np.isfinite(arr)]
    full = np.sort(np.concatenate([arr, np.full(failed, np.inf)]))
    out: dict[str, float] = {"n": float(full.size), "failed": float(failed)}
    for p in PERCENTILES:
        if full.size < min_samples_for(p) or full.size == 0:
            out[f"p{p}"] = math.nan
            continue
        value = float(np.percentile(full, p, method="inverted_cdf"))
        out[f"p{p}_failed"] = float(math.isinf(value))
        out[f"p{p}"] = (failed_at_s if math.isinf(value) else value) * 1000.0
    return out


@dataclass(frozen=True, slots=True)
class RatioChange:
    """How a block-replicated ratio moved between two runs: B's over A's, with Welch's CI and p-value."""

    change: float
    low: float
    high: float
    pvalue: float
    blocks_a: int
    blocks_b: int
    df: float = math.nan
    offset_var: float = 0.0  # the engine-instance offset variance (log scale) the interval allows for

    @property
    def significant(self) -> bool:
        return self.pvalue < 0.05


def ratio_change(
    block_ratios_a: Sequence[float],
    block_ratios_b: Sequence[float],
    confidence: float = 0.95,
    offset_var: float = 0.0,
    offset_df: float = math.inf,
) -> RatioChange:
    """The change of a geometric-mean ratio between two runs, from their block log ratios: the difference of means
    with standard error² = s_a²/n_a + s_b²/n_b + 2·σ_u², its CI and two-sided p-value. Needs 2 blocks in each run.

    σ_u² (``offset_var``, ``offset_df`` degrees of freedom) is the variance of an engine instance's offset, which
    every block of a run shares and the blocks therefore cannot see; it is measured from repeated runs of one
    release (:mod:`specharness.history.review.spread`). With σ_u² = 0 this is Welch's test, computed by
    ``scipy.stats.ttest_ind(equal_var=False)``; otherwise the degrees of freedom are Welch–Satterthwaite's over the
    three terms and the t distribution is scipy's, and the interval is never narrower (nor the p-value lower) than
    Welch's without the offset: the allowance can only widen."""
    a = np.log(np.asarray([v for v in block_ratios_a if v > 0 and math.isfinite(v)], dtype=float))
    b = np.log(np.asarray([v for v in block_ratios_b if v > 0 and math.isfinite(v)], dtype=float))
    if a.size < 2 or b.size < 2:
        est = math.exp(b.mean() - a.mean()) if a.size and b.size else math.nan
        return RatioChange(est, math.nan, math.nan, math.nan, int(a.size), int(b.size))
    diff = float(b.mean() - a.mean())
    if offset_var <= 0:
        res = sps.ttest_ind(b, a, equal_var=False)
        ci = res.confidence_interval(confidence_level=confidence)
        return RatioChange(
            math.exp(diff),
            math.exp(ci.low),
            math.exp(ci.high),
            float(res.pvalue),
            int(a.size),
            int(b.size),
            float(res.df),
        )
    ta, tb, tu = float(a.var(ddof=1)) / a.size, float(b.var(ddof=1)) / b.size, 2.0 * offset_var
    se2 = ta + tb + tu
    df = se2**2 / (
        ta**2 / (a.size - 1) + tb**2 / (b.size - 1) + (tu**2 / offset_df if 0 < offset_df < math.inf else 0.0)
    )
    se = math.sqrt(se2)
    half = t_quantile(0.5 + confidence / 2, df) * se
    pvalue = float(2 * sps.t.sf(abs(diff) / se, df))
    welch = sps.ttest_ind(b, a, equal_var=False)  # the allowance never narrows Welch's interval nor lowers its p
    welch_half = (welch.confidence_interval(confidence_level=confidence).high - diff) if ta + tb > 0 else 0.0
    if welch_half > half:
        half, df, pvalue = float(welch_half), float(welch.df), max(pvalue, float(welch.pvalue))
    return RatioChange(
        math.exp(diff),
        math.exp(diff - half),
        math.exp(diff + half),
        pvalue,
        int(a.size),
        int(b.size),
        df,
        offset_var,
    )
