"""ASV on the real CPU engine: ``asv check`` and a smoke ``asv run`` of one benchmark in this environment."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def asv(*args: str, env: dict[str, str] | None = None, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "asv", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout_s, env=env)  # fmt: skip


def test_asv_check_finds_no_problems() -> None:
    result = asv("check", "-E", f"existing:{sys.executable}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No problems found" in result.stdout


def test_asv_smoke_run_reports_a_slowdown_from_real_engines(tmp_path: Path) -> None:
    env = {**os.environ, "SPECHARNESS_ASV_PROFILE": "smoke", "SPECHARNESS_ASV_RUNS": str(tmp_path)}
    assert asv("machine", "--yes", "--machine", "ci-smoke").returncode == 0  # registers this host non-interactively
    result = asv("run", "-E", f"existing:{sys.executable}", "--bench", r"PairedNgram\.track_slowdown(?!_)",
                 "--quick", "--dry-run", "--show-stderr", "--machine", "ci-smoke", env=env, timeout_s=1500)  # fmt: skip
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    assert "track_slowdown" in out and "failed" not in out.lower(), out[-4000:]
    # The parameter table ASV prints holds a number for the smoke cell (copy, 1 client).
    assert re.search(r"^\s*'?copy'?\s+\d+\.\d+", out, re.MULTILINE), out[-4000:]
    runs = list(tmp_path.glob("asv-paired-*/report.json"))
    assert len(runs) == 1, "setup_cache ran the paired experiment exactly once"
