"""Report, compare and site helpers on a SYNTHETIC run folder (made-up records; no engine)."""

from __future__ import annotations

import math
from pathlib import Path

import orjson
import pytest

from specharness.cli import main
from specharness.experiment.synthetic import write_synthetic_run
from specharness.history.asv.metrics import asv_intervals, asv_metrics, lookup
from specharness.reporting.report import REPORT_JSON, load_report, write_report
from specharness.reporting.runcompare import compare_runs, format_changes


def test_report_from_a_synthetic_journal(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "run", records=480)
    report = write_report(run)
    assert report["counts"]["measured_requests_counted"] == 480
    comps = {(c["workload"], c["clients"]): c for c in report["comparisons"]}
    assert set(comps) == {("copy", 1), ("copy", 8), ("transform", 1), ("transform", 8)}
    # the synthetic ngram arm streams twice as fast, with the same outputs as the baseline
    assert all(c["speedup"]["estimate"] > 1.5 and c["speedup"]["low"] > 1.1 for c in comps.values())
    assert all(c["speed"]["verdict"] == "helps" and c["quality"]["verdict"] == "holds" for c in comps.values())
    assert all(row["ok"] for row in report["reconciliation"])
    md = (run / "report.md").read_text()
    for heading in (
        "## Decision",
        "## Speed: time for the same work",
        "## Quality",
        "## Per arm",
        "## Counter reconciliation",
        "## Validity",
        "## Manifest",
    ):
        assert heading in md
    metrics = asv_metrics(report)
    assert metrics["copy/c1/slowdown"] == pytest.approx(1 / comps[("copy", 1)]["speedup"]["estimate"])
    interval = asv_intervals(report)["copy/c1/slowdown"]  # travels in ASV's stats columns, not as a metric
    assert interval.low < metrics["copy/c1/slowdown"] < interval.high and "copy/c1/slowdown_ci_low" not in metrics
    assert len(interval.block_values) == interval.blocks >= 2 and interval.speed_verdict == "helps"
    assert lookup({"metrics": metrics}, "copy/c1/incorrect_fraction_ngram") == pytest.approx(0.1, abs=0.05)
    assert math.isnan(lookup({"metrics": metrics}, "copy/c1/rejection_rate"))  # no drafts in synthetic data
    assert math.isnan(lookup({"metrics": metrics}, "copy/c4/slowdown"))  # a cell the profile did not run
    assert (run / "plots" / "speedup.png").stat().st_size > 1000


def test_load_report_builds_in_memory_and_leaves_the_folder_as_it_was(tmp_path: Path) -> None:
    """A reader (scorecards, aa-record, compare) of a folder without report.json writes nothing into it; once the
    report is written, it reads the same report back."""
    run = write_synthetic_run(tmp_path / "run", records=96)
    before = sorted(p.name for p in run.iterdir())
    built = load_report(run)
    assert sorted(p.name for p in run.iterdir()) == before and not (run / REPORT_JSON).exists()
    written = write_report(run, plots=False)
    assert (run / REPORT_JSON).is_file()
    key = [(c["workload"], c["clients"], c["speedup"]["estimate"]) for c in built["comparisons"]]
    assert key == [(c["workload"], c["clients"], c["speedup"]["estimate"]) for c in written["comparisons"]]
    assert [(c["workload"], c["clients"], c["speedup"]["estimate"]) for c in load_report(run)["comparisons"]] == key


def test_compare_two_runs_names_metric_values_ratio(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    a = write_synthetic_run(tmp_path / "a", records=240, seed=1)
    b = write_synthetic_run(tmp_path / "b", records=240, seed=2)
    write_report(a, plots=False)
    write_report(b, plots=False)
    changes = compare_runs(a, b)
    speedups = [c for c in changes if c.metric == "speedup"]
    assert len(speedups) == 4 and all(c.significant is not None for c in speedups)
    text = format_changes(changes, "a", "b")
    assert "speedup" in text and "ratio" in text and "significant" in text
    assert main(["compare", str(a), str(b)]) == 0
    assert "tpot_p50_ms" in capsys.readouterr().out


def test_partial_status_is_shown(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "run", records=48)
    manifest = orjson.loads((run / "manifest.json").read_bytes())
    manifest["status"] = "interrupted"
    (run / "manifest.json").write_bytes(orjson.dumps(manifest))
    write_report(run, plots=False)
    assert "PARTIAL REPORT" in (run / "report.md").read_text()


def test_report_leads_with_the_answer(tmp_path: Path) -> None:
    """The first section after the title is the answer: per workload and load, both verdicts with the speedup, its
    interval and block count, whether the answers changed, and what the verdict is about; the decision table follows.
    Fails if the answer is missing, comes after the tables, or disagrees with report.json."""
    run = write_synthetic_run(tmp_path / "run", records=480)
    report = write_report(run, plots=False)
    md = (run / "report.md").read_text()
    sections = [line for line in md.splitlines() if line.startswith("## ")]
    assert sections[:2] == ["## Answer", "## Decision"], sections[:3]
    answer = md.split("## Answer", 1)[1].split("## Decision", 1)[0]
    lines = [line for line in answer.splitlines() if line.startswith("- ")]
    assert len(lines) == len(report["comparisons"]) == 4
    for c in report["comparisons"]:
        load = f"{c['clients']} client{'s' if c['clients'] != 1 else ''}"
        line = next(x for x in lines if x.startswith(f"- **{c['workload']}, {load}, "))
        s = c["speedup"]
        assert f"speed **{c['speed']['verdict']}**" in line and f"quality **{c['quality']['verdict']}**" in line
        assert f"×{s['estimate']:.2f}" in line and f"[{s['low']:.2f}, {s['high']:.2f}]" in line, line
        assert f"{s['blocks']} blocks" in line and "answers identical in 100% of pairs" in line, line
        assert "About these " in line, line


def test_sweep_without_slo_prints_no_sustainable_load(tmp_path: Path) -> None:
    """Goodput needs an SLO: a run that declared none says so and prints no 'Max sustainable load' line (it would
    count right answers alone and read 'below the lightest tested load')."""
    run = write_synthetic_run(tmp_path / "run", records=480)
    manifest = orjson.loads((run / "manifest.json").read_bytes())
    assert not manifest["config"]["profile"].get("slo")
    write_report(run, plots=False)
    md = (run / "report.md").read_text()
    assert "## Load sweep" in md and "Max sustainable load" not in md and "No SLO declared" in md


def test_a_verdict_about_fixed_prompts_says_so_in_its_cell(tmp_path: Path) -> None:
    """Issue 35: a cell whose cases are too few to resample (under 20) speaks for its prompts only, and its speed
    verdict cell says so (fails if the bold verdict stands alone)."""
    run = write_synthetic_run(tmp_path / "run", records=480)
    report = write_report(run, plots=False)
    md = (run / "report.md").read_text()
    decision = md.split("## Decision", 1)[1].split("\n## ", 1)[0]
    for c in report["comparisons"]:
        cases = c["work"]["cases"]
        assert cases < 20 and f"**{c['speed']['verdict']}** (these {cases} prompts)" in decision, decision[:600]
