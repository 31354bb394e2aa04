"""One rule names every machine series (history/asv/series.py): each committed series is the name its own
machine.json gives, this kind of machine continues its series, and an older series says what supersedes it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specharness.history.asv.machine import machine_info, register_machine
from specharness.history.asv.series import RECORDED, SUPERSEDED, cpu_kind, gpu_kind, series_name

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
ZEN4 = {"cpu": "AMD EPYC (family 25 model 17 stepping 1)", "num_cpu": "2", "gpu": "none"}


@pytest.mark.parametrize("machine_json", sorted(RESULTS.glob("*/machine.json")), ids=lambda p: p.parent.name)
def test_every_committed_series_is_named_by_the_rule(machine_json: Path) -> None:
    entry = json.loads(machine_json.read_text())
    assert series_name(entry) == machine_json.parent.name == entry["machine"]


def test_a_2core_zen4_continues_the_committed_series() -> None:
    """`specharness machine` on this kind of machine named it cpu-2core-amd-epyc-family-25-model-17-stepping-1."""
    assert series_name(ZEN4) == "cpu-2core-epyc-zen4"
    assert series_name({**ZEN4, "cpu": "AMD EPYC 9R14 (family 25 model 17 stepping 1)"}) == "cpu-2core-epyc-zen4"
    assert series_name({**ZEN4, "num_cpu": "4"}) == "cpu-4core-epyc-zen4"  # another kind: its own series
    assert series_name({**ZEN4, "cpu": "AMD EPYC (family 25 model 1 stepping 1)"}) == "cpu-2core-epyc-zen3"


def test_kinds_from_family_and_model() -> None:
    assert cpu_kind("Intel(R) Xeon(R) Processor (family 6 model 207 stepping 2)") == "xeon207"
    assert cpu_kind("Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz (family 6 model 158 stepping 10)") == (
        "intel-core-i7-8700-f6m158"
    )
    assert gpu_kind(["NVIDIA H100 80GB HBM3"]) == "h100" and gpu_kind(["NVIDIA H200"] * 4) == "4xh200"
    h100 = {"cpu": "Intel(R) Xeon(R) Processor (family 6 model 207 stepping 2)", "gpu": "NVIDIA H100 80GB HBM3"}
    assert series_name(h100) == "h100-xeon207"


def test_this_machine_registers_under_the_rule(tmp_path: Path) -> None:
    info = register_machine(path=tmp_path / "asv-machine.json", results_dir=tmp_path / "results")
    assert info["machine"] == series_name(machine_info())


def test_recorded_and_superseded_series_exist() -> None:
    committed = {p.name for p in RESULTS.iterdir() if p.is_dir()}
    assert set(RECORDED.values()) <= committed
    for old, new in SUPERSEDED.items():
        assert old in committed and new.by in committed and new.by not in SUPERSEDED


def test_a_command_naming_an_older_series_says_so() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "specharness", "release-compare", "vllm-0.24.0", "vllm-0.26.0", "--machine", "h100"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "series h100 is superseded by h100-xeon207" in proc.stderr
    current = subprocess.run(
        [
            sys.executable,
            "-m",
            "specharness",
            "release-compare",
            "vllm-0.24.0",
            "vllm-0.26.0",
            "--machine",
            "h100-xeon207",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert current.returncode == 0 and "superseded" not in current.stderr


def test_the_site_index_marks_the_superseded_series_and_lists_it_last() -> None:
    index = (ROOT / "html/index.html").read_text()
    for old, new in SUPERSEDED.items():
        assert f"superseded by <a href='{new.by}/releases.html'>{new.by}</a>" in index
        assert index.index(f"data-machine='{new.by}'") < index.index(f"data-machine='{old}'")
