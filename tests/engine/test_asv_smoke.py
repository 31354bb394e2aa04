"""ASV on the real CPU engine: ``asv check`` and a smoke ``asv run`` of one benchmark in this environment.

Both run against a copy of the repo's ``asv.conf.json`` whose output folders lie in the test's temp dir: ``asv run``
always rewrites ``benchmarks.json`` and the machine file in its results folder, and the committed ``results/`` must
stay as published (the site tests read it).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from asv.util import load_json

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def asv_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repo's ASV config with results, html and env folders moved into a temp dir."""
    where = tmp_path_factory.mktemp("asv")
    conf = load_json(str(ROOT / "asv.conf.json"), js_comments=True)
    conf.update(repo=str(ROOT), benchmark_dir=str(ROOT / "benchmarks"), results_dir=str(where / "results"),
                html_dir=str(where / "html"), env_dir=str(where / "env"))  # fmt: skip
    path = where / "asv.conf.json"
    path.write_text(json.dumps(conf, indent=2))
    return path


def asv(config: Path, *args: str, env: dict[str, str] | None = None,
        timeout_s: float = 600) -> subprocess.CompletedProcess[str]:  # fmt: skip
    command = [sys.executable, "-m", "asv", args[0], "--config", str(config), *args[1:]]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s, env=env)


def committed_results_changes() -> str:
    status = subprocess.run(["git", "status", "--porcelain", "--", "results"], cwd=ROOT, capture_output=True,
                            text=True, check=True)  # fmt: skip
    return status.stdout.strip()


def test_asv_check_finds_no_problems(asv_config: Path) -> None:
    result = asv(asv_config, "check", "-E", f"existing:{sys.executable}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No problems found" in result.stdout


def test_asv_smoke_run_reports_a_slowdown_from_real_engines(asv_config: Path, tmp_path: Path) -> None:
    before = committed_results_changes()
    env = {**os.environ, "SPECHARNESS_ASV_PROFILE": "smoke", "SPECHARNESS_ASV_RUNS": str(tmp_path)}
    assert asv(asv_config, "machine", "--yes", "--machine", "ci-smoke").returncode == 0  # registers this host
    result = asv(asv_config, "run", "-E", f"existing:{sys.executable}", "--bench", r"PairedNgram\.track_slowdown(?!_)",
                 "--quick", "--dry-run", "--show-stderr", "--machine", "ci-smoke", env=env, timeout_s=1500)  # fmt: skip
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    assert "track_slowdown" in out and "failed" not in out.lower(), out[-4000:]
    # The parameter table ASV prints holds a number for the smoke cell (copy, 1 client).
    assert re.search(r"^\s*'?copy'?\s+\d+\.\d+", out, re.MULTILINE), out[-4000:]
    runs = list(tmp_path.glob("asv-paired-*/report.json"))
    assert len(runs) == 1, "setup_cache ran the paired experiment exactly once"
    assert committed_results_changes() == before, "the smoke run must not touch the committed results/"
