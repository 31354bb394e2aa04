"""Engine-backed tests: the real vLLM CPU server with the real default model (SmolLM2-135M-Instruct).

They run in CI. A session fixture makes one tiny paired run through the CLI; the fault tests start their own.
The tiny run also carries two client-side checks that cost no extra engine start: a second workload whose prompt is
longer than the model length (the server answers HTTP 400) and an API key, which must reach vLLM and no file.

Engine starts are shared where sharing proves the same thing: the tests whose runs only need engines (``--attach``
aside) run with ``pooled_env`` (an engine pool for the session, specharness.engines.pool), so the ASV smoke runs, the
replay run, the until-decided run and the resume of the crashed run start one baseline, one ngram and one extra
baseline between them, and those modules run first, back to back (:func:`pytest_collection_modifyitems`), so the
pooled engines idle out (``POOL_IDLE_S``) before the rest start theirs. The tiny run (the CLI starting and stopping
its own engines, with an API key), the attach tests (servers under a name of their own) and the fault tests' runs that
are killed or signalled (they own their engines: that is what they test) start their own. At the end of the session
every pooled server must be gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import psutil
import pytest

from specharness.engines.pool import IDLE_ENV, OWNER_ENV, POOL_ENV, EnginePool
from specharness.engines.server import group_alive

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
# run first, in this order (the fault module's first test resumes a run on pooled engines)
POOLED_MODULES = ("test_asv_smoke.py", "test_replay_run.py", "test_until_decided.py", "test_faults.py")
POOL_IDLE_S = 180  # longer than any gap between two pooled runs, short enough not to overlap the later modules much
MAX_MODEL_LEN = 2048  # the CLI's default --max-model-len


def own_env() -> dict[str, str]:
    """This environment less any engine pool: a run started with it starts (and must stop) its own engines."""
    return {k: v for k, v in os.environ.items() if k not in (POOL_ENV, OWNER_ENV)}


def cli(*args: str, timeout_s: float = 1500, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specharness", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=own_env() if env is None else env,
    )


def start_cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "specharness", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=own_env(),
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


def groups_alive_after(groups: list[int], wait_s: float = 30.0) -> list[int]:
    """The process groups still alive once they had ``wait_s`` to go (a stopped server's processes take a moment to
    exit and be reaped)."""
    deadline = time.monotonic() + wait_s
    while any(group_alive(g) for g in groups) and time.monotonic() < deadline:
        time.sleep(0.5)
    return [g for g in groups if group_alive(g)]


def engine_groups(run_dir: Path) -> list[int]:
    """Process groups of every engine the run started (each server leads its own session)."""
    return [line["pid"] for line in journal_lines(run_dir) if line.get("kind") in ("engine", "engine_spawned")]


def assert_no_engine_left(run_dir: Path) -> None:
    groups = engine_groups(run_dir)
    assert groups, "the run recorded no engine"
    alive = groups_alive_after(groups)
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
    env = {**own_env(), "SPECHARNESS_TEST_API_KEY": TEST_API_KEY}
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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules that share pooled engines first, back to back; the rest keep their order."""

    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return POOLED_MODULES.index(name) if name in POOLED_MODULES else len(POOLED_MODULES)

    items.sort(key=rank)  # stable: the order within a module is kept


@pytest.fixture(scope="session")
def engine_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EnginePool]:
    """The session's engine pool, owned by this pytest process; at the end every pooled server must be gone."""
    pool = EnginePool(tmp_path_factory.mktemp("engine-pool"), owner_pid=os.getpid(), idle_s=POOL_IDLE_S)
    try:
        yield pool
    finally:
        servers = [lease.pid for lease in pool.leases() if lease.pid > 0]
        pool.shutdown()
        alive = groups_alive_after(servers)
        for pid in alive:
            os.killpg(pid, signal.SIGKILL)
        keepers = [
            p.pid for p in psutil.process_iter(["cmdline"]) if str(pool.root) in " ".join(p.info["cmdline"] or [])
        ]
        assert not alive and not keepers, f"pooled servers {alive} or keepers {keepers} alive after the session"


@pytest.fixture(scope="session")
def pooled_env(engine_pool: EnginePool) -> dict[str, str]:
    """The environment that makes a ``specharness run`` (or an ``asv run``) take its engines from the session's pool."""
    return {
        **os.environ,
        POOL_ENV: str(engine_pool.root),
        OWNER_ENV: str(os.getpid()),
        IDLE_ENV: str(POOL_IDLE_S),
    }


def assert_pooled_and_released(run_dir: Path) -> None:
    """Every engine of the run came from the pool (journaled with ``reused``) and was released: its log in the run
    folder ends with the pooled server's log, which the release copies in."""
    engines = [line for line in journal_lines(run_dir) if line.get("kind") == "engine"]
    assert engines and all((e.get("reused") or {}).get("pooled") for e in engines), engines
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    assert {e["arm"] for e in manifest["engines_reused"]} == {e["arm"] for e in engines}
    for e in engines:
        assert "--- the pooled engine's log" in (run_dir / e["log_path"]).read_text(errors="replace"), e["log_path"]
    if any(e["reused"].get("reused") for e in engines) and (run_dir / "report.md").is_file():
        assert "reused from the engine pool" in (run_dir / "report.md").read_text()
