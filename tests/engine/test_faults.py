"""Faults on the real engine: a server SIGKILLed mid-cell, resume, and SIGTERM / SIGINT during a run.

The runs that are killed or signalled own their engines. They are launched in the background (conftest's
:class:`~tests.engine.conftest.BackgroundRun`) so their engine starts overlap other work: the crashed run with the
ASV smoke module, the two signalled runs together (:func:`signalled_runs`), each still a ``specharness run`` of its
own, signalled and checked exactly as when they ran one after the other.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

from specharness.engines.server import group_alive
from specharness.experiment.journal import read_journal
from specharness.records import SegmentEndEvent

from .conftest import (
    FAULT_RUN,
    BackgroundRun,
    assert_no_engine_left,
    cli,
    journal_lines,
    measured,
    own_env,
    spare_core_env,
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


def signal_mid_run(signum: signal.Signals) -> Callable[[subprocess.Popen[str], Path], tuple[int, str]]:
    """Send ``signum`` to the harness once the first measured answer is journaled; collect its exit."""

    def drive(proc: subprocess.Popen[str], out: Path) -> tuple[int, str]:
        wait_for(lambda: len(measured(out, "baseline")) >= 1, proc, "the first measured answer")
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=300)
        return proc.returncode, stderr

    return drive


@pytest.fixture(scope="module")
def signalled_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[signal.Signals, BackgroundRun]]:
    """The SIGTERM run and the SIGINT run, launched together: two ``specharness run`` processes, each with its own
    two engines (SIGTERM's on vLLM's default cores, SIGINT's on the spare core), each signalled on its own. Only
    the runs of the selected tests are launched."""
    selected = {
        callspec.params.get("signum")
        for item in request.session.items
        if item.path == request.path and (callspec := getattr(item, "callspec", None)) is not None
    }
    where = tmp_path_factory.mktemp("signalled")
    runs = {
        signum: BackgroundRun(where / signum.name, FAULT_RUN, signal_mid_run(signum), env)
        for signum, env in ((signal.SIGTERM, own_env()), (signal.SIGINT, spare_core_env()))
        if signum in selected
    }
    try:
        yield runs
    finally:
        for run in runs.values():
            run.stop()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_mid_run_stops_engines_and_writes_a_partial_report(
    signalled_runs: dict[signal.Signals, BackgroundRun], signum: signal.Signals
) -> None:
    out = signalled_runs[signum].out
    returncode, stderr = signalled_runs[signum].result()
    assert returncode == 130, stderr
    assert_no_engine_left(out)
    contents = read_journal(out / "journal.jsonl")  # readable, nothing torn
    assert not contents.torn_lines and contents.requests
    assert any(e.status == "interrupted" for e in contents.events_of(SegmentEndEvent))
    assert "PARTIAL REPORT" in (out / "report.md").read_text()


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
