"""The A/A scorecard over SYNTHETIC run folders (specharness.experiment.synthetic; no engine): counting and refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from specharness._errors import RunDirError
from specharness.experiment.synthetic import write_synthetic_run
from specharness.reporting.aa_scorecard import AACell, score_aa_runs


def test_only_inconclusive_counts_as_right_for_identical_engines() -> None:
    cells = [AACell("r", "copy", 1, 1.0, 0.95, 1.05, v) for v in ("inconclusive", "helps", "hurts", "fails quality")]
    assert [c.false_verdict for c in cells] == [False, True, True, True]
    assert AACell("r", "copy", 1, 1.06, 1.01, 1.09, "inconclusive").ci_excludes_one
    assert not AACell("r", "copy", 1, 1.0, 0.99, 1.01, "inconclusive").ci_excludes_one


def test_scores_every_cell_of_every_run(tmp_path: Path) -> None:
    runs = [write_synthetic_run(tmp_path / f"aa{i}", records=400, seed=i, profile_name="aa") for i in range(2)]
    score = score_aa_runs(runs)
    # the aa profile: 2 workloads x 2 client counts = 4 comparison cells a run
    assert len(score.cells) == 8 and {c.run for c in score.cells} == {"aa0", "aa1"}
    assert score.false_verdicts == sum(c.verdict != "inconclusive" for c in score.cells)
    text = score.to_markdown()
    assert text.count("\n| aa") == 8 and f"{score.false_verdicts} of 8 cells" in text


def test_refuses_a_run_that_is_not_a_and_a(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "ab", records=200)
    with pytest.raises(RunDirError, match="not an A/A pair"):
        score_aa_runs([run])
