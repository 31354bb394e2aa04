"""Engine instances as replicates on the real CPU engine and the real default model: every arm's engine is started
afresh for each instance, its cells journaled with the instance, and the interval comes from the instances."""

from __future__ import annotations

from pathlib import Path

import pytest

from specharness.experiment.journal import read_journal

from .conftest import ENGINE_ARGS, assert_no_engine_left, cli, wait_for_background_runs

pytestmark = pytest.mark.engine


def test_each_instance_starts_fresh_engines_and_the_interval_is_over_instances(tmp_path: Path) -> None:
    wait_for_background_runs()  # its own engines (a renewed engine is never pooled): none beside them
    out = tmp_path / "run"
    result = cli(
        "run",
        *ENGINE_ARGS,
        "--workloads",
        "copy",
        "--clients",
        "1",
        "--blocks",
        "2",
        "--instances",
        "2",
        "--requests",
        "2",
        "--warmups",
        "0",
        "--max-tokens-cap",
        "16",
        "--no-progress",
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "instance 2 of 2" in result.stderr
    journal = read_journal(out / "journal.jsonl")
    assert {(c.arm, c.block, c.instance) for c in journal.cells} == {
        (arm, block, block) for arm in ("baseline", "ngram") for block in (0, 1)
    }
    engines = {(e.arm, e.instance): e.pid for e in journal.engines}
    assert set(engines) == {(arm, i) for arm in ("baseline", "ngram") for i in (0, 1)}
    assert engines[("baseline", 0)] != engines[("baseline", 1)]  # a fresh process, not the same engine again
    assert (out / "logs" / "baseline.s0.log").is_file() and (out / "logs" / "baseline.s0.i1.log").is_file()
    report = (out / "report.md").read_text()
    assert "Every interval is over the run's 2 engine instances: none added" in report
    assert "CI by Student t over the instances' mean log ratios (2 − 1 degrees of freedom)" in report
    assert_no_engine_left(out)
