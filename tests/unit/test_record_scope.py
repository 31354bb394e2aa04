"""A machine's A/A record speaks only for what it was measured on (issue 49, items 2 and 4): the offset allowance for
the model its runs served, the identity record for that model and those workloads; any other run gets the stated
conservative allowance, and no claim on identical answers without an A/A pair of its own traffic."""

from __future__ import annotations

from pathlib import Path

from specharness.analysis.analyse import analyse
from specharness.experiment.aa_identity import aa_identity_for, traffic_mismatch
from specharness.experiment.bands import band_for
from specharness.experiment.design import get_profile, override
from specharness.experiment.machine_record import RECORD_MODEL
from specharness.experiment.rundir import read_manifest
from specharness.experiment.synthetic import write_synthetic_run

H100 = {"gpus": ["NVIDIA H100 80GB HBM3"]}


def test_offset_allowance_belongs_to_the_recorded_model() -> None:
    recorded = band_for(H100, RECORD_MODEL)
    assert recorded == band_for(H100) and recorded.aa_runs > 0
    other = band_for(H100, "llama-8b-random-weights")
    assert other.aa_runs == 0 and other.offset_sd_upper > recorded.offset_sd_upper
    assert other.source.startswith(f"the A/A record of this GPU was measured with {RECORD_MODEL}, not llama-8b")


def test_identity_record_belongs_to_the_recorded_traffic() -> None:
    assert traffic_mismatch(H100, RECORD_MODEL, ["copy", "transform"]) == ""
    assert aa_identity_for(H100, 64, RECORD_MODEL, ["copy", "transform"])
    why = traffic_mismatch(H100, RECORD_MODEL, ["copy", "wb36"])
    assert why == "the machine's A/A record is of abstain, copy, free, transform, not wb36"
    assert aa_identity_for(H100, 64, RECORD_MODEL, ["copy", "wb36"]) == {}
    assert "not llama-8b" in traffic_mismatch(H100, "llama-8b", ["copy"])


def test_a_run_of_other_traffic_without_an_aa_arm_makes_no_identity_claim(tmp_path: Path) -> None:
    """A SYNTHETIC run on the recorded Xeon: judged against the record as it is; once its manifest names another
    model, the line says no A/A pair of this traffic was run and how to add one."""
    profile = override(get_profile("quick"), arms=("baseline", "ngram"))
    run = write_synthetic_run(tmp_path / "run", 64, profile=profile)
    raw = read_manifest(run)
    raw["model"] = {"name": RECORD_MODEL, "origin": "embedded-default"}
    texts = [c.identity.control.text for c in analyse(run, raw).comparisons if c.identity.control]
    assert texts and not any("no A/A pair of this traffic" in t for t in texts)
    raw["model"] = {"name": "my-model", "origin": "hf-dir"}
    comparisons = analyse(run, raw).comparisons
    for c in comparisons:
        assert c.identity.control is not None
        assert c.identity.control.text.startswith("no A/A pair of this traffic was run (the machine's A/A record ")
        assert c.identity.control.text.endswith("add one: --arms baseline,ngram,baseline-b")
