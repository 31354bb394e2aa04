"""--until-decided and the known-effect arm on the real CPU engine (the real default model)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from specharness.engines.pool import EnginePool
from specharness.experiment.journal import read_journal

from .conftest import (
    ENGINE_ARGS,
    assert_pooled_and_released,
    cli,
    journal_lines,
    stop_engines_started_by,
    wait_for_background_runs,
)

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def sequential_run(
    tmp_path_factory: pytest.TempPathFactory, pooled_env: dict[str, str], engine_pool: EnginePool
) -> Iterator[Path]:
    """Started once no background run is left: the known slowdown is measured on a machine that runs nothing else,
    and the extra baseline it starts is never a fifth engine; that engine is stopped once the module is done (only
    this run needs it), before the fault module starts engines of its own."""
    wait_for_background_runs()
    out = tmp_path_factory.mktemp("until") / "run"
    result = cli(
        "run",
        *ENGINE_ARGS,
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
        env=pooled_env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    yield out
    stop_engines_started_by(out, engine_pool)


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


def test_the_sequential_run_took_two_distinct_pooled_engines_and_released_them(sequential_run: Path) -> None:
    """baseline and baseline-slow run the same engine options; they must still be two engines (an A/A pair on one
    engine would measure nothing), both from the session's pool, released at the end."""
    assert_pooled_and_released(sequential_run)
    pids = {line["arm"]: line["pid"] for line in journal_lines(sequential_run) if line.get("kind") == "engine"}
    assert set(pids) == {"baseline", "baseline-slow"} and len(set(pids.values())) == 2, pids
