"""Faults on the real engine: a server SIGKILLed mid-cell, resume, and SIGTERM / SIGINT during a run.

The crashed run and the SIGTERM run own their engines (stopping them is what they test); the SIGINT run takes the
session's pooled engines and must let them go alive (an interrupted run must not take a shared engine down, nor keep
holding it). They are launched in the background (conftest's :class:`~tests.engine.conftest.BackgroundRun`) so their
engine starts overlap other work: the crashed run with the ASV smoke module, the SIGTERM run with this module, while
the resume and the SIGINT run drive the pooled engines; each is a ``specharness run`` of its own,
killed or signalled and checked on its own.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from specharness.engines.pool import EnginePool
from specharness.engines.server import group_alive
from specharness.experiment.journal import read_journal
from specharness.records import SegmentEndEvent

from .conftest import (
    FAULT_RUN,
    BackgroundRun,
    assert_no_engine_left,
    assert_pooled_and_released,
    cli,
    journal_lines,
    signal_mid_run,
    start_cli,
    wait_for,
)

pytestmark = pytest.mark.engine


def test_engine_killed_mid_cell_then_resume(crashed_run: BackgroundRun, pooled_env: dict[str, str]) -> None:
    """The crashed run owns its engines (one is killed: conftest's ``crash_ngram_mid_cell``, in the background since
    the ASV smoke module began); the resume takes its engines from the session's pool (the resume path is what is tested
    here, and a start is a start)."""
    out = crashed_run.out
    returncode, stderr = crashed_run.result()
    assert returncode == 2, stderr
    assert "engine died" in stderr or "stopped answering" in stderr, stderr
    assert "--resume" in stderr
    assert_no_engine_left(out)

    contents = read_journal(out / "journal.jsonl")
    bad = [c for c in contents.cells if not c.valid]
    assert len(bad) == 1 and bad[0].arm == "ngram" and bad[0].block == 0
    assert "killed by SIGKILL" in bad[0].invalid_reason, bad[0].invalid_reason
    cell_requests = [r for r in contents.requests if r.cell == bad[0].cell]
    completed = [r for r in cell_requests if r.error_kind is None]
    failed = [r for r in cell_requests if r.error_kind is not None]
    assert len(completed) >= 2 and all(r.saw_done and r.completion_tokens for r in completed)
    assert failed and all(r.error_kind in ("connect", "stream_broken", "transport") and r.error for r in failed)
    assert len(cell_requests) == 6  # every request of the cell is journaled: done, failed in flight, or refused
    partial = orjson.loads((out / "report.json").read_bytes())
    assert partial["status"] == "engine-died" and partial["invalid_cells"]
    assert all(c["speed"]["verdict"] == c["quality"]["verdict"] == "invalid" for c in partial["comparisons"])
    lines_before = (out / "journal.jsonl").read_bytes()

    result = cli("run", "--resume", str(out), env=pooled_env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (out / "journal.jsonl").read_bytes().startswith(lines_before)  # nothing measured is lost or rewritten
    final = orjson.loads((out / "report.json").read_bytes())
    assert final["status"] == "complete" and not final["missing_cells"]
    assert "b0/copy/c1/ngram" in final["resumed_cells"] and "b0/copy/c1/baseline" not in final["resumed_cells"]
    assert all(c["speed"]["verdict"] != "invalid" for c in final["comparisons"])
    assert "Cells measured on resume" in (out / "report.md").read_text()
    resumed = read_journal(out / "journal.jsonl")
    baseline_b0 = [c for c in resumed.cells if c.cell.startswith("b0/copy/c1/baseline")]
    assert len(baseline_b0) == 1  # the completed cell was not repeated
    engines = [x for x in journal_lines(out) if x.get("kind") == "engine"]
    owned = [e["pid"] for e in engines if not e.get("reused")]
    pooled = [e for e in engines if e.get("reused")]
    assert len(owned) == 2 and not any(group_alive(pid) for pid in owned)
    assert sorted(e["arm"] for e in pooled) == ["baseline", "ngram"]
    assert all("--- the pooled engine's log" in (out / e["log_path"]).read_text(errors="replace") for e in pooled)
    # the engines line says which were taken as they were (their start was another run's) and which it started
    assert "taking 2 engines (baseline, ngram) from the engine pool, starting any it lacks" in result.stderr
    (ready,) = [line for line in result.stderr.splitlines() if "engines ready:" in line]
    for e in pooled:
        arm = re.escape(e["arm"])
        said = (
            rf"{arm} reused from the engine pool \(started by" if e["reused"]["reused"] else rf"{arm} \d+ s \(pooled\)"
        )
        assert re.search(said, ready), (e["reused"], ready)


@pytest.fixture(scope="module")
def sigint_run(tmp_path_factory: pytest.TempPathFactory, pooled_env: dict[str, str]) -> Iterator[BackgroundRun]:
    """The SIGINT run, on the session's pooled engines (idle once the resume above is done)."""
    run = BackgroundRun(
        tmp_path_factory.mktemp("sigint") / "SIGINT", FAULT_RUN, signal_mid_run(signal.SIGINT), pooled_env
    )
    try:
        yield run
    finally:
        run.stop()


def _check_partial(out: Path) -> None:
    contents = read_journal(out / "journal.jsonl")  # readable, nothing torn
    assert not contents.torn_lines and contents.requests
    assert any(e.status == "interrupted" for e in contents.events_of(SegmentEndEvent))
    assert "PARTIAL REPORT" in (out / "report.md").read_text()


def test_sigint_mid_run_lets_its_pooled_engines_go_alive_and_writes_a_partial_report(
    sigint_run: BackgroundRun, engine_pool: EnginePool
) -> None:
    """Interrupted on pooled engines: they are released (their logs copied into the run folder) and still serve, for
    the next run."""
    out = sigint_run.out
    returncode, stderr = sigint_run.result()
    assert returncode == 130, stderr
    assert_pooled_and_released(out)
    used = {e["reused"]["lease"]: e["arm"] for e in journal_lines(out) if e.get("kind") == "engine"}
    leases = [lease for lease in engine_pool.leases() if lease.key_hash in used and lease.state == "ready"]
    assert sorted(lease.arm for lease in leases) == sorted(used.values()) == ["baseline", "ngram"], leases
    for lease in leases:
        assert group_alive(lease.pid), f"the pooled {lease.arm} server died with the interrupted run"
        assert httpx.get(f"{lease.url}/health", timeout=10).status_code == 200
    _check_partial(out)


def test_sigterm_mid_run_stops_its_engines_and_writes_a_partial_report(sigterm_run: BackgroundRun) -> None:
    """The SIGTERM run (conftest's ``sigterm_run``, launched with this module; checked after the SIGINT run, whose
    pooled engines answer while its own start) owns its engines: both are stopped."""
    returncode, stderr = sigterm_run.result()
    assert returncode == 130, stderr
    assert_no_engine_left(sigterm_run.out)
    _check_partial(sigterm_run.out)


def test_sigint_while_engines_start_leaves_nothing_behind(tmp_path: Path) -> None:
    out = tmp_path / "int"
    proc = start_cli("run", *FAULT_RUN, "--out", str(out))
    log = out / "logs" / "baseline.s0.log"
    wait_for(lambda: log.is_file() and log.stat().st_size > 0, proc, "the baseline server to start logging")
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["status"] == "interrupted"
    assert (out / "report.md").is_file()
    # the server never became ready; its pid was journaled the moment it was spawned
    assert_no_engine_left(out)
