"""Notes into ASV's stats columns: what ``asv compare`` reads, written through ASV's own Results API."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from asv.results import Results
from scipy import stats as sps

from specharness.history.asv import plugin as asvplugin
from specharness.history.asv.notes import Note, apply_notes, companion_path, read_companion, read_notes, write_note

ROOT = Path(__file__).resolve().parents[2]
SLOW = "bench_paired.PairedNgram.track_slowdown"


def a_result_file(tmp_path: Path) -> Path:
    source = next(
        p
        for p in sorted((ROOT / "results" / "cpu-2core-xeon").glob("*.json"))
        if p.name != "machine.json"
        and SLOW in json.loads(p.read_text())["results"]
        and json.loads(p.read_text())["results"][SLOW][0]
    )
    (tmp_path / "cpu-2core-xeon").mkdir()
    shutil.copy(ROOT / "results" / "cpu-2core-xeon" / "machine.json", tmp_path / "cpu-2core-xeon")
    target = tmp_path / "cpu-2core-xeon" / source.name
    shutil.copy(source, target)
    return target


def test_interval_note_becomes_stats_and_survives_a_save(tmp_path: Path) -> None:
    path = a_result_file(tmp_path)
    result = Results.load(str(path))
    params = result.get_result_params(SLOW)
    value = result.get_result_value(SLOW, params)[0]
    note = Note(SLOW, ("'copy'", "1"), result.commit_hash, ci_low=value * 0.9, ci_high=value * 1.1, ci_level=0.95, n=6)
    used = apply_notes(result, [note])
    result.save(str(tmp_path))
    stats = Results.load(str(path)).get_result_stats(SLOW, params)[0]
    assert used == [note]
    # no block values: the note's 95% interval widened to 99% on the log scale (t with n - 1 = 5 df)
    mid, half = math.log(value * math.sqrt(0.99)), math.log(1.1 / 0.9) / 2 * sps.t.ppf(0.995, 5) / sps.t.ppf(0.975, 5)
    assert stats["ci_99_a"] == pytest.approx(math.exp(mid - half), rel=1e-3)  # ASV rounds
    assert stats["ci_99_b"] == pytest.approx(math.exp(mid + half), rel=1e-3)
    assert stats["repeat"] == 6  # compare uses the interval only when repeat != 1


def test_spread_gives_absolute_values_an_interval(tmp_path: Path) -> None:
    path = a_result_file(tmp_path)
    result = Results.load(str(path))
    name = "bench_paired.PairedNgram.track_tpot_p50_ms_baseline"
    result._stats[name] = None  # the committed file already carries the measured spread; start from none
    apply_notes(
        result,
        [],
        {"runs": 3, "factors": {"PairedNgram.tpot_p50_ms_baseline": 1.21, "PairedNgram.incorrect_fraction_ngram": 1.0}},
    )
    assert (
        result.get_result_stats(
            "bench_paired.PairedNgram.track_incorrect_fraction_ngram",
            result.get_result_params("bench_paired.PairedNgram.track_incorrect_fraction_ngram"),
        )[0]
        is None
    )
    params = result.get_result_params(name)
    value = result.get_result_value(name, params)[0]
    stats = result.get_result_stats(name, params)[0]
    # one run's 99% interval from the run-to-run sd s of the log value: factor 1.21 = exp(t(0.975, 8)·√2·s), 8 = the
    # pooled df of 3 runs on 4 cells; the interval uses t(0.995, k - 1 = 2)
    s = math.log(1.21) / (sps.t.ppf(0.975, 8) * math.sqrt(2))
    assert stats["ci_99_b"] / stats["ci_99_a"] == pytest.approx(math.exp(2 * sps.t.ppf(0.995, 2) * s))
    assert math.sqrt(stats["ci_99_a"] * stats["ci_99_b"]) == pytest.approx(value)
    assert stats["q_75"] / stats["q_25"] == pytest.approx(math.exp(2 * sps.norm.ppf(0.75) * s))


def test_plugin_writes_stats_and_a_companion_with_the_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Results, "save", Results.save)  # undone after the test: the plugin wraps it below
    path = a_result_file(tmp_path)
    result = Results.load(str(path))
    monkeypatch.setenv("SPECHARNESS_ASV_NOTES", str(tmp_path / "notes"))
    monkeypatch.setenv("ASV_ENV_NAME", result.env_name)
    write_note(Note(SLOW, ("'copy'", "4"), result.commit_hash, failed="failed: ngram server ended: TypeError: x"))
    write_note(Note(SLOW, ("'copy'", "4"), "another-commit", ci_low=0.1, ci_high=0.2))
    assert len(read_notes(result.env_name, result.commit_hash)) == 1  # another commit's note is not this result's
    asvplugin.install()
    asvplugin.install()  # idempotent: wrapped once
    result.save(str(tmp_path))
    notes = read_companion(path)
    assert companion_path(path).name.endswith(".notes.jsonl")
    assert any(n.failed and "TypeError" in n.failed for n in notes)
    assert read_notes(result.env_name, result.commit_hash) == []  # consumed: none can attach to a later result
