"""The distribution check's report on a SYNTHETIC sampled run folder: the positive control stream, drawn from another
first-token distribution, is flagged; the A/A stream, drawn like the baseline, is not; both rates are reported."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np

from specharness.experiment.journal import Journal
from specharness.experiment.rundir import write_manifest
from specharness.experiment.sampled_run import STREAMS, SampledDesign, request_seed
from specharness.records import Manifest, RequestRecord
from specharness.reporting.sampled_report import write_sampled_report


def _synthetic_run(path: Path) -> Path:
    path.mkdir(parents=True)
    design = SampledDesign(workloads=("copy",), cases_per_workload=6, samples=24, repetitions=3)
    workloads = {"copy": {"cases": [f"c{i}" for i in range(6)]}}
    manifest = Manifest(kind="sampled", design=asdict(design), status="complete", config={}, workloads=workloads)
    write_manifest(path, manifest)
    rng = np.random.default_rng(7)
    probs = {
        "baseline": [0.5, 0.3, 0.2],
        "ngram": [0.5, 0.3, 0.2],
        "baseline-aa": [0.5, 0.3, 0.2],
        "baseline-t": [0.2, 0.3, 0.5],
    }
    with Journal(path / "journal.jsonl", fsync=False) as journal:
        for rep in range(design.repetitions):
            for stream in STREAMS:
                for case in range(design.cases_per_workload):
                    for i in range(design.samples):
                        token = int(rng.choice(3, p=probs[stream]))
                        journal.write(
                            RequestRecord(
                                arm=stream,
                                block=rep,
                                workload="copy",
                                group="g",
                                case_id=f"c{case}",
                                clients=8,
                                warmup=False,
                                cell=f"rep{rep}/copy/{stream}#s0",
                                seq=i,
                                started_unix_s=0.0,
                                send_s=0.0,
                                completion_tokens=int(rng.poisson(30)),
                                verdict="truncated",
                                finish_reason="length",
                                saw_done=True,
                                check_detail="unchecked",
                                first_token_id=100 + token,
                            )
                        )
    return path


def test_positive_control_flagged_and_aa_not(tmp_path: Path) -> None:
    out = write_sampled_report(_synthetic_run(tmp_path / "run"))
    copy = out["workloads"]["copy"]
    assert copy["baseline-t"]["overall"]["verdict"] == "differs"
    assert copy["baseline-t"]["flagged_rate"] >= 2 / 3
    assert copy["baseline-aa"]["overall"]["verdict"] == "no difference detected"
    md = (tmp_path / "run" / "sampled.md").read_text()
    assert "positive control" in md and "A/A" in md and "flagged in repetitions" in md


def test_request_seeds_are_distinct_and_reproducible() -> None:
    seeds = {request_seed(0, r, s, f"c{c}", i) for r in range(2) for s in STREAMS for c in range(3) for i in range(8)}
    assert len(seeds) == 2 * len(STREAMS) * 3 * 8
    assert request_seed(0, 1, "ngram", "c1", 3) == request_seed(0, 1, "ngram", "c1", 3)
