"""Engine-backed tests: the real vLLM CPU server with the real default model (SmolLM2-135M-Instruct).

They run in CI. A session fixture makes one tiny paired run through the CLI; the fault tests start their own.
The tiny run also carries two client-side checks that cost no extra engine start: a second workload whose prompt is
longer than the model length (the server answers HTTP 400) and an API key, which must reach vLLM and no file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

TINY = [
    "--clients",
    "1,2",
    "--blocks",
    "2",
    "--requests",
    "3",
    "--warmups",
    "1",
    "--max-tokens-cap",
    "32",
    "--no-progress",
]


TEST_API_KEY = "sk-specharness-test-5f3a9c1e77"
MAX_MODEL_LEN = 2048  # the CLI's default --max-model-len


def cli(*args: str, timeout_s: float = 1500, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specharness", *args], capture_output=True, text=True, timeout=timeout_s, env=env
    )


def start_cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "specharness", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def journal_lines(run_dir: Path) -> list[dict]:
    path = run_dir / "journal.jsonl"
    if not path.is_file():
        return []
    out = []
    for raw in path.read_bytes().splitlines():
        try:
            out.append(orjson.loads(raw))
        except orjson.JSONDecodeError:
            pass
    return out


def wait_for(predicate: Callable[[], bool], proc: subprocess.Popen[str], what: str, limit_s: float = 900) -> None:
    """Poll until ``predicate`` holds; fail if the harness exits first (bounded, stops by itself)."""
    deadline = time.monotonic() + limit_s
    while not predicate():
        if proc.poll() is not None:
            pytest.fail(
                f"harness exited ({proc.returncode}) before {what}: {proc.stderr.read() if proc.stderr else ''}"
            )
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.5)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def engine_groups(run_dir: Path) -> list[int]:
    """Process groups of every engine the run started (each server leads its own session)."""
    return [line["pid"] for line in journal_lines(run_dir) if line.get("kind") in ("engine", "engine_spawned")]


def assert_no_engine_left(run_dir: Path) -> None:
    groups = engine_groups(run_dir)
    assert groups, "the run recorded no engine"
    deadline = time.monotonic() + 30
    while any(group_alive(g) for g in groups) and time.monotonic() < deadline:
        time.sleep(0.5)
    alive = [g for g in groups if group_alive(g)]
    for g in alive:
        os.killpg(g, signal.SIGKILL)
    assert not alive, f"engine process groups still alive after the harness exited: {alive}"


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("tiny")
    overlong = where / "overlong.jsonl"  # about 3 tokens a repetition: far past MAX_MODEL_LEN
    case = {
        "id": "too-long",
        "prompt": "Repeat this. " * MAX_MODEL_LEN,
        "max_tokens": 16,
        "check": {"type": "contains", "values": ["Repeat"]},
    }
    overlong.write_bytes(orjson.dumps(case) + b"\n")
    out = where / "run"
    env = {**os.environ, "SPECHARNESS_TEST_API_KEY": TEST_API_KEY}
    result = cli(
        "run",
        *TINY,
        "--workloads",
        f"copy,{overlong}",
        "--api-key-env",
        "SPECHARNESS_TEST_API_KEY",
        "--out",
        str(out),
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return out
