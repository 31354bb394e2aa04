"""The quality section of report.md and sampled.md: four questions kept apart, each with its evidence or a line
saying this run did not measure it (SYNTHETIC run folders and committed journals; no engine)."""

from __future__ import annotations

from pathlib import Path

import orjson

from specharness.experiment.synthetic import write_synthetic_run
from specharness.reporting.report import write_report
from specharness.reporting.sampled_report import write_sampled_report

from .test_quality_metrics import unpack

SUBSECTIONS = ("### Greedy identity", "### Sampled distribution", "### Structured validity", "### Refusal agreement")


def quality(md: str) -> str:
    """The text of the ``## Quality`` section (up to the next ``## `` heading)."""
    start = md.index("## Quality\n")
    end = md.find("\n## ", start + 1)
    return md[start:] if end < 0 else md[start:end]


def _in_order(text: str, headings: tuple[str, ...]) -> bool:
    places = [text.find(h) for h in headings]
    return -1 not in places and places == sorted(places)


def _subsection(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n### ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def test_a_greedy_run_without_structured_or_refusal_cases_says_what_it_did_not_measure(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "run", records=96)
    report = write_report(run, plots=False)
    q = quality((run / "report.md").read_text())
    assert _in_order(q, SUBSECTIONS)
    assert "| quality verdict |" in q and "**holds**" in q  # the per-comparison verdict table is kept
    pairs = {(c["workload"], c["clients"]): c["pair_counts"]["pairs"] for c in report["comparisons"]}
    greedy = _subsection(q, "### Greedy identity")
    assert "Not measured" not in greedy
    cases = {(c["workload"], c["clients"]): len(c["identity"]["by_case"]) for c in report["comparisons"]}
    n, k = pairs[("copy", 1)], cases[("copy", 1)]
    assert (  # no A/A arm in the run: judged against the machine's recorded A/A at 1 client
        f"| copy | 1 client | ngram vs baseline | {n}/{n} (100%) | {k}/{k} | 0 | 0 | 0 | diverges no more than two "
        "identical engines (recorded A/A at 1 client, " in greedy
    )
    for heading in SUBSECTIONS[1:]:
        assert "Not measured in this run" in _subsection(q, heading), heading
    assert "`specharness sampled`" in _subsection(q, "### Sampled distribution")


def test_a_sampled_paired_run_does_not_claim_greedy_identity(tmp_path: Path) -> None:
    run = write_synthetic_run(tmp_path / "run", records=96)
    manifest = orjson.loads((run / "manifest.json").read_bytes())
    manifest["config"]["sampling"]["temperature"] = 0.8
    (run / "manifest.json").write_bytes(orjson.dumps(manifest))
    write_report(run, plots=False)
    greedy = _subsection(quality((run / "report.md").read_text()), "### Greedy identity")
    assert "Not measured in this run: it sampled at temperature 0.8" in greedy and "| identical |" not in greedy


def test_structured_validity_rows_of_the_committed_cpu_run(tmp_path: Path) -> None:
    run = unpack("cpu-structured/20261204", tmp_path / "run")
    write_report(run, plots=False)
    q = quality((run / "report.md").read_text())
    structured = _subsection(q, "### Structured validity")
    assert (
        "| structured | 1 client | baseline | forced tool call | 16 | 0 / 0 | 0 | 6 | 10 | **16** (100%) | 0 | 0 | 0 | 8 |"
        in structured
    )
    assert (
        "| structured | 1 client | ngram | JSON answer | 16 | 0 / 0 | n/a | 4 | 0 | **4** (25%) | 10 | 2 | 0 | 4 |"
        in structured
    )
    assert "| structured | 1 client | ngram vs baseline | 24/32 (75%) | 12/16 | 8 | 0 | 0 |" in _subsection(
        q, "### Greedy identity"
    )
    assert "Not measured in this run" in _subsection(q, "### Refusal agreement")


def test_the_refusal_listing_sits_in_the_quality_section(tmp_path: Path) -> None:
    run = unpack("cpu-abstain/20261204", tmp_path / "run")
    write_report(run, plots=False)
    md = (run / "report.md").read_text()
    refusals = _subsection(quality(md), "### Refusal agreement")
    assert "| abstain | 4 clients | ngram vs baseline | 160 (80) | 50 / 50 | ngram 0, baseline 0 | 10% |" in refusals
    assert "No pair disagreed" in refusals and "## Refusal control" not in md
    assert "Not measured in this run" in _subsection(quality(md), "### Structured validity")


def test_the_sampled_report_answers_the_second_question_and_points_to_the_others(tmp_path: Path) -> None:
    run = unpack("cpu-sampled/20261204", tmp_path / "run")
    write_sampled_report(run)
    q = quality((run / "sampled.md").read_text())
    assert _in_order(q, (*SUBSECTIONS[:2], "#### copy", "#### free", *SUBSECTIONS[2:]))
    assert "Not measured in this run: every request samples (temperature 0.8)" in _subsection(q, "### Greedy identity")
    assert "Not measured" not in _subsection(q, "### Sampled distribution")
    assert "| ngram vs baseline | the question | **differs** |" in _subsection(q, "### Sampled distribution")
    assert "Not measured in this run" in _subsection(q, "### Structured validity")
    assert "Not measured in this run" in _subsection(q, "### Refusal agreement")


def test_a_sampled_run_of_structured_cases_shows_validity_per_stream(tmp_path: Path) -> None:
    from dataclasses import asdict

    from specharness.experiment.journal import Journal
    from specharness.experiment.rundir import write_manifest
    from specharness.experiment.sampled_run import STREAMS, SampledDesign
    from specharness.records import Manifest, RequestRecord

    run = tmp_path / "run"
    run.mkdir()
    design = SampledDesign(workloads=("structured",), cases_per_workload=1, samples=4, repetitions=1)
    workloads = {"structured": {"cases": ["t"]}}
    manifest = Manifest(kind="sampled", design=asdict(design), status="complete", config={}, workloads=workloads)
    write_manifest(run, manifest)
    with Journal(run / "journal.jsonl", fsync=False) as journal:
        for stream in STREAMS:
            for i in range(4):
                broken = stream == "ngram" and i == 0
                journal.write(
                    RequestRecord(
                        arm=stream,
                        block=0,
                        workload="structured",
                        group="g",
                        case_id="t",
                        clients=8,
                        warmup=False,
                        cell=f"rep0/structured/{stream}#s0",
                        seq=i,
                        started_unix_s=0.0,
                        send_s=0.0,
                        completion_tokens=20,
                        verdict="complete",
                        finish_reason="tool_calls",
                        saw_done=True,
                        correct=not broken,
                        check_detail="no tool call" if broken else "arguments valid JSON, 1 value match",
                        tool_calls=[] if broken else [{"name": "book", "arguments": "{}"}],
                        first_token_id=5,
                    )
                )
    write_sampled_report(run)
    structured = _subsection(quality((run / "sampled.md").read_text()), "### Structured validity")
    assert (
        "| structured | 8 clients | ngram | forced tool call | 4 | 0 / 0 | 1 | 0 | 0 | **1** (25%) | 0 | 3 | 0 | 0 |"
        in structured
    )
    assert (
        "| structured | 8 clients | baseline-t | forced tool call | 4 | 0 / 0 | 0 | 0 | 0 | **0** (0%) |" in structured
    )
