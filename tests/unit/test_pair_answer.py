"""A release pair's report.md opens with one line per compared pair (reporting/answer.py, ``pair_lines``), read from
two committed pair runs: one where nothing changed (0.31.0 -> 0.32.0) and one where an arm failed (0.29.0 -> 0.30.0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specharness.analysis.analyse import Analysis, analyse
from specharness.analysis.changes import ALL_CELLS, detectable_ratio
from specharness.analysis.verdict import pair_change
from specharness.reporting.answer import answer_lines
from specharness.reporting.convention import ratio, ratio_text

ROOT = Path(__file__).resolve().parents[2]
PAIRS = ROOT / "reports/cpu-release-pairs/20261207-interleaved"


@pytest.fixture(scope="module", params=["pair-vllm0.31.0-vllm0.32.0", "pair-vllm0.29.0-vllm0.30.0"])
def run(request: pytest.FixtureRequest) -> Analysis:
    folder = PAIRS / request.param
    return analyse(folder, json.loads((folder / "manifest.json").read_text()))


def _pair_bullets(lines: list[str]) -> list[str]:
    return [ln for ln in lines if ln.startswith("- **") and " over " in ln.split("**")[1]]


def test_one_line_per_compared_pair_before_the_cells(run: Analysis) -> None:
    lines = answer_lines(run)
    pairs = list(dict.fromkeys((c.arm_a, c.arm_b) for c in run.comparisons))
    bullets = _pair_bullets(lines)
    assert [b.split("**")[1] for b in bullets] == [f"{b} over {a}" for a, b in pairs]
    first_cell = next(i for i, ln in enumerate(lines) if ln.startswith("- **") and " vs " in ln)
    assert max(lines.index(b) for b in bullets) < first_cell


def test_each_line_says_the_verdict_the_values_give(run: Analysis) -> None:
    for line in _pair_bullets(answer_lines(run)):
        b, a = line.split("**")[1].split(" over ")
        if a in run.failed_arms or b in run.failed_arms:
            assert "**failed**" in line and next(x for x in (a, b) if x in run.failed_arms) + " did not start" in line
            continue
        values = [c for c in run.changes if (c.arm_a, c.arm_b) == (a, b)]
        called = [c for c in values if pair_change(c.estimate, c.low, c.high) in ("regressed", "improved")]
        overall = next(c for c in values if c.metric == "time" and c.workload == ALL_CELLS)
        assert f"time over all cells {ratio_text(overall.estimate, overall.low, overall.high)}" in line
        assert f"{len(called)} of {len(values)} values changed" in line
        if called:
            assert "**changed**" in line
        else:
            smallest = detectable_ratio(overall.se_log, overall.t_df)
            assert "**unchanged**" in line and f"no change larger than ×{ratio(smallest)} seen" in line


def test_the_failed_arm_and_the_unchanged_release() -> None:
    """The two answers a reviewer wants, as the lines say them."""
    folder = PAIRS / "pair-vllm0.31.0-vllm0.32.0"
    text = "\n".join(answer_lines(analyse(folder, json.loads((folder / "manifest.json").read_text()))))
    assert "- **baseline@0.32.0 over baseline@0.31.0**: **unchanged**: time over all cells ×" in text
    folder = PAIRS / "pair-vllm0.29.0-vllm0.30.0"
    text = "\n".join(answer_lines(analyse(folder, json.loads((folder / "manifest.json").read_text()))))
    assert "- **ngram@0.30.0 over ngram@0.29.0**: **failed**: ngram@0.30.0 did not start" in text
