"""The engine-instance offset from an A/A record (reporting.aa_scorecard.offset_evidence) and the band from it."""

import math

import numpy as np
from scipy import stats as sps

from specharness.experiment.bands import BANDS
from specharness.reporting.aa_scorecard import ControlCell, offset_evidence


def aa_record(runs: int, tau: float, se: float, rng: np.random.Generator, cells: int = 4) -> list[ControlCell]:
    """Stand-in A/A cells: one offset per run (sd ``tau``), each cell's estimate around it with standard error ``se``
    (4 blocks, df 3)."""
    t = float(sps.t.ppf(0.975, 3))
    out = []
    for r in range(runs):
        offset = rng.normal(0, tau)
        for c in range(cells):
            est = math.exp(offset + rng.normal(0, se))
            out.append(
                ControlCell(
                    f"run{r}",
                    "w",
                    c,
                    "baseline-b",
                    est,
                    est * math.exp(-t * se),
                    est * math.exp(t * se),
                    "inconclusive",
                    "holds",
                    4,
                    df=3,
                )
            )
    return out


def test_upper_limit_covers_the_true_offset_spread_at_least_95_percent() -> None:
    rng = np.random.default_rng(20)
    tau = 0.05
    hits = [offset_evidence(aa_record(3, tau, 0.03, rng)).sd_upper >= tau for _ in range(400)]
    assert np.mean(hits) >= 0.93


def test_the_point_estimate_alone_would_not_cover() -> None:
    """The wrong method (the point estimate of the spread, as the band used before): it falls under the true spread
    in far more than 5% of records of 3 runs."""
    rng = np.random.default_rng(21)
    tau = 0.05
    under = [offset_evidence(aa_record(3, tau, 0.03, rng)).sd < tau for _ in range(400)]
    assert np.mean(under) > 0.3


def test_few_runs_give_a_wide_band_and_many_a_narrow_one() -> None:
    rng = np.random.default_rng(22)
    few, many = offset_evidence(aa_record(3, 0.0, 0.03, rng)), offset_evidence(aa_record(30, 0.0, 0.03, rng))
    assert few.sd_upper > many.sd_upper and few.margin >= many.margin >= 0.10
    assert math.isnan(offset_evidence(aa_record(1, 0.0, 0.03, rng)).sd_upper)


def test_machine_bands_follow_their_recorded_upper_limit() -> None:
    for band in BANDS.values():
        assert band.margin == max(0.10, math.ceil((math.exp(1.96 * band.offset_sd_upper) - 1) * 100 - 1e-9) / 100)
