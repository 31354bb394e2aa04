"""The change over all of a run's cells (analysis/changes.py), simulated against what breaks a pooled interval: a
shock every cell of a block shares, cell effects that differ, an order effect and an engine-instance offset; and
read from a committed control run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from specharness.analysis.analyse import analyse
from specharness.analysis.changes import ALL_CELLS, CHANGE_CONFIDENCE, over_cells_logs
from specharness.analysis.stats import block_ratio_interval, t_quantile

ROOT = Path(__file__).resolve().parents[2]
SIGNS = [1, -1, -1, 1, 1, -1]  # six mirrored blocks, as the release profile runs them
OFFSET_SD, ALLOWANCE_SD = 0.011, 0.022  # the CPU's measured twin offset and its recorded allowance


def _world(
    rng: np.random.Generator, effect: float, shared_sd: float, offset_sd: float
) -> tuple[list[dict[int, float]], float]:
    """One run's block log ratios for 4 cells (B over A) and the true change over the cells (log)."""
    cells = 4
    mu = math.log(effect) + rng.normal(0.0, 0.03, cells)  # the cells' own changes differ
    offset = rng.normal(0.0, offset_sd)  # one pair of engines serves every cell
    shock = rng.normal(0.0, shared_sd, len(SIGNS))  # what a block's cells share (drift, a busy moment)
    logs = [
        {b: float(mu[c] + offset + shock[b] + 0.02 * s + rng.normal(0.0, 0.04)) for b, s in enumerate(SIGNS)}
        for c in range(cells)
    ]
    return logs, float(mu.mean())


def _study(effect: float, shared_sd: float, offset_sd: float = OFFSET_SD, runs: int = 400) -> dict[str, float]:
    rng = np.random.default_rng(7)
    covered = naive_covered = called = cell_called = 0
    cell_total = 0
    for _ in range(runs):
        logs, truth = _world(rng, effect, shared_sd, offset_sd)
        pooled = over_cells_logs(logs)
        r = block_ratio_interval(list(pooled.values()), SIGNS, CHANGE_CONFIDENCE, ALLOWANCE_SD**2)
        covered += r.low <= math.exp(truth) <= r.high
        called += r.low > 1.0
        per_cell = [block_ratio_interval(list(c.values()), SIGNS, CHANGE_CONFIDENCE, ALLOWANCE_SD**2) for c in logs]
        cell_called += sum(c.low > 1.0 for c in per_cell)
        cell_total += len(per_cell)
        # the naive pooled interval: the cells' estimates as if independent, each with its own standard error
        est = float(np.mean([math.log(c.estimate) for c in per_cell]))
        se = math.sqrt(sum(c.se_log**2 for c in per_cell)) / len(per_cell)
        t = t_quantile(0.995, min(c.t_df for c in per_cell))
        naive_covered += est - t * se <= truth <= est + t * se
    return {
        "coverage": covered / runs,
        "naive_coverage": naive_covered / runs,
        "called": called / runs,
        "cell_called": cell_called / cell_total,
    }


def test_over_cells_logs_keeps_only_blocks_every_cell_has() -> None:
    logs = over_cells_logs([{0: 0.1, 1: 0.3, 2: math.nan}, {0: 0.3, 1: 0.1, 2: 0.2, 3: 0.0}])
    assert logs == pytest.approx({0: 0.2, 1: 0.2})
    assert over_cells_logs([]) == {}


def test_pooled_interval_holds_the_mean_change_where_shared_block_shocks_break_a_naive_pool() -> None:
    """Every cell of a block shares a shock of sd 0.1 and the engine offset is as large as the allowance (sd 0.022,
    the worst case it covers): the pooled interval, made from each block's mean over the cells with the allowance
    once, keeps its 99% coverage of the mean change (0.9825 in 400 runs); pooling the cells' intervals as if they
    were independent, each with its own share of the allowance, does not (0.9275)."""
    found = _study(effect=1.0, shared_sd=0.1, offset_sd=ALLOWANCE_SD)
    assert found["coverage"] >= 0.975
    assert found["naive_coverage"] <= 0.94
    assert found["called"] <= 0.02  # no change: almost never called


def test_pooled_interval_calls_a_common_ten_percent_slowdown_more_often_than_one_cell() -> None:
    """A ×1.10 change shared by the cells (each cell's own ±3%): called in 94% of runs over all cells, in 65% of
    single cells."""
    found = _study(effect=1.10, shared_sd=0.01)
    assert found["coverage"] >= 0.97
    assert found["called"] > found["cell_called"] + 0.15


def test_a_control_run_carries_the_change_over_all_its_cells() -> None:
    """In a committed control run, each pair's change over all cells is the block interval of the cells' mean block
    log ratios, with the offset allowance of a mean over cells: the record's over-cells limit (issue 49, item 3.2),
    below the per-cell one the cells carry."""
    run = ROOT / "reports/cpu-release-controls/20261206/run1"
    a = analyse(run, json.loads((run / "manifest.json").read_text()))
    pooled = {(c.arm_b, c.metric): c for c in a.changes if c.workload == ALL_CELLS}
    cells = [c for c in a.changes if c.workload != ALL_CELLS and c.arm_b == "aa" and c.metric == "tpot_p50"]
    assert len(cells) == 4 and ("aa", "tpot_p50") in pooled
    mean_logs = np.mean([np.log(c.block_values) for c in cells], axis=0)
    got = pooled[("aa", "tpot_p50")]
    assert got.block_values == pytest.approx(tuple(np.exp(mean_logs)))
    assert got.blocks == 6 and got.confidence == CHANGE_CONFIDENCE
    assert math.log(got.estimate) == pytest.approx(float(mean_logs.mean()), abs=1e-9)
    comparison = next(c for c in a.comparisons if c.arm_b == "aa")
    signs = [1 if comparison.order_a_first[b] else -1 for b in sorted(comparison.order_a_first)]
    offset_var = a.rules.over_cells_var
    assert 0 < offset_var < comparison.speedup.offset_var  # the machine's over-cells allowance, once
    want = block_ratio_interval(list(mean_logs), signs, CHANGE_CONFIDENCE, offset_var)
    assert (got.low, got.high, got.se_log) == pytest.approx((want.low, want.high, want.se_log), rel=1e-9)
    assert "order term" in got.method
    assert {m for b, m in pooled if b == "slow1.10"} >= {"time", "tpot_p50", "ttft_p50"}
