"""The controls' scorecard over SYNTHETIC run folders (specharness.experiment.synthetic; no engine)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from specharness._errors import RunDirError
from specharness.experiment.synthetic import write_synthetic_run
from specharness.reporting.aa_scorecard import ControlCell, instance_offset_sd, score_control_runs, suggest_margin


def cell(estimate: float, low: float, high: float, speed: str, quality: str = "holds", run: str = "r") -> ControlCell:
    return ControlCell(run, "copy", 1, "baseline-b", estimate, low, high, speed, quality, 4, df=3)


def test_only_helps_hurts_and_quality_fails_are_false_for_identical_engines() -> None:
    verdicts = ["equivalent", "inconclusive", "not comparable", "helps", "hurts"]
    assert [cell(1.0, 0.9, 1.1, v).false_verdict for v in verdicts] == [False, False, False, True, True]
    assert cell(1.0, 0.95, 1.05, "equivalent", "fails").false_verdict
    assert cell(1.0, 0.8, 1.25, "inconclusive").width == pytest.approx(1.5625)


def test_suggested_margin_covers_offsets_between_runs_beyond_their_noise() -> None:
    # one engine pair per run: tight cells, runs whose means spread; the spread is instance offsets
    spread = [0.90, 0.95, 1.0, 1.05, 1.10, 0.92, 1.08, 1.0]
    tight = [
        cell(e * f, e * f / 1.005, e * f * 1.005, "equivalent", run=f"run{i}")
        for i, e in enumerate(spread)
        for f in (0.999, 1.001)
    ]
    tau = float(np.std(np.log(spread), ddof=1))
    assert instance_offset_sd(tight) == pytest.approx(tau, rel=0.02)
    assert suggest_margin(tight) == math.ceil((math.exp(1.96 * tau) - 1) * 100) / 100
    # the same run means with wide intervals: their spread is what their own noise predicts: only the floor remains
    wide = [cell(e, e / 1.6, e * 1.6, "inconclusive", run=f"run{i}") for i, e in enumerate(spread)]
    assert instance_offset_sd(wide) == 0.0 and suggest_margin(wide) == 0.05
    # cells of one run are one draw of the offset: their spread is no evidence of offsets between engine pairs
    assert math.isnan(suggest_margin([cell(e, e / 1.005, e * 1.005, "equivalent") for e in spread]))


def test_scores_both_controls_of_every_run(tmp_path: Path) -> None:
    runs = [write_synthetic_run(tmp_path / f"c{i}", records=720, seed=i, profile_name="control") for i in range(2)]
    score = score_control_runs(runs)
    # the control profile: 2 workloads x 2 client counts, two control comparisons each
    assert len(score.aa) == 8 and len(score.known) == 8 and {c.run for c in score.cells} == {"c0", "c1"}
    equivalent, inconclusive = score.count("equivalent"), score.count("inconclusive")
    assert equivalent + inconclusive == 8 and equivalent >= 1 and score.false_verdicts == 0
    assert score.detected == 8 and score.known_slowdown == 1.25
    text = score.to_markdown()
    assert f"equivalent {equivalent}, inconclusive {inconclusive}" in text and "detected as hurts in 8 of 8" in text


def test_refuses_a_run_without_a_control(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "ab", records=200)
    with pytest.raises(RunDirError, match="no control pair"):
        score_control_runs([run])
