"""Engine-backed tests: the real vLLM CPU server with the real default model (SmolLM2-135M-Instruct).

They run in CI. A session fixture makes one tiny paired run through the CLI; the fault tests start their own.
The tiny run also carries two client-side checks that cost no extra engine start: a second workload whose prompt is
longer than the model length (the server answers HTTP 400) and an API key, which must reach vLLM and no file; its
servers are forked from a preloaded interpreter (SPECHARNESS_PRELOADED_SERVER=1, the GPU's default), so the real
server runs that way too, while every other run here spawns its servers (the CPU's default).

Engine starts are shared where sharing proves the same thing: the tests whose runs only need engines (``--attach``
aside) run with ``pooled_env`` (an engine pool for the session, specharness.engines.pool), so the ASV smoke runs, the
replay run, the until-decided run, the resume of the crashed run and the SIGINT run (an interrupted run must let its
pooled engines go alive) start one baseline, one ngram and one extra baseline between them (the extra one stopped once
the until-decided module is done), and those modules run first, back to back (:func:`pytest_collection_modifyitems`);
the pool is shut down as soon as the last test that uses it is done (:func:`pytest_runtest_teardown`), so its engines never share the machine with the starts that follow. The
tiny run (the CLI starting and stopping its own engines, with an API key), the attach tests (servers under a name of
their own), the crashed run and the SIGTERM run (they own their engines: stopping them is what they test) start their
own. At the end of the session every pooled server must be gone.

Engine starts overlap where the machine has room (2 CPU cores, at most 4 engines at once): a run that owns its engines
may be launched in the background (:class:`BackgroundRun`) ahead of the test that checks it: the crashed run while
the ASV smoke run starts the pool's first engines (:data:`LAUNCHED_WITH`), the SIGTERM run (on vLLM's default
cores) while the resume and the SIGINT run (test_faults.py) drive the pooled engines, the tiny run while the attach
module starts and drives its own servers. vLLM's CPU build pins every
engine's worker to the same core by default (core 0 of 2, the last core left to the engine and API processes), so
engines started together would still queue on that one core: the run launched alongside others has its engines bound
to the spare core (:func:`spare_core_env`). Only the cores differ; every check is the same and runs on the real engine.
"""

from __future__ import annotations

import concurrent.futures
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
from specharness.engines.preload import ENV as PRELOAD_ENV
from specharness.engines.server import group_alive

# vLLM's profile run at start-up (the CPU build's "warm-up": one forward pass of max_num_batched_tokens tokens) is
# most of an engine start on 2 CPU cores: 56 of 89 s at vLLM's default (2048) and 14-16 of 44-45 s at 128 (a baseline
# and an ngram start, AVX2-only EPYC, ``specharness starts``). Where the CPU has no bf16 matmul (AVX2 only), the
# default bfloat16 goes through torch's slow path: a 16-token request took 1.50-1.59 s in bfloat16 and 0.81-0.90 s
# in float32 (both at 128 tokens a step, starts 44-45 s and 46-50 s; the same EPYC). These tests check the harness,
# not the engine's speed: every engine they start runs float32 where the CPU lacks bf16 instructions (the --dtype
# engine option, what report.md advises there; bfloat16, vLLM's CPU default, elsewhere) and schedules at most 128
# tokens a step (a vLLM argument, passed as any user passes one), both journaled (the manifest's config, the command
# line in report.md), the same in every test so that pooled runs still share their engines.
BF16_FLAGS = {"avx512_bf16", "amx_bf16"}  # /proc/cpuinfo flags of CPUs whose oneDNN has bf16 matmul


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    return {word for line in text.splitlines() if line.startswith("flags") for word in line.split(":", 1)[1].split()}


TEST_DTYPE = "bfloat16" if BF16_FLAGS & _cpu_flags() else "float32"
ENGINE_BATCH = ("--max-num-batched-tokens", "128")
ENGINE_ARGS = ["--dtype", TEST_DTYPE, *(f"--engine-arg={word}" for word in ENGINE_BATCH)]  # for ``specharness run``
ASV_ENGINE = " ".join(("--dtype", TEST_DTYPE, *ENGINE_BATCH))  # for an ``asv run`` (SPECHARNESS_ASV_ENGINE)

TINY = [
    *ENGINE_ARGS,
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
FAULT_RUN = [
    *ENGINE_ARGS,
    "--workloads",
    "copy",
    "--clients",
    "1",
    "--blocks",
    "2",
    "--requests",
    "6",
    "--warmups",
    "0",
    "--max-tokens-cap",
    "64",
    "--no-progress",
]


TEST_API_KEY = "sk-specharness-test-5f3a9c1e77"
# run first, in this order (the fault module's first test resumes a run on pooled engines)
POOLED_MODULES = ("test_asv_smoke.py", "test_replay_run.py", "test_until_decided.py", "test_faults.py")
POOL_IDLE_S = 180  # longer than any gap between two pooled runs
MAX_MODEL_LEN = 2048  # the CLI's default --max-model-len
BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"  # vLLM (CPU build): the cores an engine's worker is pinned to
# background runs launched before the first test of a module, when a selected test needs them (else when needed)
LAUNCHED_WITH = {
    "crashed_run": "test_asv_smoke.py",
    "sigterm_run": "test_faults.py",
    "tiny_run_launched": "test_attach.py",
}
POOL_KEY = pytest.StashKey[EnginePool]()


def own_env() -> dict[str, str]:
    """This environment less any engine pool: a run started with it starts (and must stop) its own engines."""
    return {k: v for k, v in os.environ.items() if k not in (POOL_ENV, OWNER_ENV)}


def spare_core_env() -> dict[str, str]:
    """:func:`own_env` for a run whose engines start while other engines start or run: its engines' workers are
    bound to the last allowed core, the one vLLM's default binding leaves to the engine and API processes (with
    fewer than 2 cores, or a binding set by the caller's environment, the environment is left as it is)."""
    env = own_env()
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) >= 2 and BIND_ENV not in env:
        env[BIND_ENV] = str(cores[-1])
    return env


def cli(*args: str, timeout_s: float = 1500, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specharness", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=own_env() if env is None else env,
    )


def _interruptible() -> None:
    """In the child before exec: SIGINT at its default, as in a terminal. A shell without job control starts a
    background command (``pytest … &``) with SIGINT ignored, the CLI would inherit that and the SIGINT tests would
    see a run that cannot be interrupted."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "specharness", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=own_env() if env is None else env,
        preexec_fn=_interruptible,
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


def measured(run_dir: Path, arm: str) -> list[dict]:
    return [x for x in journal_lines(run_dir) if x.get("kind") == "request" and x["arm"] == arm and not x["warmup"]]


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


_DRIVERS = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="background-run")
_LAUNCHED: list[BackgroundRun] = []


class BackgroundRun:
    """A ``specharness run`` started now and driven on a thread by ``drive(proc, out)`` (wait for a moment, kill or
    signal something, collect the exit), checked later by a test through :meth:`result`: its engine starts and
    requests overlap other tests' work. ``drive`` is what the test would otherwise do inline, unchanged."""

    def __init__(
        self,
        out: Path,
        args: list[str],
        drive: Callable[[subprocess.Popen[str], Path], tuple[int, str]],
        env: dict[str, str] | None = None,
    ) -> None:
        self.out = out
        self.proc = start_cli("run", *args, "--out", str(out), env=env)
        self._future = _DRIVERS.submit(drive, self.proc, out)
        _LAUNCHED.append(self)

    def result(self) -> tuple[int, str]:
        """Wait for the drive to end: the harness's exit status and stderr (a failure in the drive fails here)."""
        return self._future.result()

    def wait(self) -> None:
        """Wait for the drive to end, whatever its outcome (the test that checks the run reports it)."""
        concurrent.futures.wait([self._future])

    def stop(self) -> None:
        """Kill the harness if it still runs (its engines die with it) and wait for the drive to notice."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.wait()


def collect(proc: subprocess.Popen[str], out: Path, timeout_s: float = 1500) -> tuple[int, str]:
    """Drive a run to its end: its exit status and stderr (killed past ``timeout_s``)."""
    try:
        _, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, stderr


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


def crash_ngram_mid_cell(proc: subprocess.Popen[str], out: Path) -> tuple[int, str]:
    """Block 0 runs baseline then ngram: SIGKILL ngram's server once it has answered two requests of its first cell,
    then collect the harness's exit."""
    wait_for(lambda: len(measured(out, "ngram")) >= 2, proc, "ngram's first answers")
    ngram_pid = next(x["pid"] for x in journal_lines(out) if x.get("kind") == "engine" and x["arm"] == "ngram")
    os.kill(ngram_pid, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=600)
    return proc.returncode, stderr


def signal_mid_run(signum: signal.Signals) -> Callable[[subprocess.Popen[str], Path], tuple[int, str]]:
    """Send ``signum`` to the harness once the first measured answer is journaled; collect its exit."""

    def drive(proc: subprocess.Popen[str], out: Path) -> tuple[int, str]:
        wait_for(lambda: len(measured(out, "baseline")) >= 1, proc, "the first measured answer")
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=300)
        return proc.returncode, stderr

    return drive


@pytest.fixture(scope="session")
def sigterm_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundRun]:
    """test_faults' SIGTERM run, on engines of its own, launched with the fault module (:data:`LAUNCHED_WITH`): its
    starts overlap the resume and the SIGINT run, which drive the pooled engines. Its engines keep vLLM's default
    cores, as the signalled runs always had (bound to the spare core the SIGTERM test took 68 s after the pooled
    runs, on the default cores 67-71 s: no difference measured)."""
    run = BackgroundRun(tmp_path_factory.mktemp("sigterm") / "SIGTERM", FAULT_RUN, signal_mid_run(signal.SIGTERM))
    try:
        yield run
    finally:
        run.stop()


@pytest.fixture(scope="session")
def crashed_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundRun]:
    """test_faults' crashed run, on engines of its own (bound to the spare core), launched with the ASV smoke module
    (:data:`LAUNCHED_WITH`): its starts overlap the pool's first."""
    run = BackgroundRun(tmp_path_factory.mktemp("crash") / "crash", FAULT_RUN, crash_ngram_mid_cell, spare_core_env())
    try:
        yield run
    finally:
        run.stop()


@pytest.fixture(scope="session")
def tiny_run_launched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundRun]:
    """The tiny run (:func:`tiny_run`), launched with the attach module (:data:`LAUNCHED_WITH`): its engines (bound
    to the spare core) start and answer while the attach module's own servers do."""
    where = tmp_path_factory.mktemp("tiny")
    overlong = where / "overlong.jsonl"  # about 3 tokens a repetition: far past MAX_MODEL_LEN
    case = {
        "id": "too-long",
        "prompt": "Repeat this. " * MAX_MODEL_LEN,
        "max_tokens": 16,
        "check": {"type": "contains", "values": ["Repeat"]},
    }
    overlong.write_bytes(orjson.dumps(case) + b"\n")
    args = [*TINY, "--workloads", f"copy,{overlong}", "--api-key-env", "SPECHARNESS_TEST_API_KEY"]
    env = {**spare_core_env(), "SPECHARNESS_TEST_API_KEY": TEST_API_KEY, PRELOAD_ENV: "1"}  # servers forked
    run = BackgroundRun(where / "run", args, collect, env)
    try:
        yield run
    finally:
        run.stop()


@pytest.fixture(scope="session")
def tiny_run(tiny_run_launched: BackgroundRun) -> Path:
    returncode, stderr = tiny_run_launched.result()
    assert returncode == 0, stderr[-3000:]
    return tiny_run_launched.out


@pytest.fixture(autouse=True)
def _launch_background_runs(request: pytest.FixtureRequest) -> None:
    """Launch each run of :data:`LAUNCHED_WITH` once the session reaches its module, if a selected test needs it."""
    items = request.session.items
    here = items.index(request.node) if request.node in items else 0
    for name, module in LAUNCHED_WITH.items():
        firsts = [i for i, item in enumerate(items) if item.path.name == module]
        if firsts and here >= firsts[0] and any(name in getattr(item, "fixturenames", ()) for item in items):
            request.getfixturevalue(name)


def wait_for_background_runs() -> None:
    """Wait until every background run launched so far has ended (its harness exited, its engines stopped): before
    a run that measures a known ratio, or that starts an engine of its own (never more than 4 engines at once)."""
    for run in list(_LAUNCHED):
        run.wait()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules that share pooled engines first, back to back; the rest keep their order."""

    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return POOLED_MODULES.index(name) if name in POOLED_MODULES else len(POOLED_MODULES)

    items.sort(key=rank)  # stable: the order within a module is kept


def stop_pool(pool: EnginePool) -> None:
    """Shut the pool down; every pooled server and keeper must then be gone."""
    servers = [lease.pid for lease in pool.leases() if lease.pid > 0]
    pool.shutdown()
    alive = groups_alive_after(servers)
    for pid in alive:
        os.killpg(pid, signal.SIGKILL)
    keepers = [p.pid for p in psutil.process_iter(["cmdline"]) if str(pool.root) in " ".join(p.info["cmdline"] or [])]
    assert not alive and not keepers, f"pooled servers {alive} or keepers {keepers} alive after the pool's shutdown"


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Once the last test that uses the session's pool is torn down, shut the pool down (and check it is gone)."""
    pool = item.session.stash.get(POOL_KEY, None)
    if pool is None or "pooled_env" not in getattr(item, "fixturenames", ()):
        return
    items = item.session.items
    if any("pooled_env" in getattr(later, "fixturenames", ()) for later in items[items.index(item) + 1 :]):
        return
    del item.session.stash[POOL_KEY]
    stop_pool(pool)


@pytest.fixture(scope="session")
def engine_pool(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EnginePool]:
    """The session's engine pool, owned by this pytest process; shut down after the last test that uses it, or at
    the end of the session: then every pooled server must be gone."""
    pool = EnginePool(tmp_path_factory.mktemp("engine-pool"), owner_pid=os.getpid(), idle_s=POOL_IDLE_S)
    request.session.stash[POOL_KEY] = pool
    try:
        yield pool
    finally:
        if POOL_KEY in request.session.stash:
            del request.session.stash[POOL_KEY]
        stop_pool(pool)


@pytest.fixture(scope="session")
def pooled_env(engine_pool: EnginePool) -> dict[str, str]:
    """The environment that makes a ``specharness run`` (or an ``asv run``) take its engines from the session's pool."""
    return {
        **os.environ,
        POOL_ENV: str(engine_pool.root),
        OWNER_ENV: str(os.getpid()),
        IDLE_ENV: str(POOL_IDLE_S),
    }


def stop_engines_started_by(run_dir: Path, pool: EnginePool) -> None:
    """Stop the pooled engines ``run_dir``'s run started itself (not those it found), the way the pool stops one
    (SIGTERM to its keeper), and check they are gone: an engine only that run needed must not idle beside the next
    modules' own starts."""
    digests = {
        line["reused"]["lease"]
        for line in journal_lines(run_dir)
        if line.get("kind") == "engine" and line.get("reused") and not line["reused"].get("reused")
    }
    leases = [lease for lease in pool.leases() if lease.key_hash in digests]
    for lease in leases:
        os.killpg(lease.keeper_pid, signal.SIGTERM)
    alive = groups_alive_after([lease.pid for lease in leases if lease.pid > 0])
    assert not alive, f"pooled servers {alive} outlived their keepers"


def assert_pooled_and_released(run_dir: Path) -> None:
    """Every engine of the run came from the pool (journaled with ``reused``, and the launch as an ``engine_launch``
    event of mode "pooled", together on the CPU build) and was released: its log in the run folder ends with the
    pooled server's log, which the release copies in."""
    lines = journal_lines(run_dir)
    engines = [line for line in lines if line.get("kind") == "engine"]
    assert engines and all((e.get("reused") or {}).get("pooled") for e in engines), engines
    launches = [line["report"] for line in lines if line.get("kind") == "engine_launch"]
    assert launches and all(r["mode"] == "pooled" and r["plan"]["strategy"] == "together" for r in launches), launches
    assert {arm for r in launches for arm in r["order"]} == {e["arm"] for e in engines}
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    assert {e["arm"] for e in manifest["engines_reused"]} == {e["arm"] for e in engines}
    for e in engines:
        assert "--- the pooled engine's log" in (run_dir / e["log_path"]).read_text(errors="replace"), e["log_path"]
    if any(e["reused"].get("reused") for e in engines) and (run_dir / "report.md").is_file():
        assert "reused from the engine pool" in (run_dir / "report.md").read_text()
