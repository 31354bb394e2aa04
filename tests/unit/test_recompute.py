"""Recomputing committed ASV results from a journal (a SYNTHETIC run folder; no engine)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from specharness.experiment.synthetic import write_synthetic_run
from specharness.history.asv.metrics import asv_metrics
from specharness.history.asv.recompute import recompute_paired
from specharness.reporting.report import write_report


def test_values_follow_the_report_cell_by_cell_and_absent_cells_stay_not_applicable(tmp_path: Path) -> None:
    report = write_report(write_synthetic_run(tmp_path / "run", records=480), plots=False)
    grid = [["'copy'", "'transform'"], ["1", "4", "8"]]
    result = {
        "result_columns": ["result", "params", "version"],
        "results": {
            "bench_paired.PairedNgram.track_slowdown": [[9.0] * 6, grid, "v1"],
            "bench_paired.PairedNgram.track_tpot_p50_ms_ngram": [[9.0] * 6, grid, "v1"],
            "bench_client.ClientParse.time_parse_stream": [[1.0], [], "v2"],
        },
    }
    changed = recompute_paired(result, report)
    assert sorted(changed) == [
        "bench_paired.PairedNgram.track_slowdown",
        "bench_paired.PairedNgram.track_tpot_p50_ms_ngram",
    ]
    metrics = asv_metrics(report)
    slowdown = result["results"]["bench_paired.PairedNgram.track_slowdown"][0]
    assert slowdown[0] == metrics["copy/c1/slowdown"] and slowdown[2] == metrics["copy/c8/slowdown"]
    assert math.isnan(slowdown[1])  # the standard profile has no 4-client cell: n/a, not "failed" (null)
    assert result["results"]["bench_client.ClientParse.time_parse_stream"][0] == [1.0]  # other suites untouched
    assert result["results"]["bench_paired.PairedNgram.track_slowdown"][2] == "v1"  # the version hash is kept


def test_recompute_asv_rewrites_a_result_file_and_its_notes(tmp_path: Path) -> None:
    """``specharness recompute-asv RESULT RUN_DIR`` on a copy of a committed result and a SYNTHETIC run folder."""
    import shutil
    import subprocess
    import sys

    from asv.results import Results

    from specharness.history.asv.notes import read_companion, write_companion
    from specharness.reporting.report import load_report

    root = Path(__file__).resolve().parents[2]
    (tmp_path / "m").mkdir()
    source = root / "results" / "cpu-2core-xeon" / "8430ca91-virtualenv-py3.11.json"
    result_path = tmp_path / "m" / source.name
    shutil.copy(source, result_path)
    shutil.copy(root / "results" / "cpu-2core-xeon" / "machine.json", tmp_path / "m")
    # its notes, as if they recorded how and by what the values were measured: recomputing keeps both
    setup, harness = "profile quick; dtype float32 (as measured)", "specharness 9.9 (measured)"
    write_companion(result_path, [replace(n, setup=setup, harness=harness) for n in read_companion(source)])
    run = write_synthetic_run(tmp_path / "run", records=480)
    write_report(run, plots=False)
    done = subprocess.run(
        [sys.executable, "-m", "specharness", "recompute-asv", str(result_path), str(run)],
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert done.returncode == 0, done.stderr
    metrics = asv_metrics(load_report(run))
    name = "bench_paired.PairedNgram.track_slowdown"
    loaded = Results.load(str(result_path))
    assert loaded.get_result_value(name, loaded.get_result_params(name))[0] == metrics["copy/c1/slowdown"]
    notes = [n for n in read_companion(result_path) if n.benchmark == name and n.params == ("'copy'", "1")]
    assert notes and notes[0].source.startswith("recomputed from ") and notes[0].block_values
    assert (notes[0].setup, notes[0].harness) == (setup, harness)
    odd = subprocess.run(
        [sys.executable, "-m", "specharness", "recompute-asv", str(result_path)],
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert odd.returncode == 2 and "pairs" in odd.stderr
