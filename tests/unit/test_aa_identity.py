"""Greedy identity without an A/A arm in the run: judged against the machine's recorded A/A at the same client count
(experiment.aa_identity, analysis.quality_tests.identity_against_record). The record is recomputed here from the
committed A/A runs by the project's own code; the test is proven on a simulation where a case's identity repeats
across blocks (what breaks a per-pair test), calibrated to the H200 WritingBench A/A (42% of pairs identical, 10 of
36 cases always identical at 4 blocks)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from specharness.analysis.aa_identity_record import format_records, measure_aa_identity
from specharness.analysis.quality_tests import CaseIdentity, identity_against_record, with_identity_controls
from specharness.experiment import aa_identity
from specharness.experiment.aa_identity import AAIdentity, aa_identity_for, identity_records
from specharness.experiment.bands import CPU_XEON_2, CPU_ZEN4_2

ROOT = Path(__file__).resolve().parents[2]


XEON = {"cpu": "Intel(R) Xeon(R) Processor", "cpu_count": 2}  # the hardware record of the CPU A/A runs


def recorded(kind: str) -> dict[int, AAIdentity]:
    """A kind's packaged identity records by client count (each kind's are of one length)."""
    return {r.clients: r for r in identity_records(kind)}


@pytest.mark.parametrize("kind", [CPU_XEON_2, "h200"])
def test_the_committed_record_is_what_the_committed_aa_runs_give(kind: str) -> None:
    record = recorded(kind)
    first = next(iter(record.values()))
    assert all(r.runs == first.runs for r in record.values()) and len(first.runs) >= 5
    measured = measure_aa_identity([ROOT / r for r in first.runs], kind, first.source)
    assert {r.clients: replace(r, runs=first.runs) for r in measured} == record
    assert "identical" in format_records(measured)
    assert aa_identity_for({"gpus": ["NVIDIA H200"]}) == recorded("h200")
    assert aa_identity_for(XEON, 48) == recorded(CPU_XEON_2)
    assert aa_identity_for({"gpus": ["NVIDIA A100-SXM4-40GB"]}) == {}  # another GPU: no record, never the H200's
    other_cpu = {"cpu": "AMD EPYC (family 25 model 1 stepping 1)", "cpu_count": 2}
    assert aa_identity_for(other_cpu) == {} and aa_identity_for({}) == {}  # another CPU: never the Xeon's


def test_the_longer_record_is_what_its_committed_runs_give() -> None:
    """The Zen 4's 96-token record (3 built-in A/A runs), beside its 64-token one (the release controls' twins)."""
    record = {r.clients: r for r in identity_records(CPU_ZEN4_2) if "cap96" in r.runs[0]}
    runs = record[1].runs
    assert runs == tuple(f"reports/cpu-aa/20261206-cap96/run{k}" for k in range(1, 4))
    measured = measure_aa_identity([ROOT / r for r in runs], CPU_ZEN4_2, record[1].source)
    assert {r.clients: replace(r, runs=runs) for r in measured} == record
    zen4 = {"cpu": "AMD EPYC (family 25 model 17 stepping 1)", "cpu_count": 2}  # the machine of those runs
    assert aa_identity_for(zen4, 62)[1] is record[1]  # the one record whose outputs reach 62 tokens
    assert aa_identity_for(zen4, 48)[1].max_output_tokens == 61  # else the shortest that reaches the cap
    assert aa_identity_for(XEON, 4096)[1] is recorded(CPU_XEON_2)[1]  # never another CPU's longer record


def test_runs_get_the_record_of_their_length(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stand-in records: a kind with a 48-token and a 62-token record at 1 client, the 48-token one alone at 4."""
    short = recorded(CPU_XEON_2)
    longer = replace(short[1], max_output_tokens=62)
    packaged = aa_identity.identity_records
    monkeypatch.setattr(
        aa_identity,
        "identity_records",
        lambda kind: (*packaged(kind), longer) if kind == CPU_XEON_2 else packaged(kind),
    )
    assert aa_identity_for(XEON, 48)[1] is short[1]  # the shortest record that reaches the cap
    assert aa_identity_for(XEON, 49)[1] is longer
    assert aa_identity_for(XEON, 4096)[1] is longer and aa_identity_for(XEON)[1] is longer  # else the longest
    assert aa_identity_for(XEON, 4096)[4] is short[4]
    assert aa_identity_for({"gpus": ["NVIDIA H200"]}, 4096)[1] is recorded("h200")[1]


def draw(rng: np.random.Generator, cases: int, blocks: int, shift: float = 0.0) -> np.ndarray:
    """Identical pairs per case over ``blocks``: 28% of cases always identical, the rest identical in a block with
    a probability of their own, uniform on [0, 0.4] (so identity repeats within a case); ``shift`` lowers it."""
    always = rng.random(cases) < 0.28
    q = np.clip(np.where(always, 1.0, rng.uniform(0, 0.4, cases)) - shift, 0, 1)
    return rng.binomial(blocks, q)


def record_of(same: np.ndarray, blocks: int) -> AAIdentity:
    counts = Counter(int(s) for s in same)
    return AAIdentity(
        "sim",
        8,
        int(same.sum()),
        blocks * same.size,
        tuple((k, blocks, n) for k, n in sorted(counts.items())),
        (),
        "simulated",
        max_output_tokens=256,
    )


def arm_of(same: np.ndarray, blocks: int) -> CaseIdentity:
    return CaseIdentity({f"c{i}": (int(s), blocks) for i, s in enumerate(same)}, max_output_tokens=256)


def per_pair_pvalue(record: AAIdentity, same: np.ndarray, blocks: int) -> float:
    """The wrong method: every (block, case) pair as independent (Fisher's exact test on pooled pairs)."""
    table = [
        [record.identical_pairs, record.pairs - record.identical_pairs],
        [int(same.sum()), blocks * same.size - int(same.sum())],
    ]
    return float(sps.fisher_exact(table, alternative="greater").pvalue)


def test_two_identical_engines_are_called_different_at_the_stated_rate_and_a_per_pair_test_is_not() -> None:
    rng = np.random.default_rng(20)
    runs, blocks = 150, 8
    ours = naive = 0
    for _ in range(runs):
        record, run = record_of(draw(rng, 36, blocks), blocks), draw(rng, 36, blocks)
        ours += identity_against_record(arm_of(run, blocks), record, 8).pvalue < 0.05
        naive += per_pair_pvalue(record, run, blocks) < 0.05
    assert ours / runs <= 0.08  # the record is a sample of prompts too: the test holds its level
    assert naive / runs >= 0.12  # counting blocks as independent cries wolf (about 19% here)


def test_more_divergence_than_two_identical_engines_is_found() -> None:
    rng = np.random.default_rng(21)
    found = sum(
        identity_against_record(arm_of(draw(rng, 36, 4, shift=0.2), 4), record_of(draw(rng, 36, 4), 4), 8).pvalue < 0.05
        for _ in range(100)
    )
    assert found >= 35  # about half at 36 cases and 4 blocks


def test_the_text_names_the_record_and_never_stays_silent() -> None:
    record = recorded("h200")[8]
    same = arm_of(np.array([4] * 10 + [0] * 6), 4)
    control = identity_against_record(same, record, 8)
    assert control.text.startswith("diverges more than two identical engines (p = ")
    assert "recorded A/A at 8 clients" in control.text and record.source in control.text
    assert "outputs here reach 256 tokens, the record's 48" in control.text
    alike = identity_against_record(arm_of(np.array([4] * 16), 4), record, 8)
    assert alike.text.startswith("diverges no more than two identical engines (recorded A/A at 8 clients")
    assert identity_against_record(same, None, 2).text == "no A/A record at this load (2 clients) for this machine kind"


def test_every_comparison_against_the_baseline_gets_a_control(tmp_path: Path) -> None:
    """A SYNTHETIC run folder without an A/A arm (1 and 8 clients, CPU hardware): the 1-client cells are judged
    against the CPU record, the 8-client cells say there is no record at that load."""
    from specharness.experiment.synthetic import write_synthetic_run
    from specharness.reporting.report import write_report

    run = write_synthetic_run(tmp_path / "run", records=160)
    report = write_report(run, plots=False)
    controls = {(c["load"], c["identity"]["control"]["text"].split(" (")[0]) for c in report["comparisons"]}
    assert controls == {("c1", "diverges no more than two identical engines"), ("c8", "no A/A record at this load")}
    md = (run / "report.md").read_text()
    assert "recorded A/A at 1 client, 320/320 pairs identical" in md and "no A/A record at this load (8 clients)" in md


def test_an_a_a_arm_in_the_run_is_its_own_control_and_open_loop_has_no_record() -> None:
    from tests.unit.test_prefix_speed import arms, compare

    a, b = arms()
    c = replace(compare(a, b), arm_a="baseline", arm_b="ngram", load="c1")
    twin = replace(c, arm_b="baseline-b")
    judged = with_identity_controls([c, twin], ("baseline", "ngram", "baseline-b"), recorded(CPU_XEON_2))
    assert judged[0].identity.control is not None and judged[0].identity.control.twin == "baseline-b"
    assert judged[1].identity.control is None  # the A/A comparison itself
    sync = replace(c, arm_a="baseline-sync")  # no A/A twin in the run: the record, whatever the reference arm
    control = with_identity_controls([sync], ("baseline-sync", "ngram"), recorded(CPU_XEON_2))[0].identity.control
    assert control is not None and control.text.startswith("diverges no more than two identical engines (recorded")
    open_loop = replace(c, load="r2", rate="2")
    control = with_identity_controls([open_loop], ("baseline", "ngram"), recorded(CPU_XEON_2))[0].identity.control
    assert control is not None and control.text.startswith("no A/A record at this load (open loop")


@pytest.mark.parametrize(
    ("diverge_at", "chained", "starts", "says"),
    [
        (60, True, "diverges no more", "identical over the first 48 tokens 100% per case"),
        (20, True, "diverges more", "identical over the first 48 tokens 0% per case"),
        (60, False, "diverges more", "no prefix chains to cut them there"),
    ],
)
def test_outputs_longer_than_the_records_are_compared_over_its_length(
    diverge_at: int, chained: bool, starts: str, says: str
) -> None:
    """Outputs of 100 tokens against the CPU record (outputs of at most 48): parting at token 60 is identity
    over the record's length (two engines cut at 48 would agree), parting at token 20 is not; without prefix chains
    the whole outputs are compared, and the text says which way that leans."""
    from tests.unit.test_prefix_speed import arms, compare

    a, b = arms(diverge_at=diverge_at, chained=chained)
    c = with_identity_controls([compare(a, b)], ("baseline", "ngram"), recorded(CPU_XEON_2))[0]
    control = c.identity.control
    assert control is not None and control.text.startswith(starts + " than two identical engines")
    assert says in control.text and "outputs here reach 100 tokens, the record's 48" in control.text


def test_a_single_case_is_tested_against_the_record_by_exact_permutation() -> None:
    """One case in the run (a workload of one prompt): scipy's permutation test wants two a sample, so each case of
    run and record takes the lone case's place in turn; the smallest p is 1 / (cases + 1)."""
    from specharness.analysis.quality_tests import _independent_pvalue

    record = np.ones(15)
    assert _independent_pvalue(np.array([0.0]), record) == 1 / 16
    assert _independent_pvalue(np.array([1.0]), np.array([1.0, 0.5, 1.0])) == 1.0
    mixed = np.array([1.0, 0.5, 0.75, 1.0])
    assert _independent_pvalue(np.array([0.5]), mixed) == 2 / 5
