"""Machine records as data (experiment.machine_record) and built from A/A runs (reporting.aa_record, specharness
aa-record): the packaged records are what their committed runs give, a user's record is found by every run on its
kind of machine without a code change, and a bad file or a bad set of runs is one line naming the file, field or run."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from specharness._errors import ConfigError
from specharness.cli import main
from specharness.experiment import machine_record
from specharness.experiment.aa_identity import aa_identity_for, identity_records
from specharness.experiment.bands import CPU_XEON_2, CPU_ZEN4_2, band_for, machine_kind, recorded_bands
from specharness.experiment.machine_record import (
    RECORDS_ENV,
    MachineRecord,
    band_from_offset,
    load_record,
    machine_records,
    record_file_name,
    record_json,
    write_record,
)
from specharness.reporting.aa_record import build_record

ROOT = Path(__file__).resolve().parents[2]
A100 = {"gpus": ["NVIDIA A100-SXM4-40GB"]}  # a GPU without a packaged record
ZEN4 = {"cpu": "AMD EPYC (family 25 model 17 stepping 1)", "cpu_count": 2}


def _copy_runs(tmp_path: Path, runs: list[str], into: str = "runs") -> list[Path]:
    """The runs' manifests and journals only, so that the committed folders stay as committed."""
    out = []
    for k, run in enumerate(runs):
        dst = tmp_path / into / f"{k}-{Path(run).name}"
        dst.mkdir(parents=True)
        for name in ("manifest.json", "journal.jsonl.xz"):
            shutil.copy(ROOT / run / name, dst / name)
        out.append(dst)
    return out


def test_every_packaged_record_reads_back_as_written_and_its_band_follows_its_limit() -> None:
    records = machine_records()
    assert {CPU_XEON_2, CPU_ZEN4_2, "h200"} <= set(records)
    for kind, record in records.items():
        path = Path(record.path)
        assert path.name == record_file_name(kind) and path.parent == machine_record.PACKAGED_RECORDS
        assert json.loads(path.read_text()) == record_json(record)
        assert record.band is not None and record.band.margin == band_from_offset(record.band.offset_sd_upper)
        assert all(r.kind == kind for r in record.identity)


def test_a_users_record_is_found_without_a_code_change_and_replaces_the_packaged_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stand-in record: the Xeon's figures filed under the A100's kind, then a wider Zen 4 record."""
    unrecorded = band_for(A100)
    assert unrecorded.aa_runs == 0 and aa_identity_for(A100) == {}
    xeon = machine_records()[CPU_XEON_2]
    h100 = MachineRecord(
        machine_kind(A100),
        replace(xeon.band, source="stand-in A100 record"),  # type: ignore[type-var]
        tuple(replace(r, kind=machine_kind(A100)) for r in xeon.identity),
        0.0,
    )
    monkeypatch.setenv(RECORDS_ENV, str(tmp_path))
    path = write_record(h100, machine_record.records_folder())
    assert path == tmp_path / "gpu-nvidia-a100-sxm4-40gb.json"
    assert (
        band_for(A100).source == "stand-in A100 record" and band_for(A100).offset_sd_upper == xeon.band.offset_sd_upper
    )  # type: ignore[union-attr]
    assert sorted(aa_identity_for(A100)) == [1, 4] and identity_records(machine_kind(A100))[0].pairs == 320
    packaged_zen4 = band_for(ZEN4)
    wider = MachineRecord(CPU_ZEN4_2, replace(packaged_zen4, offset_sd_upper=0.08, margin=band_from_offset(0.08)))
    with pytest.raises(ConfigError, match="has a record; pass --replace"):
        write_record(wider, tmp_path)
    write_record(wider, tmp_path, replace=True)  # beside the A100's: the user's folder replaces the package's Zen 4
    assert band_for(ZEN4).offset_sd_upper == 0.08 and band_for(ZEN4).margin == band_from_offset(0.08) > 0.10
    assert recorded_bands()[CPU_XEON_2] == xeon.band  # the kinds the user did not record keep the package's
    assert aa_identity_for(ZEN4) == {}  # the user's Zen 4 record holds no identity record
    monkeypatch.delenv(RECORDS_ENV)
    assert band_for(ZEN4) == packaged_zen4 and band_for(A100) == unrecorded


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("{not json", "line 1: not valid JSON"),
        ('{"format": 2, "machine_kind": "x", "identity": []}', "format: expected 1, found 2"),
        ('{"format": 1, "identity": []}', "machine_kind: expected a string, found None"),
        (
            '{"format": 1, "machine_kind": "x", "band": {"offset_sd_upper": "0.02", "aa_runs": 5, "source": "s"}, "identity": []}',
            "band.offset_sd_upper: expected an integer or a number",
        ),
        (
            '{"format": 1, "machine_kind": "x", "band": {"offset_sd_upper": -0.1, "aa_runs": 5, "source": "s"}, "identity": []}',
            "band.offset_sd_upper: expected a finite number of at least 0",
        ),
        (
            '{"format": 1, "machine_kind": "x", "band": {"offset_sd_upper": 0.02, "aa_runs": true, "source": "s"}, "identity": []}',
            "band.aa_runs: expected an integer, found True",
        ),
        (
            '{"format": 1, "machine_kind": "x", "band": {"offset_sd_upper": 0.02, "aa_runs": 5, "source": "s", '
            '"memory_sd_upper": "0.01"}, "identity": []}',
            "band.memory_sd_upper: expected an integer or a number, found '0.01'",
        ),
        (
            '{"format": 1, "machine_kind": "x", "band": {"offset_sd_upper": 0.02, "aa_runs": 5, "source": "s", '
            '"memory_sd_upper": 0}, "identity": []}',
            "band.memory_sd_upper: expected a number above 0",
        ),
        (
            '{"format": 1, "machine_kind": "x", "identity": [{"clients": 1, "identical_pairs": 1, "pairs": 1, "case_counts": '
            '[[1, 1]], "max_output_tokens": 4, "runs": [], "source": ""}]}',
            "identity[0].case_counts[0]: expected [identical, pairs, prompts]",
        ),
    ],
)
def test_a_bad_record_file_is_one_line_naming_the_file_and_field(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_record(path)
    message = str(err.value)
    assert message.startswith(f"{path}: ") and said in message and "\n" not in message
    assert message.endswith("fix the file or write it again with specharness aa-record")


def test_two_files_of_one_kind_and_a_missing_folder_are_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    xeon = machine_records()[CPU_XEON_2]
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps(record_json(xeon)))
    monkeypatch.setenv(RECORDS_ENV, str(tmp_path))
    with pytest.raises(ConfigError, match=r"is also recorded in .*a\.json; keep one file a kind"):
        machine_records()
    monkeypatch.setenv(RECORDS_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match="no such folder; create it or unset"):
        band_for(ZEN4)


def _record_again(tmp_path: Path, kind: str, runs: int) -> tuple[MachineRecord, list[Path]]:
    """The packaged record of ``kind`` built again from copies of the runs it names (``runs`` of them): its limit,
    estimate, run count and band as packaged, no false verdict; returns it and the copied runs."""
    packaged = machine_records()[kind]
    committed = list(dict.fromkeys(run for r in packaged.identity for run in r.runs))
    assert len(committed) == runs
    copies = _copy_runs(tmp_path, committed)
    record = build_record(copies)
    assert record.kind == kind and record.band is not None and packaged.band is not None
    got = (record.band.offset_sd_upper, record.offset_sd, record.band.aa_runs, record.band.margin)
    assert got == (packaged.band.offset_sd_upper, packaged.offset_sd, runs, packaged.band.margin)
    mem, packaged_mem = record.band.memory_sd_upper, packaged.band.memory_sd_upper
    assert mem == packaged_mem or (math.isnan(mem) and math.isnan(packaged_mem))
    assert "0 false verdicts" in record.band.source
    return record, copies


def test_the_h100_record_is_what_its_committed_aa_and_control_runs_give(tmp_path: Path) -> None:
    """The built-in A/A (7 runs: 1 and 8 clients, cap 48) and the release controls' declared twins (5 runs: 1 and 4
    clients, cap 64) of one H100: 76 cells, the packaged limit and band."""
    record, _ = _record_again(tmp_path, "gpu:NVIDIA H100 80GB HBM3", 12)
    assert record.band is not None and "76 cells in 12 runs" in record.band.source


def test_the_zen4_record_is_what_its_committed_aa_runs_give(tmp_path: Path) -> None:
    """Both designs in one record: the release controls' declared twins (ref vs aa, cap 64; 9 runs cell after cell, 5
    with the arms taking turns) and the built-in A/A (cap 96; 3 runs). The band comes from all 68 A/A cells; the
    identity records are one a client count and cap, each naming its runs."""
    packaged = machine_records()[CPU_ZEN4_2]
    record, runs = _record_again(tmp_path, CPU_ZEN4_2, 17)
    assert record.band is not None and "68 cells in 17 runs (2026-12-06 to 2026-12-07, " in record.band.source
    fields = ("clients", "identical_pairs", "pairs", "case_counts", "max_output_tokens")
    assert [[getattr(r, f) for f in fields] for r in record.identity] == [
        [getattr(r, f) for f in fields] for r in packaged.identity
    ]
    assert [len(r.runs) for r in record.identity] == [14, 3, 14, 3]  # per client count: cap 64, then cap 96
    assert not any((run / "report.json").exists() for run in runs)  # read, never written into
    assert load_record(write_record(record, tmp_path / "records", replace=True)) == replace(
        record, path=str(tmp_path / "records" / record_file_name(CPU_ZEN4_2))
    )


def test_runs_of_one_name_from_two_campaigns_are_two_runs(tmp_path: Path) -> None:
    """run1 of two campaigns: two engine pairs, two runs (labelled by name, they were pooled as one)."""
    first = _copy_runs(tmp_path, ["reports/cpu-release-controls/20261206/run1"], into="a")[0]
    second = _copy_runs(tmp_path, ["reports/cpu-release-controls/20261206/run2"], into="b")[0]
    first, second = first.rename(first.with_name("run1")), second.rename(second.with_name("run1"))
    record = build_record([first, second])
    assert record.band is not None and record.band.aa_runs == 2 and "8 cells in 2 runs" in record.band.source


def test_the_xeon_record_is_what_its_committed_aa_runs_give(tmp_path: Path) -> None:
    """The control runs (baseline vs baseline-b and vs baseline-slow): both twins are engine pairs, 10 in 5 runs
    (issue 49, item 3.1; the A/A twins alone gave 0.022, the hand-written record before it 0.021); the identity
    records equal the packaged ones."""
    runs = _copy_runs(tmp_path, [f"reports/cpu-aa/20261204/run{k}" for k in range(1, 6)])
    record = build_record(runs)
    packaged = machine_records()[CPU_XEON_2]
    assert record.band is not None and packaged.band is not None
    assert record.band.offset_sd_upper == packaged.band.offset_sd_upper == 0.031
    assert "10 engine pairs" in record.band.source
    fields = ("clients", "identical_pairs", "pairs", "case_counts", "max_output_tokens")
    assert [[getattr(r, f) for f in fields] for r in record.identity] == [
        [getattr(r, f) for f in fields] for r in packaged.identity
    ]
    with pytest.raises(ConfigError, match="1 run\\(s\\) cannot estimate the offset between engine pairs"):
        build_record(runs[:1])


def test_aa_record_on_the_command_line_files_the_record_and_bad_input_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    xeon = _copy_runs(tmp_path, ["reports/cpu-aa/20261204/run1", "reports/cpu-aa/20261204/run2"])
    zen4 = _copy_runs(tmp_path, ["reports/cpu-release-controls/20261206/run1"], into="zen4")
    monkeypatch.setenv(RECORDS_ENV, str(tmp_path / "mine"))
    (tmp_path / "mine").mkdir()
    assert main(["aa-record", *map(str, xeon + zen4)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "record one kind of machine at a time" in err and "Traceback" not in err
    assert main(["aa-record", *map(str, xeon), "--write"]) == 2  # the package has the Xeon's
    assert "has a record; pass --replace" in capsys.readouterr().err
    assert main(["aa-record", *map(str, xeon), "--write", "--replace"]) == 0
    written = tmp_path / "mine" / record_file_name(CPU_XEON_2)
    assert str(written) in capsys.readouterr().out
    assert load_record(written).band is not None and math.isfinite(load_record(written).offset_sd)
    assert band_for({"cpu": "Intel(R) Xeon(R) Processor", "cpu_count": 2}).aa_runs == 2  # what every run now takes
    assert main(["aa-record", *map(str, xeon), "--write"]) == 2
    assert "pass --replace" in capsys.readouterr().err
