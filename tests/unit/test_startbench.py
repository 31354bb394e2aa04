"""``specharness starts``: bad options stop before any engine, the measurements survive a torn file, the compile
caches are pointed at fresh folders only inside the measurement, and the table shows each start and the later ones'
median. The records below are stand-ins written by hand (the engine-backed start is timed in every engine test's
manifest, tests/engine/test_paired_run.py)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from specharness._errors import ConfigError
from specharness.experiment.config import RunConfig
from specharness.experiment.design import get_profile
from specharness.experiment.startbench import (
    STARTS_FILE,
    StartMeasurement,
    _compile_caches,
    measure_starts,
    read_starts,
)
from specharness.experiment.synthetic import write_synthetic_run
from specharness.records import EngineRecord
from specharness.reporting.report import write_report
from specharness.reporting.start_table import format_starts, phases_text


def standin(arm: str, index: int, total: float, *, error: str = "", preloaded: bool = False) -> StartMeasurement:
    phases = {
        "import_s": total * 0.4,
        "weights_s": 2.0,
        "compile_s": total * 0.4,
        "kv_cache_s": 1.0,
        "graph_capture_s": 1.0,
        "ready_s": total * 0.2 - 4.0,
        "total_s": total,
    }
    return StartMeasurement(
        arm=arm,
        index=index,
        caches="empty" if (arm, index) == ("baseline", 1) else "warmed",
        vllm_version="0.32.0",
        machine="AMD EPYC, 2 cores",
        phases_s=phases,
        to_health_s=total + 0.5,
        first_request_s=0.4,
        second_request_s=0.2,
        log_path=f"logs/{arm}.start{index}.log",
        engine_env={"SPECHARNESS_PRELOADED_SERVER": "1" if preloaded else "0"},
        command=["python", "-m", "vllm.entrypoints.openai.api_server", "--dtype", "float32", "--arm", arm],
        error=error,
    )


def test_bad_arms_and_repeat_stop_before_any_engine(tmp_path: Path) -> None:
    config = RunConfig(profile=get_profile("quick"), out_dir=tmp_path / "s")
    with pytest.raises(ConfigError, match="--repeat 0"):
        measure_starts(config, ["baseline"], repeat=0, fresh_caches=False)
    with pytest.raises(ConfigError, match="--arms nope"):
        measure_starts(config, ["nope"], repeat=1, fresh_caches=False)
    assert not (tmp_path / "s").exists()


def test_the_cli_names_the_bad_option_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "specharness", "starts", "--out", str(tmp_path / "s"), "--repeat", "0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["specharness: error: --repeat 0: give 1 or more starts per arm"]


def test_fresh_caches_apply_inside_the_measurement_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/kept")
    monkeypatch.delenv("VLLM_CACHE_ROOT", raising=False)
    with _compile_caches(tmp_path) as paths:
        assert os.environ["VLLM_CACHE_ROOT"] == paths["VLLM_CACHE_ROOT"]
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"].startswith(str(tmp_path))
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/kept"
    assert "VLLM_CACHE_ROOT" not in os.environ
    with _compile_caches(None) as paths:
        assert paths == {} and os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/kept"


def test_measurements_read_back_past_a_torn_last_line(tmp_path: Path) -> None:
    written = [standin("baseline", 1, 150.0), standin("baseline", 2, 40.0)]
    data = b"".join(orjson.dumps(s.to_dict()) + b"\n" for s in written) + b'{"arm": "base'
    (tmp_path / STARTS_FILE).write_bytes(data)
    assert read_starts(tmp_path) == written
    with pytest.raises(ConfigError, match=r"no starts\.jsonl"):
        read_starts(tmp_path / "elsewhere")


def test_the_table_has_every_start_and_the_later_starts_median() -> None:
    starts = [
        standin("baseline", 1, 150.0),
        standin("ngram", 1, 160.0),
        standin("baseline", 2, 40.0),
        standin("ngram", 2, 44.0),
        standin("baseline", 3, 38.0, preloaded=True),
        standin("ngram", 3, math.nan, error="ngram server ended (exit code 1) while starting: ValueError: boom"),
    ]
    table = format_starts(starts)
    rows = [line for line in table.splitlines() if line.startswith("| baseline") or line.startswith("| ngram")]
    assert len(rows) == 6
    assert "| baseline | 1 | empty | spawned | 150 | 60 | 2 | 60 |" in table
    assert "| baseline | 3 | warmed | preloaded | 38 |" in table  # how the server was started, per start
    assert all(row.count("|") == rows[0].count("|") for row in rows)  # a failure adds no cell the header lacks
    assert "- failed: ngram, round 3: ngram server ended (exit code 1) while starting: ValueError: boom" in table
    assert (
        "- baseline: first start 150 s (caches empty); later starts median 39 s (n = 2; import 16 s, compile 16 s)"
        in table
    )
    # a failed start is shown but never counted in the median
    assert "- ngram: first start 160 s (caches warmed); later starts median 44 s (n = 1;" in table
    assert "vLLM 0.32.0, AMD EPYC, 2 cores" in table
    # what was started (dtype, extra vLLM arguments): each arm's command once
    assert (
        "- ngram's command (first start): `python -m vllm.entrypoints.openai.api_server --dtype float32 --arm ngram`"
        in table
    )
    assert table.count("'s command (first start)") == 2
    assert format_starts([]) == "No engine start was measured.\n"


def test_the_run_report_line_names_each_phase_and_the_first_request() -> None:
    phases = standin("baseline", 2, 40.0).phases_s
    assert phases_text(phases, 0.27) == (
        "start 40 s (import 16, weights 2, compile 16, KV cache / warm-up 1, graph capture 1, ready 4; engine log, "
        "whole seconds), first request 0.27 s"
    )
    assert phases_text(phases, None).endswith("whole seconds)") and phases_text(phases, math.nan).endswith("seconds)")
    assert phases_text({}) == "" and phases_text({"total_s": math.nan}) == "" and phases_text({"total_s": None}) == ""
    assert "weights —" in phases_text({**phases, "weights_s": None})


def test_nan_measurements_survive_the_file_and_the_run_report(tmp_path: Path) -> None:
    """NaN is written as JSON null; read back it must be NaN again (starts.jsonl) or at least render (report.md)."""
    broken = standin("ngram", 2, 40.0)
    broken = StartMeasurement.from_dict(
        {**broken.to_dict(), "first_request_s": math.nan, "phases_s": {**broken.phases_s, "compile_s": math.nan}}
    )
    (tmp_path / STARTS_FILE).write_bytes(orjson.dumps(broken.to_dict()) + b"\n")
    back = read_starts(tmp_path)[0]
    assert math.isnan(back.first_request_s) and math.isnan(back.phases_s["compile_s"])
    assert "| — | 0.20 |" in format_starts([back])
    run = write_synthetic_run(tmp_path / "run", records=96)
    engines = [
        EngineRecord(
            "baseline",
            ["vllm"],
            "logs/b.log",
            1,
            "0.32.0",
            37.5,
            1,
            True,
            None,
            start_phases_s=standin("baseline", 2, 40.0).phases_s,
            first_request_s=0.31,
        ),
        EngineRecord(
            "ngram",
            ["vllm"],
            "logs/n.log",
            2,
            "0.32.0",
            math.nan,
            2,
            False,
            None,
            start_phases_s={**broken.phases_s, "total_s": math.nan},
        ),
    ]
    with open(run / "journal.jsonl", "ab") as journal:
        for e in engines:
            journal.write(orjson.dumps(e.to_dict()) + b"\n")
    write_report(run)
    md = (run / "report.md").read_text()
    assert "  - start 40 s (import 16, weights 2, compile 16, KV cache / warm-up 1, graph capture 1, ready 4; " in md
    assert "first request 0.31 s" in md
    assert md.count("  - start ") == 1  # the engine whose phases were not read gets no line, and no crash


def test_an_existing_measurement_is_never_appended_to(tmp_path: Path) -> None:
    (tmp_path / STARTS_FILE).write_text("")
    config = RunConfig(profile=get_profile("quick"), out_dir=tmp_path)
    with pytest.raises(ConfigError, match="already holds starts"):
        measure_starts(config, ["baseline"], repeat=1, fresh_caches=False)
