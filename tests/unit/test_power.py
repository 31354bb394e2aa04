"""The smallest change a pair can call (analysis/changes.py, detectable_ratio), issue 49 item 3.4: its power is the
chance of a call when the estimate varies by what it truly varies by (its blocks and the offset at its point
estimate), while the interval it must clear carries the allowance (the offset's upper limit). Simulated."""

from __future__ import annotations

import math

import numpy as np

from specharness.analysis.changes import CHANGE_CONFIDENCE, detectable_ratio
from specharness.analysis.stats import block_ratio_interval
from specharness.analysis.verdict import RELEASE_FACTOR

BLOCK_SD, OFFSET_SD, ALLOWANCE_SD, BLOCKS = 0.01, 0.008, 0.02, 6


def _power(ratio: float, runs: int = 3000) -> float:
    """The share of pair runs whose 99% interval (blocks plus the allowance) excludes 1 and whose estimate lies
    beyond the release factor, at a true change of ``ratio`` and an engine offset of sd OFFSET_SD."""
    rng = np.random.default_rng(1)
    called = 0
    for _ in range(runs):
        logs = math.log(ratio) + rng.normal(0.0, OFFSET_SD) + rng.normal(0.0, BLOCK_SD, BLOCKS)
        r = block_ratio_interval(logs, None, CHANGE_CONFIDENCE, ALLOWANCE_SD**2)
        called += r.low > 1.0 and r.estimate > RELEASE_FACTOR
    return called / runs


def test_power_uses_the_offset_estimate_not_its_upper_limit() -> None:
    se_blocks2 = BLOCK_SD**2 / BLOCKS
    se = math.sqrt(se_blocks2 + ALLOWANCE_SD**2)
    spread = math.sqrt(se_blocks2 + OFFSET_SD**2)
    # the interval's own degrees of freedom with the allowance added (as the product's interval computes them)
    df = block_ratio_interval(np.linspace(-BLOCK_SD, BLOCK_SD, BLOCKS), None, 0.99, ALLOWANCE_SD**2).t_df
    new = detectable_ratio(se, df, 0.80, spread)
    old = detectable_ratio(se, df, 0.80)
    assert new < old
    assert 0.72 <= _power(new) <= 0.9
    assert _power(old) >= 0.9  # the rule before overstated the smallest callable change
    assert detectable_ratio(se, df, 0.80, math.nan) == old
