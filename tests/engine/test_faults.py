"""Faults on the real engine: a server SIGKILLed mid-cell, resume, and SIGTERM / SIGINT during a run."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import orjson
import pytest

from specharness.engines.server import group_alive
from specharness.experiment.journal import read_journal
from specharness.records import SegmentEndEvent

from .conftest import assert_no_engine_left, cli, journal_lines, start_cli, wait_for

pytestmark = pytest.mark.engine

FAULT_RUN = [
    "--workloads",
    "copy",
    "--clients",
    "1",
    "--blocks",
    "2",
    "--requests",
    "6",
    "--warmups",
    "0",
    "--max-tokens-cap",
    "64",
    "--no-progress",
]


def measured(run_dir: Path, arm: str) -> list[dict]:
    return [x for x in journal_lines(run_dir) if x.get("kind") == "request" and x["arm"] == arm and not x["warmup"]]


def test_engine_killed_mid_cell_then_resume(tmp_path: Path, pooled_env: dict[str, str]) -> None:
    """The crashed run owns its engines (one is killed); the resume takes its engines from the session's pool (the
    resume path is what is tested here, and a start is a start)."""
    out = tmp_path / "crash"
    proc = start_cli("run", *FAULT_RUN, "--out", str(out))
    # block 0 runs baseline then ngram; kill ngram once it has answered two requests of its first cell
    wait_for(lambda: len(measured(out, "ngram")) >= 2, proc, "ngram's first answers")
    ngram_pid = next(x["pid"] for x in journal_lines(out) if x.get("kind") == "engine" and x["arm"] == "ngram")
    os.kill(ngram_pid, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 2, stderr
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


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_mid_run_stops_engines_and_writes_a_partial_report(tmp_path: Path, signum: signal.Signals) -> None:
    out = tmp_path / "term"
    proc = start_cli("run", *FAULT_RUN, "--out", str(out))
    wait_for(lambda: len(measured(out, "baseline")) >= 1, proc, "the first measured answer")
    proc.send_signal(signum)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
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
