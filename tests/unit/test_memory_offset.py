"""The peak-memory change between two arms carries the machine's engine-instance offset allowance for memory
(experiment.machine_record, reporting.aa_record.memory_offset, analysis.changes): simulated against what breaks a
zero-width interval (two engines whose resident memory differs by an offset that no block of one run can see), and
read from the committed runs."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import scipy.stats as sps

from specharness.analysis.analyse import analyse
from specharness.analysis.changes import ALL_CELLS, CHANGE_CONFIDENCE
from specharness.analysis.stats import block_ratio_interval
from specharness.analysis.verdict import pair_change
from specharness.experiment import bands
from specharness.experiment.bands import (
    CPU_XEON_2,
    CPU_ZEN4_2,
    CPU_ZEN5_2,
    UNRECORDED_FACTOR,
    band_for,
    recorded_bands,
)
from specharness.experiment.rundir import read_manifest
from specharness.reporting.aa_record import memory_offset, memory_offset_logs

ROOT = Path(__file__).resolve().parents[2]
SIGNS = [1, -1, -1, 1, 1, -1]  # six mirrored blocks, as the release profile runs them
ZEN4 = {"cpu": "AMD EPYC (family 25 model 17 stepping 1)", "cpu_count": 2}
PAIR = ROOT / "reports/cpu-release-pairs/20261207-interleaved/pair-vllm0.31.0-vllm0.32.0"


def _pair_logs(rng: np.random.Generator, change: float, instance_sd: float) -> list[float]:
    """One run's block log ratios of peak RSS, B over A: each engine's resident memory is its own (an instance
    offset, sd ``instance_sd`` per engine) and barely moves from block to block."""
    offset = rng.normal(0.0, instance_sd) - rng.normal(0.0, instance_sd)
    return [math.log(change) + offset + float(rng.normal(0.0, 0.0003)) for _ in SIGNS]


def _study(
    change: float, instance_sd: float, records: int = 40, runs: int = 50, aa_pairs: int = 14
) -> dict[str, float]:
    """Each record from ``aa_pairs`` simulated A/A runs, then ``runs`` pair runs judged with it, and without any
    allowance (the old zero-width rule)."""
    rng = np.random.default_rng(11)
    covered = called = old_called = 0
    total = records * runs
    for _ in range(records):
        aa = [float(np.mean(_pair_logs(rng, 1.0, instance_sd))) for _ in range(aa_pairs)]
        _, upper = memory_offset(aa)
        for _ in range(runs):
            logs = _pair_logs(rng, change, instance_sd)
            r = block_ratio_interval(logs, SIGNS, CHANGE_CONFIDENCE, upper**2)
            covered += r.low <= change <= r.high
            called += pair_change(r.estimate, r.low, r.high) != "unchanged"
            old = block_ratio_interval(logs, SIGNS, CHANGE_CONFIDENCE, 0.0)
            old_called += pair_change(old.estimate, old.low, old.high) != "unchanged"
    return {"coverage": covered / total, "called": called / total, "old_called": old_called / total}


@pytest.mark.parametrize("instance_sd", [0.0036, 0.012])  # the Zen 4's A/A (0.0051 per pair / sqrt 2), and wider
def test_no_change_is_covered_and_not_called_where_the_zero_width_interval_calls_offsets(instance_sd: float) -> None:
    s = _study(1.0, instance_sd)
    assert s["coverage"] >= 0.985
    assert s["called"] <= 0.01
    if instance_sd > 0.01:  # pair offsets of sd 0.017: beyond ×1.02 in a quarter of runs, all called by the old rule
        assert s["old_called"] >= 0.15


def test_a_real_memory_change_is_still_called() -> None:
    """×1.05 more resident memory on the Zen 4's spread: called in nearly every run, the interval holding it."""
    s = _study(1.05, 0.0036)
    assert s["called"] >= 0.95 and s["coverage"] >= 0.985


def test_memory_offset_is_the_chi_square_upper_limit_of_the_aa_pairs() -> None:
    logs = [0.004, -0.006, 0.002, 0.009, -0.001]
    sd, upper = memory_offset(logs)
    var = sum(d * d for d in logs) / 5
    assert sd == pytest.approx(math.sqrt(var))
    exact = math.sqrt(5 * var / sps.chi2.ppf(0.05, 5))
    assert exact <= upper < exact + 0.001 and upper == round(upper, 3)
    assert all(math.isnan(v) for v in memory_offset([0.01]))


def test_a_record_without_a_memory_limit_gets_the_conservative_one_of_its_class(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorded = recorded_bands()
    largest = max(b.memory_sd_upper for k, b in recorded.items() if k.startswith("cpu:"))
    assert band_for(ZEN4).memory_sd_upper == recorded[CPU_ZEN4_2].memory_sd_upper == 0.008
    unknown = band_for({"cpu": "Some CPU", "cpu_count": 64})
    assert unknown.memory_sd_upper == pytest.approx(UNRECORDED_FACTOR * largest)
    without = {**recorded, CPU_ZEN4_2: replace(recorded[CPU_ZEN4_2], memory_sd_upper=math.nan)}
    monkeypatch.setattr(bands, "recorded_bands", lambda: without)
    assert band_for(ZEN4).memory_sd_upper == pytest.approx(UNRECORDED_FACTOR * largest)
    assert band_for(ZEN4).offset_sd_upper == recorded[CPU_ZEN4_2].offset_sd_upper  # the speed allowance its own
    none_recorded = {k: replace(b, memory_sd_upper=math.nan) for k, b in recorded.items()}
    monkeypatch.setattr(bands, "recorded_bands", lambda: none_recorded)
    assert math.isnan(band_for(ZEN4).memory_sd_upper)


@pytest.mark.parametrize(
    ("kind", "runs", "limit"),
    [
        (CPU_XEON_2, [f"reports/cpu-aa/20261204/run{k}" for k in range(1, 6)], 0.008),
        (
            CPU_ZEN5_2,
            [f"reports/cpu-release-controls/20261207-settle/controls/run{k}" for k in range(1, 4)]
            + [f"reports/cpu-release-controls/20261207-settle/two-engines/settle1.2-run{k}" for k in (1, 2)],
            0.008,
        ),
    ],
)
def test_a_hand_written_records_memory_limit_is_what_its_committed_aa_runs_give(
    kind: str, runs: list[str], limit: float
) -> None:
    """Every twin an engine pair (issue 49, item 3.1: the Xeon's 5 control runs hold 10, the Zen 5's 5 runs 11),
    each run's twins as independent contrasts; the Zen 5's speed limit kept as written, the Xeon's record rebuilt."""
    logs = [d for run in runs for d in memory_offset_logs(analyse(ROOT / run, read_manifest(ROOT / run)))]
    assert len(logs) == (10 if kind == CPU_XEON_2 else 11)
    assert memory_offset(logs)[1] == recorded_bands()[kind].memory_sd_upper == limit


def test_a_committed_pair_reads_its_memory_change_with_the_allowance_and_none_without_a_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """0.31.0 -> 0.32.0 on the Zen 4: every peak-memory value has an interval as wide as the allowance (it read
    [1.009, 1.009] before), and without a memory record the run says nothing of memory."""
    a = analyse(PAIR, read_manifest(PAIR))
    memory = [c for c in a.changes if c.metric == "peak_memory"]
    assert len(memory) == 8 * 2 + 4 and a.rules.memory_var == pytest.approx(0.008**2)
    z = sps.norm.ppf(0.995)
    for c in memory:
        assert c.low < c.estimate < c.high
        assert math.log(c.high / c.low) / 2 >= z * 0.008 * 0.999
    overall = next(
        c for c in memory if c.workload == ALL_CELLS and c.arm_a == "baseline@0.31.0" and c.arm_b == "baseline@0.32.0"
    )
    assert pair_change(overall.estimate, overall.low, overall.high) == "unchanged"
    none_recorded = {k: replace(b, memory_sd_upper=math.nan) for k, b in recorded_bands().items()}
    monkeypatch.setattr(bands, "recorded_bands", lambda: none_recorded)
    again = analyse(PAIR, read_manifest(PAIR))
    assert not [c for c in again.changes if c.metric == "peak_memory"]
    assert [c for c in again.changes if c.metric == "time"] == [c for c in a.changes if c.metric == "time"]
