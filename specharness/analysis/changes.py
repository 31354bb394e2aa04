"""Paired changes between two arms of one run (two releases, two configurations), block by block, with intervals.

:func:`paired_changes` gives every tracked value (the time for the same work and :data:`CHANGE_METRICS`) as arm B
over arm A with its :data:`CHANGE_CONFIDENCE` interval (:class:`PairedChange`); :func:`detectable_ratio` gives the
smallest change each could call. Rules: docs/method.md#paired-changes-between-arms.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from specharness.analysis.comparison import PairedComparison, speed_block_logs
from specharness.analysis.comparison.speed import replicate_interval
from specharness.analysis.stats import t_quantile
from specharness.analysis.verdict import RELEASE_FACTOR
from specharness.records import CellRecord, RequestRecord

__all__ = [
    "ALL_CELLS",
    "CHANGE_CONFIDENCE",
    "CHANGE_METRICS",
    "PairedChange",
    "detectable_ratio",
    "over_cells_logs",
    "paired_changes",
    "peak_memory",
]

CHANGE_CONFIDENCE = 0.99
ALL_CELLS = "all"  # the workload and load of a change over all the run's cells of a comparison

_Cell = tuple[Sequence[RequestRecord], Sequence[CellRecord]]


def _percentile(values: Sequence[float], q: float) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return float(np.percentile(finite, q)) if finite else math.nan


def _ttft(q: float) -> Callable[[_Cell], float]:
    return lambda cell: _percentile([r.ttft_s for r in cell[0] if r.error_kind is None], q)


def _tpot(q: float) -> Callable[[_Cell], float]:
    return lambda cell: _percentile([r.tpot_s for r in cell[0] if r.error_kind is None], q)


def _goodput(cell: _Cell) -> float:
    wall = sum(c.wall_s for c in cell[1])
    useful = sum(r.output_tokens for r in cell[0] if r.useful)
    return useful / wall if wall > 0 and useful > 0 else math.nan


def peak_memory(cells: Sequence[CellRecord]) -> float:
    """An arm's server's peak RSS over its records of one cell and block; NaN on a GPU, whose used memory is the
    device's, shared by every arm."""
    if any("peak_gpu_used_mib" in c.memory for c in cells):
        return math.nan
    peaks = [c.memory["peak_rss_mib"] for c in cells if "peak_rss_mib" in c.memory]
    return max(peaks) if peaks else math.nan


def _peak_memory(cell: _Cell) -> float:
    return peak_memory(cell[1])


def _verify_steps(cell: _Cell) -> float:
    drafts = sum(c.counters.get("drafts", 0.0) for c in cell[1])
    accepted = sum(c.counters.get("accepted_tokens", 0.0) for c in cell[1])
    return 1.0 / (1.0 + accepted / drafts) if drafts else math.nan


SPEED_OFFSET, MEMORY_OFFSET, NO_OFFSET = "speed", "memory", ""

# name -> (per-block value of one arm, inverted: a rise of the value is good for the arm, the engine-instance offset
# allowance it carries: the speed one, the peak-memory one or none)
CHANGE_METRICS: dict[str, tuple[Callable[[_Cell], float], bool, str]] = {
    "ttft_p50": (_ttft(50), False, SPEED_OFFSET),
    "ttft_p95": (_ttft(95), False, SPEED_OFFSET),
    "tpot_p50": (_tpot(50), False, SPEED_OFFSET),
    "tpot_p95": (_tpot(95), False, SPEED_OFFSET),
    "goodput_loss": (_goodput, True, SPEED_OFFSET),
    "peak_memory": (_peak_memory, False, MEMORY_OFFSET),
    "verify_steps_per_token": (_verify_steps, False, NO_OFFSET),
}


@dataclass(frozen=True, slots=True)
class PairedChange:
    """One value of arm B over arm A in one cell: the estimate (geometric mean over blocks), its interval, the block
    ratios behind it; above 1 is worse for B. NaN where a block lacks the value in either arm."""

    workload: str
    load: str
    arm_a: str
    arm_b: str
    metric: str
    estimate: float
    low: float
    high: float
    confidence: float
    blocks: int
    block_values: tuple[float, ...]
    method: str
    se_log: float = math.nan  # standard error of the log estimate (the offset allowance included)
    t_df: float = math.nan  # the degrees of freedom of the interval's t quantile
    spread_log: float = math.nan  # the log estimate's own sd: its blocks' error and the offset at its point estimate

    def detectable(self, power: float = 0.80) -> float:
        """The smallest ratio this value would call changed at ``power`` (:func:`detectable_ratio`)."""
        return detectable_ratio(self.se_log, self.t_df, power, self.spread_log)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _interval(
    c: PairedComparison,
    metric: str,
    logs: dict[int, float],
    offset_var: float,
    a_first: dict[int, bool] | None = None,
    where: tuple[str, str] | None = None,
    estimate_var: float = math.nan,
) -> PairedChange:
    """The change of one value from its block logs; ``a_first`` (block -> whether A ran first) defaults to the
    comparison's own, ``where`` (workload, load) to its cell; ``estimate_var`` the offset variance at its point
    estimate (NaN: the allowance), for the estimate's own spread."""
    order = c.order_a_first if a_first is None else a_first
    blocks = sorted(b for b, v in logs.items() if math.isfinite(v))
    r = replicate_interval(logs, order, CHANGE_CONFIDENCE, offset_var, c.instance_of)
    workload, load = where or (c.workload, c.load)
    return PairedChange(
        workload=workload,
        load=load,
        arm_a=c.arm_a,
        arm_b=c.arm_b,
        metric=metric,
        estimate=r.estimate,
        low=r.low,
        high=r.high,
        confidence=CHANGE_CONFIDENCE,
        blocks=r.blocks,
        block_values=tuple(math.exp(logs[b]) for b in blocks),
        method=r.method,
        se_log=r.se_log,
        t_df=r.t_df,
        spread_log=_spread(r.se_log, r.offset_var, estimate_var),
    )


def _spread(se_log: float, allowance: float, estimate_var: float) -> float:
    """The log estimate's own sd: its interval's standard error with the offset allowance (an upper limit) replaced by
    the offset at its point estimate; the standard error where no estimate is known or none was added."""
    if allowance <= 0 or not math.isfinite(estimate_var):
        return se_log
    return math.sqrt(max(se_log**2 - allowance + min(estimate_var, allowance), 0.0))


def detectable_ratio(se_log: float, t_df: float, power: float = 0.80, spread_log: float = math.nan) -> float:
    """The smallest ratio a paired change is called at ``power`` (:func:`~specharness.analysis.verdict.pair_change`):
    the larger of ``exp(t(0.995, df) · se + t(power, df) · spread)`` (its 99% interval excludes 1) and
    ``factor · exp(t(power, df) · spread)`` (its estimate lies beyond the factor). ``se`` is the interval's standard
    error, the offset allowance (an upper limit) included; ``spread`` the estimate's own sd, with the offset at its
    point estimate (NaN: ``se``, the rule before, which took the limit for the true spread); NaN without an error."""
    if not (math.isfinite(se_log) and math.isfinite(t_df) and t_df > 0):
        return math.nan
    spread = spread_log if math.isfinite(spread_log) else se_log
    by_interval = math.exp(t_quantile(0.995, t_df) * se_log + t_quantile(power, t_df) * spread)
    return max(by_interval, RELEASE_FACTOR * math.exp(t_quantile(power, t_df) * spread))


def paired_changes(
    comparisons: Sequence[PairedComparison],
    measured: dict[tuple[str, str, str], list[RequestRecord]],
    cells: Sequence[CellRecord],
    memory_var: float = math.nan,
    over_cells_var: float = math.nan,
    offset_estimate_var: float = math.nan,
) -> list[PairedChange]:
    """Every value of every comparison, B over A, paired by block (docs/method.md#paired-changes-between-arms).
    ``measured``: the analysis's measured requests by (workload, load, arm); ``cells``: the valid cells;
    ``memory_var``: the machine's peak-memory offset allowance (NaN: none recorded, and no peak-memory value: one run's
    two engines cannot tell a change from two instances' offset); ``over_cells_var``: the speed offset allowance of a
    run's mean over its cells (NaN: the per-cell one, larger)."""
    by_cell: dict[tuple[str, str, str, int], list[CellRecord]] = {}
    for cell in cells:
        by_cell.setdefault((cell.workload, cell.load, cell.arm, cell.block), []).append(cell)
    out: list[PairedChange] = []
    per_pair: dict[tuple[str, str, str], list[tuple[PairedComparison, dict[int, float], float]]] = {}
    counts: dict[tuple[str, str], int] = {}  # cells per pair of arms
    for c in comparisons:
        if not c.blocks:
            continue
        counts[(c.arm_a, c.arm_b)] = counts.get((c.arm_a, c.arm_b), 0) + 1
        offset_var = c.speedup.offset_var
        time_logs = {b: -v for b, v in speed_block_logs(c).items()}
        if time_logs:
            out.append(_interval(c, "time", time_logs, offset_var, estimate_var=offset_estimate_var))
            per_pair.setdefault((c.arm_a, c.arm_b, "time"), []).append((c, time_logs, offset_var))

        def block_cell(arm: str, block: int, workload: str = c.workload, load: str = c.load) -> _Cell:
            records = [r for r in measured.get((workload, load, arm), []) if r.block == block]
            return records, by_cell.get((workload, load, arm, block), [])

        for metric, (value, inverted, allowance) in CHANGE_METRICS.items():
            extra = {SPEED_OFFSET: offset_var, MEMORY_OFFSET: memory_var}.get(allowance, 0.0)
            if math.isnan(extra):
                continue
            logs: dict[int, float] = {}
            for block in c.blocks:
                a, b = value(block_cell(c.arm_a, block)), value(block_cell(c.arm_b, block))
                if a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b):
                    logs[block] = math.log(a / b) if inverted else math.log(b / a)
            if logs:
                estimate = offset_estimate_var if allowance == SPEED_OFFSET else math.nan
                out.append(_interval(c, metric, logs, extra, estimate_var=estimate))
                per_pair.setdefault((c.arm_a, c.arm_b, metric), []).append((c, logs, extra))
    every = [(m, cells) for (a, b, m), cells in per_pair.items() if len(cells) == counts[(a, b)]]  # no cell lacks it
    return out + [
        p for m, cells in every if (p := _over_cells(m, cells, over_cells_var, offset_estimate_var)) is not None
    ]


def _over_cells(
    metric: str,
    cells: Sequence[tuple[PairedComparison, dict[int, float], float]],
    over_cells_var: float = math.nan,
    offset_estimate_var: float = math.nan,
) -> PairedChange | None:
    """One value over all the cells of a comparison (docs/method.md#over-all-the-runs-cells): each block's mean log
    ratio over the cells, equal weight per cell, then the block interval; the engine-instance offset allowance once
    (the same two engines served every cell), and for speed the one of a mean over cells (sigma_run² + sigma_cell² /
    cells: the cells average their own offsets) where the record holds it. Only blocks every cell has; None for a
    single cell or no common block."""
    if len(cells) < 2:
        return None
    per_cell = max(v for *_, v in cells)
    speed = CHANGE_METRICS.get(metric, (None, False, SPEED_OFFSET))[2] == SPEED_OFFSET
    allowance = over_cells_var if speed and per_cell > 0 and math.isfinite(over_cells_var) else per_cell
    pooled = over_cells_logs([logs for _, logs, _ in cells])
    if not pooled:
        return None
    orders = [c.order_a_first for c, _, _ in cells]
    a_first = {b: orders[0][b] for b in pooled if all(b in o and o[b] == orders[0][b] for o in orders)}
    used = min(allowance, per_cell)
    estimate = offset_estimate_var * used / per_cell if speed and per_cell > 0 else math.nan  # its share of the limit
    return _interval(cells[0][0], metric, pooled, used, a_first, (ALL_CELLS, ALL_CELLS), estimate)


def over_cells_logs(cells: Sequence[Mapping[int, float]]) -> dict[int, float]:
    """Block -> the mean log ratio over the cells, for the blocks every cell has a finite value in: the block values
    of a change over all cells (a shock shared by a block's cells stays in its block, so the interval sees it)."""
    common = set.intersection(*({b for b, v in logs.items() if math.isfinite(v)} for logs in cells)) if cells else set()
    return {b: float(np.mean([logs[b] for logs in cells])) for b in sorted(common)}
