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


def test_a_gpu_without_its_own_record_gets_a_stated_conservative_allowance() -> None:
    """Issue 35: every GPU was judged with the H200's record. An H100 (no A/A record of its own) gets twice the largest
    recorded GPU upper limit, the band that follows from it, and a source that says so; the H200 keeps its own."""
    from specharness.experiment.bands import band_for, band_from_offset, machine_kind

    h200, h100 = {"gpus": ["NVIDIA H200"]}, {"gpus": ["NVIDIA H100 80GB HBM3"]}
    assert machine_kind(h200) == "h200" and machine_kind(h100) == "gpu:NVIDIA H100 80GB HBM3"
    for other in ("NVIDIA H200 NVL", "NVIDIA GH200 480GB"):  # other parts, not the recorded H200
        assert machine_kind({"gpus": [other]}) == f"gpu:{other}"
    assert band_for(h200) is BANDS["h200"] and band_for({}) is BANDS["cpu"]
    own = band_for(h100)
    assert own.offset_sd_upper == 2 * BANDS["h200"].offset_sd_upper and own.aa_runs == 0
    assert own.margin == band_from_offset(own.offset_sd_upper) > BANDS["h200"].margin
    assert "no A/A record for this GPU (NVIDIA H100 80GB HBM3)" in own.source and "H200 A/A" not in own.source
