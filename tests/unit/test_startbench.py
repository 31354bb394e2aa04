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
from specharness.reporting.start_table import format_starts, phases_text


def standin(arm: str, index: int, total: float, *, error: str = "") -> StartMeasurement:
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
        fresh_caches=True,
        vllm_version="0.32.0",
        machine="AMD EPYC, 2 cores",
        phases_s=phases,
        to_health_s=total + 0.5,
        first_request_s=0.4,
        second_request_s=0.2,
        log_path=f"logs/{arm}.start{index}.log",
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
        standin("baseline", 3, 38.0),
        standin("ngram", 3, math.nan, error="ngram server ended (exit code 1) while starting: ValueError: boom"),
    ]
    table = format_starts(starts)
    rows = [line for line in table.splitlines() if line.startswith("| baseline") or line.startswith("| ngram")]
    assert len(rows) == 6
    assert "| baseline | 1 | 150 | 60 | 2 | 60 |" in table
    assert "failed: ngram server ended (exit code 1) while starting: ValueError: boom" in rows[-1]
    assert "- baseline: first start 150 s; later starts median 39 s (n = 2; import 16 s, compile 16 s)" in table
    # a failed start is shown but never counted in the median
    assert "- ngram: first start 160 s; later starts median 44 s (n = 1;" in table
    assert "vLLM 0.32.0, AMD EPYC, 2 cores" in table
    assert format_starts([]) == "No engine start was measured.\n"


def test_the_run_report_line_names_each_phase_and_the_first_request() -> None:
    phases = {**standin("baseline", 2, 40.0).phases_s, "first_request_s": 0.27}
    assert phases_text(phases) == (
        "start 40 s (import 16, weights 2, compile 16, KV cache / warm-up 1, graph capture 1, ready 4), "
        "first request 0.27 s"
    )
    assert phases_text({k: v for k, v in phases.items() if k != "first_request_s"}).endswith("ready 4)")
    assert phases_text({}) == "" and phases_text({"total_s": math.nan}) == ""
