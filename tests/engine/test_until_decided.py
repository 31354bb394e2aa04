"""--until-decided and the known-effect arm on the real CPU engine (the real default model)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from specharness.experiment.journal import read_journal

from .conftest import assert_no_engine_left, cli, journal_lines

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def sequential_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("until") / "run"
    result = cli(
        "run",
        "--arms",
        "baseline,baseline-slow",
        "--workloads",
        "copy",
        "--clients",
        "1",
        "--blocks",
        "2",
        "--requests",
        "2",
        "--warmups",
        "1",
        "--max-tokens-cap",
        "24",
        "--until-decided",
        "--max-blocks",
        "4",
        "--no-progress",
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def test_looks_are_journaled_and_blocks_are_added_only_while_undecided(sequential_run: Path) -> None:
    looks = [line for line in journal_lines(sequential_run) if line.get("kind") == "look"]
    assert looks and looks[0]["blocks"] == 2
    blocks = {c.block for c in read_journal(sequential_run / "journal.jsonl").cells}
    report = orjson.loads((sequential_run / "report.json").read_bytes())
    (comp,) = report["comparisons"]
    if looks[0]["undecided"]:  # 2 blocks of 2 requests rarely decide: a pair of blocks was added, then looked at
        assert blocks == {0, 1, 2, 3} and len(looks) == 2 and comp["speedup"]["blocks"] == 4
    else:
        assert blocks == {0, 1} and comp["speedup"]["blocks"] == 2
    # 2 possible looks (after 2 blocks, after 4): each at a Bonferroni share of the 5%
    assert comp["speedup"]["confidence"] == pytest.approx(1 - 0.05 / 2)


def test_the_known_slowdown_shows_up_as_a_ratio_below_one(sequential_run: Path) -> None:
    report = orjson.loads((sequential_run / "report.json").read_bytes())
    (comp,) = report["comparisons"]
    assert comp["arm_b"] == "baseline-slow"
    # identical engines, every recorded time of baseline-slow x1.25: the estimate is 0.80 times the twins' own ratio
    assert 0.6 < comp["speedup"]["estimate"] < 1.0
    slow = [
        r for r in read_journal(sequential_run / "journal.jsonl").requests if r.arm == "baseline-slow" and not r.warmup
    ]
    assert all(r.chunk_arrival_s[-1] <= r.e2e_s for r in slow)


def test_no_engine_outlives_the_sequential_run(sequential_run: Path) -> None:
    assert_no_engine_left(sequential_run)
