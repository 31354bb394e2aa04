"""The engine pool (specharness.engines.pool): engine keys, leases, and the keeper's life, on a stand-in server.

The keeper runs as in production (``python -m specharness.engines.pool keep``) and starts an EngineServer whose
``python`` is a stand-in interpreter: it passes every call through to this Python except the vLLM server module,
for which it runs a tiny HTTP server answering /health, /version, /v1/models and /metrics. So these tests prove the
pool's bookkeeping (start once, reuse, release, idle limit, owner gone, a killed keeper) without vLLM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from specharness._errors import ConfigError, EngineError
from specharness.engines import preload
from specharness.engines.fleet import fits, pooled_plan
from specharness.engines.memory import DeviceMemory
from specharness.engines.pool import (
    GPU_SLOTS_ENV,
    IDLE_ENV,
    EnginePool,
    Lease,
    engine_key,
    gpu_slots,
    idle_limit_s,
    key_hash,
    pool_applies,
)
from specharness.engines.server import ArmSpec, EngineSettings
from specharness.experiment.journal import Journal
from specharness.experiment.rundir import _engines_reused
from specharness.records import EngineRecord

NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}

STANDIN_SERVER = textwrap.dedent(
    """
    import json, os, sys
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    args = sys.argv[1:]
    port = int(args[args.index("--port") + 1])
    name = args[args.index("--served-model-name") + 1]
    failures = os.environ.get("STANDIN_FAILURES", "")  # a file holding how many starts fail as vLLM does without memory
    left = int(open(failures).read() or 0) if failures else 0
    if left > 0:
        open(failures, "w").write(str(left - 1))
        print("ValueError: No available memory for the cache blocks. Try increasing gpu_memory_utilization", flush=True)
        sys.exit(1)
    print("stand-in vLLM server on", port, flush=True)
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass
        def do_GET(self):
            bodies = {
                "/health": "",
                "/version": json.dumps({"version": "0.0.0-standin"}),
                "/v1/models": json.dumps({"data": [{"id": name}]}),
                "/metrics": 'vllm:request_success_total{finished_reason="stop"} 3.0\\n',
            }
            body = bodies.get(self.path.split("?")[0])
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write((body or "").encode())
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
    """
)


@pytest.fixture
def standin_python(tmp_path: Path) -> str:
    """A stand-in interpreter: the vLLM server module becomes the tiny HTTP server above; all else is this Python
    (with a fake ``vllm`` module on its path, so the harness's "is vLLM installed" probe passes)."""
    server = tmp_path / "standin_server.py"
    server.write_text(STANDIN_SERVER)
    fake = tmp_path / "fakevllm"
    (fake / "vllm").mkdir(parents=True)
    (fake / "vllm" / "__init__.py").write_text("")
    script = tmp_path / "standin-python"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "-m" ] && [ "$2" = "vllm.entrypoints.openai.api_server" ]; then shift 2; '
        f'exec {sys.executable} {server} "$@"; fi\n'
        f'PYTHONPATH={fake} exec {sys.executable} "$@"\n'
    )
    script.chmod(0o755)
    return str(script)


def settings_for(python: str) -> EngineSettings:
    return EngineSettings(
        model_path="standin-model-path", served_model_name="standin-model", python=python, start_timeout_s=60
    )


def wait_until(predicate: Callable[[], bool], limit_s: float = 30.0) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not reaped by its parent) is gone for our purpose
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_engine_key_changes_with_what_makes_the_engine_and_nothing_else() -> None:
    base = EngineSettings(model_path="/m", served_model_name="m")
    arm = ArmSpec("ngram", speculative_config=NGRAM)
    key = key_hash(engine_key(base, arm, {}))
    assert key_hash(engine_key(replace(base, port=8123, start_timeout_s=5), arm, {"HOME": "/x"})) == key
    assert key_hash(engine_key(base, replace(arm, name="other", client_slowdown=0.8), {})) == key
    different = [
        engine_key(replace(base, model_path="/other"), arm, {}),
        engine_key(replace(base, extra_args=("--enforce-eager",)), arm, {}),
        engine_key(replace(base, api_key="k"), arm, {}),
        engine_key(base, replace(arm, speculative_config={**NGRAM, "num_speculative_tokens": 2}), {}),
        engine_key(base, replace(arm, async_scheduling=False), {}),
        engine_key(base, arm, {"VLLM_USE_AOT_COMPILE": "1"}),
        engine_key(base, arm, {}, instance=1),
    ]
    hashes = {key_hash(k) for k in different}
    assert key not in hashes and len(hashes) == len(different)
    assert engine_key(replace(base, api_key="secret-key"), arm, {})["settings"].get("api_key") is None


def test_idle_limit_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(IDLE_ENV, raising=False)
    assert idle_limit_s() == 300.0
    monkeypatch.setenv(IDLE_ENV, "45")
    assert idle_limit_s() == 45.0
    for bad in ("0", "-3", "soon"):
        monkeypatch.setenv(IDLE_ENV, bad)
        with pytest.raises(ConfigError, match=IDLE_ENV):
            idle_limit_s()


def test_pool_applies_to_engines_with_free_ports_only() -> None:
    s = EngineSettings(model_path="/m", served_model_name="m")
    assert pool_applies(s)
    assert not pool_applies(replace(s, port=8000))


def test_gpu_slots_read_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(GPU_SLOTS_ENV, raising=False)
    assert gpu_slots() == 3
    monkeypatch.setenv(GPU_SLOTS_ENV, "2")
    assert gpu_slots() == 2
    for bad in ("0", "-1", "two", "1.5"):
        monkeypatch.setenv(GPU_SLOTS_ENV, bad)
        with pytest.raises(ConfigError, match=GPU_SLOTS_ENV):
            gpu_slots()


def test_lease_round_trip_ignores_unknown_keys(tmp_path: Path) -> None:
    lease = Lease("abc", "baseline", "ready", 1, "7", 2, 300.0, "run-1", 10.0, url="http://h:9", pids=[3], start_s=1.5)
    lease = replace(lease, ready_unix_s=11.5)
    path = tmp_path / "abc.lease.json"
    lease.write(path)
    path.write_text(path.read_text().replace('"state"', '"future_field": 1, "state"'))
    assert Lease.read(path) == lease
    assert Lease.read(tmp_path / "missing.json") is None


def test_engines_start_once_are_reused_then_stop_when_idle(standin_python: str, tmp_path: Path) -> None:
    pool = EnginePool(tmp_path / "pool", owner_pid=os.getpid(), idle_s=1.5)
    settings = settings_for(standin_python)
    arms = [ArmSpec("baseline"), ArmSpec("ngram", speculative_config=NGRAM)]
    logs = {a.name: tmp_path / "run1" / "logs" / f"{a.name}.log" for a in arms}
    first = pool.acquire(settings, arms, started_by="run1", run_logs=logs)
    assert [e.reused for e in first.values()] == [False, False]
    pids = {arm: e.reuse_record()["pid"] for arm, e in first.items()}
    assert all(pid_alive(p) for p in pids.values()) and len(set(pids.values())) == 2
    for engine in first.values():
        engine.stop()
    assert "stand-in vLLM server" in logs["baseline"].read_text()  # the engine's log is copied into the run folder
    logs2 = {a.name: tmp_path / "run2" / "logs" / f"{a.name}.log" for a in arms}
    second = pool.acquire(settings, arms, started_by="run2", run_logs=logs2)
    records = {arm: e.reuse_record() for arm, e in second.items()}
    assert all(e.reused for e in second.values())
    assert {arm: r["pid"] for arm, r in records.items()} == pids
    assert all(r["started_by"] == "run1" and r["requests_served_before"] == 3 for r in records.values())
    starts = [line for log in pool.root.glob("*.keeper.log") for line in log.read_text().splitlines()]
    assert sum(line.endswith(": starting the server") for line in starts) == 2  # two engines, each started once
    time.sleep(2.5)  # held: past the idle limit, nothing stops
    assert all(pid_alive(p) for p in pids.values()) and len(pool.leases()) == 2
    for engine in second.values():
        engine.stop()
    assert wait_until(lambda: not pool.leases() and not any(pid_alive(p) for p in pids.values())), pool.leases()


def test_an_a_a_pair_gets_two_engines_and_a_client_side_arm_reuses_one(standin_python: str, tmp_path: Path) -> None:
    pool = EnginePool(tmp_path / "pool", owner_pid=os.getpid(), idle_s=30.0)
    settings = settings_for(standin_python)
    logs = {n: tmp_path / f"{n}.log" for n in ("baseline", "baseline-b", "baseline-slow")}
    try:
        pair = pool.acquire(settings, [ArmSpec("baseline"), ArmSpec("baseline-b")], started_by="aa", run_logs=logs)
        assert len({e.reuse_record()["pid"] for e in pair.values()}) == 2
        for engine in pair.values():
            engine.stop()
        slow = [ArmSpec("baseline"), ArmSpec("baseline-slow", client_slowdown=0.8)]
        again = pool.acquire(settings, slow, started_by="known-effect", run_logs=logs)
        assert [e.reused for e in again.values()] == [True, True]
        assert again["baseline-slow"].reuse_record()["pid"] == pair["baseline-b"].reuse_record()["pid"]
        for engine in again.values():
            engine.stop()
    finally:
        pool.shutdown()
    assert not pool.leases()


def test_keepers_stop_when_the_owner_is_gone(standin_python: str, tmp_path: Path) -> None:
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        pool = EnginePool(tmp_path / "pool", owner_pid=owner.pid, idle_s=600.0)
        held = pool.acquire(
            settings_for(standin_python),
            [ArmSpec("baseline")],
            started_by="r",
            run_logs={"baseline": tmp_path / "b.log"},
        )
        pid = held["baseline"].reuse_record()["pid"]
        assert pid_alive(pid)
    finally:
        owner.kill()
        owner.wait()
    assert wait_until(lambda: not pid_alive(pid) and not pool.leases()), "the server outlived its owner"


def test_keepers_of_one_pool_fork_their_servers_from_one_preloader(
    standin_python: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With SPECHARNESS_PRELOADED_SERVER=1 (a GPU's default) the keepers' servers are forked from one preloader per
    pool, which imports the server module once (here a stand-in on the fake vllm's path) and ends with the owner."""
    openai = tmp_path / "fakevllm" / "vllm" / "entrypoints" / "openai"
    openai.mkdir(parents=True)
    for folder in (openai.parent, openai):
        (folder / "__init__.py").write_text("")
    marks = tmp_path / "imports"  # what the server module imports (its own code runs per start, as with python -m)
    (openai.parent.parent / "heavy.py").write_text(f"open({str(marks)!r}, 'a').write('imported\\n')\n")
    module = "import vllm.heavy\nif __name__ == '__main__':\n"
    (openai / "api_server.py").write_text(module + textwrap.indent(STANDIN_SERVER, "    "))
    monkeypatch.setenv(preload.ENV, "1")
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    pool = EnginePool(tmp_path / "pool", owner_pid=owner.pid, idle_s=600.0)
    arms = [ArmSpec("baseline"), ArmSpec("ngram", speculative_config=NGRAM)]
    try:
        held = pool.acquire(
            settings_for(standin_python), arms, started_by="r", run_logs={a.name: tmp_path / a.name for a in arms}
        )
        pids = [engine.reuse_record()["pid"] for engine in held.values()]
        assert all(pid_alive(pid) for pid in pids) and len(set(pids)) == 2
        assert [lease.engine_env.get(preload.ENV) for lease in pool.leases()] == ["1", "1"]
        assert marks.read_text() == "imported\n"  # one import for both servers
        log = next(pool.root.glob("preloader.*.log")).read_text()
        preloader = int(log.split()[1].rstrip(":"))
        assert pid_alive(preloader)
    finally:
        owner.kill()
        owner.wait()
    assert wait_until(lambda: not any(pid_alive(p) for p in [*pids, preloader]), limit_s=60)


def test_a_killed_keeper_takes_its_server_along(standin_python: str, tmp_path: Path) -> None:
    pool = EnginePool(tmp_path / "pool", owner_pid=os.getpid(), idle_s=600.0)
    held = pool.acquire(
        settings_for(standin_python), [ArmSpec("baseline")], started_by="r", run_logs={"baseline": tmp_path / "b.log"}
    )
    record = held["baseline"].reuse_record()
    os.kill(record["keeper_pid"], signal.SIGKILL)
    assert wait_until(lambda: not pid_alive(record["pid"])), "the server outlived its killed keeper"
    held["baseline"].stop()
    # the lease of a dead keeper is not reused: the next acquire starts a new engine
    again = pool.acquire(
        settings_for(standin_python), [ArmSpec("baseline")], started_by="r2", run_logs={"baseline": tmp_path / "c.log"}
    )
    try:
        assert not again["baseline"].reused and again["baseline"].reuse_record()["pid"] != record["pid"]
    finally:
        again["baseline"].stop()
        pool.shutdown()


def test_the_manifest_lists_the_reused_engines_from_the_journal(tmp_path: Path) -> None:
    reused = {"pooled": True, "reused": True, "started_by": "asv-paired-x", "requests_served_before": 40, "pid": 9}

    def engine(arm: str, reuse: dict | None) -> EngineRecord:
        return EngineRecord(arm, ["vllm"], f"logs/{arm}.log", 1, "0.32.0", 1.0, 9, None, None, reused=reuse)

    with Journal(tmp_path / "journal.jsonl", fsync=False) as journal:
        journal.write(engine("baseline", reused))
        journal.write(engine("ngram", None))
    assert _engines_reused(tmp_path) == [{"arm": "baseline", **reused}]
    with Journal(tmp_path / "other" / "journal.jsonl", fsync=False) as journal:
        journal.write(engine("ngram", None))
    assert _engines_reused(tmp_path / "other") is None
    assert _engines_reused(tmp_path / "missing") is None


def test_idle_engines_make_room_for_a_new_start_when_memory_is_short(
    standin_python: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psutil

    pool = EnginePool(tmp_path / "pool", owner_pid=os.getpid(), idle_s=600.0)
    settings = settings_for(standin_python)
    logs = {n: tmp_path / f"{n}.log" for n in ("baseline", "ngram")}
    try:
        idle = pool.acquire(settings, [ArmSpec("baseline")], started_by="a", run_logs=logs)["baseline"]
        idle.stop()
        held = pool.acquire(settings, [ArmSpec("ngram", speculative_config=NGRAM)], started_by="b", run_logs=logs)
        plenty = type("Memory", (), {"available": 10**15})()
        monkeypatch.setattr(psutil, "virtual_memory", lambda: plenty)
        assert pool.make_room(settings, keep=set()) == []  # memory enough: idle engines are kept for reuse
        short = type("Memory", (), {"available": 0})()
        monkeypatch.setattr(psutil, "virtual_memory", lambda: short)
        assert pool.make_room(settings, keep=set()) == [idle.digest]  # only the unheld one goes
        assert not pid_alive(idle.reuse_record()["pid"]) and pid_alive(held["ngram"].reuse_record()["pid"])
        held["ngram"].stop()
    finally:
        pool.shutdown()


class StandinGpu:
    """A stand-in for NVML's reading of one GPU (unit test only): each live pooled engine holds the share its spec
    asked for, until its keeper is gone."""

    TOTAL_MIB = 100_000.0

    def __init__(self, pool: EnginePool) -> None:
        self.pool = pool

    def read(self) -> DeviceMemory:
        import json

        used = 0.0
        for lease in self.pool.leases():
            if lease.keeper_alive():
                spec = json.loads((self.pool.root / f"{lease.key_hash}.spec.json").read_text())
                used += (spec["settings"]["gpu_memory_utilization"] or 0.9) * self.TOTAL_MIB
        return DeviceMemory("stand-in GPU", self.TOTAL_MIB, self.TOTAL_MIB - used)


def test_on_a_gpu_pooled_engines_start_one_by_one_with_a_fixed_share_and_idle_ones_make_room(
    standin_python: str, tmp_path: Path
) -> None:
    pool = EnginePool(tmp_path / "pool", owner_pid=os.getpid(), idle_s=600.0)
    gpu = StandinGpu(pool)
    settings = settings_for(standin_python)
    arms = [ArmSpec("baseline"), ArmSpec("ngram", speculative_config=NGRAM)]
    k2 = ArmSpec("ngram-k2", speculative_config={**NGRAM, "num_speculative_tokens": 2})
    logs = {n: tmp_path / f"{n}.log" for n in ("baseline", "ngram", "ngram-k2")}

    def take(which: list[ArmSpec], run: str) -> dict:
        plan = pooled_plan([a.name for a in which], gpu.read(), slots=2)
        return pool.acquire(settings, which, started_by=run, run_logs=logs, plan=plan, probe=gpu.read)

    try:
        pair = take(arms, "paired")
        leases = {lease.arm: lease for lease in pool.leases()}
        assert leases["ngram"].spawned_unix_s >= leases["baseline"].ready_unix_s  # one by one
        assert not fits(gpu.read(), 0.48)  # two shares of 1/2 less headroom (0.48 each): no room for a third
        for engine in pair.values():
            engine.stop()
            time.sleep(0.05)  # idle since: apart by more than the file system's coarse clock (else a tie)
        sweep = take([k2], "sweep")  # a third kind of engine: the longest idle one makes room, the other stays
        assert not sweep["ngram-k2"].reused
        assert sorted(lease.arm for lease in pool.leases()) == ["ngram", "ngram-k2"]
        assert not pid_alive(pair["baseline"].reuse_record()["pid"])
        sweep["ngram-k2"].stop()
        again = take(arms, "paired-2")  # ngram reused; baseline started again after ngram-k2 made room
        assert [again["baseline"].reused, again["ngram"].reused] == [False, True]
        assert sorted(lease.arm for lease in pool.leases()) == ["baseline", "ngram"]
        for engine in again.values():
            engine.stop()
    finally:
        pool.shutdown()


def test_a_pooled_start_that_fails_for_memory_is_retried_after_idle_engines_stop(
    standin_python: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = EnginePool(tmp_path / "pool", owner_pid=os.getpid(), idle_s=600.0)
    gpu = StandinGpu(pool)
    settings = settings_for(standin_python)
    logs = {n: tmp_path / f"{n}.log" for n in ("baseline", "ngram")}
    plan = pooled_plan(["baseline", "ngram"], gpu.read(), slots=3)
    try:
        idle = pool.acquire(settings, [ArmSpec("baseline")], started_by="a", run_logs=logs, plan=plan, probe=gpu.read)
        idle["baseline"].stop()
        failures = tmp_path / "failures"
        failures.write_text("1")
        monkeypatch.setenv("STANDIN_FAILURES", str(failures))  # the next server start fails as if memory were short
        ngram = ArmSpec("ngram", speculative_config=NGRAM)
        held = pool.acquire(settings, [ngram], started_by="b", run_logs=logs, plan=plan, probe=gpu.read)["ngram"]
        record = held.reuse_record()
        assert "No available memory for the cache blocks" in record["retried_after"]
        assert "stopping 1 idle pooled engine" in record["retried_after"]
        assert failures.read_text() == "0" and pid_alive(record["pid"])
        assert not pid_alive(idle["baseline"].reuse_record()["pid"])
        held.stop()
        failures.write_text("2")  # two memory failures in a row: retried once, then the start fails naming both
        twin = [ArmSpec("baseline")]
        with pytest.raises(EngineError, match=r"retried after: .*No available memory"):
            pool.acquire(settings, twin, started_by="c", run_logs=logs, plan=plan, probe=gpu.read)
        assert failures.read_text() == "0"
    finally:
        pool.shutdown()


def test_a_memory_failure_is_not_retried_when_nothing_can_be_freed(
    standin_python: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No idle pooled engine to stop and the device still short (another user holds it): a second start would fail
    the same way, so the run fails at once, saying why."""
    pool = EnginePool(tmp_path / "pool", owner_pid=os.getpid(), idle_s=600.0)
    gpu = StandinGpu(pool)

    def crowded() -> DeviceMemory:
        seen = gpu.read()
        return DeviceMemory(seen.name, seen.total_mib, seen.free_mib - 80_000.0)  # not the pool's: nothing to stop

    failures = tmp_path / "failures"
    failures.write_text("2")
    monkeypatch.setenv("STANDIN_FAILURES", str(failures))
    plan = pooled_plan(["baseline"], gpu.read(), slots=3)
    try:
        with pytest.raises(
            EngineError, match=r"No available memory.*\(not retried: no idle pooled engine to stop \(none"
        ):
            pool.acquire(
                settings_for(standin_python),
                [ArmSpec("baseline")],
                started_by="a",
                run_logs={"baseline": tmp_path / "baseline.log"},
                plan=plan,
                probe=crowded,
            )
        assert failures.read_text() == "1"  # one start, not two
        keepers = {n: tmp_path / f"{n}.log" for n in ("baseline", "ngram")}
        failures.write_text("0")
        other = pool.acquire(settings_for(standin_python), [ArmSpec("baseline")], started_by="run-a", run_logs=keepers)
        failures.write_text("1")  # a held engine is never stopped for a start: the run waits, then names who holds it
        said: list[str] = []
        with pytest.raises(
            EngineError, match=r"no idle pooled engine to stop \(held by other runs: baseline \(run-a\)"
        ):
            pool.acquire(
                settings_for(standin_python),
                [ArmSpec("ngram", speculative_config=NGRAM)],
                started_by="run-b",
                run_logs=keepers,
                plan=pooled_plan(["ngram"], gpu.read(), slots=3),
                probe=crowded,
                say=said.append,
                room_wait_s=2.0,
            )
        assert len(said) == 1 and "waiting for room on the GPU for the ngram engine" in said[0], said
        other["baseline"].stop()
    finally:
        pool.shutdown()


def test_an_engine_that_stopped_answering_is_gone_before_its_replacement_starts(
    standin_python: str, tmp_path: Path
) -> None:
    """A live keeper whose server no longer answers (here: the stand-in server is frozen with SIGSTOP) is replaced;
    its keeper (and with it the server, whose memory a GPU start would lack) is gone before the new keeper starts."""
    pool = EnginePool(tmp_path / "pool", owner_pid=os.getpid(), idle_s=600.0)
    settings = settings_for(standin_python)
    logs = {"baseline": tmp_path / "baseline.log"}
    try:
        first = pool.acquire(settings, [ArmSpec("baseline")], started_by="a", run_logs=logs)["baseline"]
        first.stop()
        frozen = first.reuse_record()["pid"]
        os.kill(frozen, signal.SIGSTOP)
        again = pool.acquire(settings, [ArmSpec("baseline")], started_by="b", run_logs=logs)["baseline"]
        assert not again.reused and not pid_alive(frozen)
        lines = (pool.root / f"{again.digest}.keeper.log").read_text().splitlines()
        order = [line.split(": ", 1)[1].rsplit("; ", 1)[-1] for line in lines]
        assert order == ["starting the server", "server stopped", "starting the server"], lines
        again.stop()
    finally:
        pool.shutdown()


def test_a_failed_acquire_lets_go_of_engines_it_never_took_without_touching_them(
    standin_python: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its first engine fails to start (on a GPU, one by one): the idle engine it held for its second arm keeps its
    place in the eviction order, and no log of it lands in the failed run's folder."""
    pool = EnginePool(tmp_path / "pool", owner_pid=os.getpid(), idle_s=600.0)
    gpu = StandinGpu(pool)
    settings = settings_for(standin_python)
    ngram = ArmSpec("ngram", speculative_config=NGRAM)
    plan = pooled_plan(["baseline", "ngram"], gpu.read(), slots=3)
    try:
        earlier = pool.acquire(
            settings, [ngram], started_by="a", run_logs={"ngram": tmp_path / "a.log"}, plan=plan, probe=gpu.read
        )
        earlier["ngram"].stop()
        touch = pool.root / f"{earlier['ngram'].digest}.touch"
        os.utime(touch, (1_000_000.0, 1_000_000.0))
        failures = tmp_path / "failures"
        failures.write_text("2")
        monkeypatch.setenv("STANDIN_FAILURES", str(failures))
        logs = {"baseline": tmp_path / "b-baseline.log", "ngram": tmp_path / "b-ngram.log"}
        with pytest.raises(EngineError, match="No available memory"):
            pool.acquire(
                settings, [ArmSpec("baseline"), ngram], started_by="b", run_logs=logs, plan=plan, probe=gpu.read
            )
        assert touch.stat().st_mtime == 1_000_000.0 and not logs["ngram"].exists()
        assert not list(pool.root.glob(f"{earlier['ngram'].digest}.hold.*"))  # let go
        assert pid_alive(earlier["ngram"].reuse_record()["pid"])
    finally:
        pool.shutdown()


def test_make_room_leaves_an_engine_another_run_is_taking(standin_python: str, tmp_path: Path) -> None:
    """Another run that holds an idle engine's lock (it is about to take it) keeps it: make_room skips it, even when
    told to stop every idle engine, instead of stopping it under that run."""
    import fcntl

    pool = EnginePool(tmp_path / "pool", owner_pid=os.getpid(), idle_s=600.0)
    settings = settings_for(standin_python)
    logs = {"baseline": tmp_path / "baseline.log"}
    try:
        idle = pool.acquire(settings, [ArmSpec("baseline")], started_by="a", run_logs=logs)["baseline"]
        idle.stop()
        with open(pool.root / f"{idle.digest}.lock", "a") as other_run:
            fcntl.flock(other_run, fcntl.LOCK_EX)
            assert pool.make_room(settings, keep=set(), every_idle=True, room=lambda: False) == []
            fcntl.flock(other_run, fcntl.LOCK_UN)
        assert pid_alive(idle.reuse_record()["pid"])
        assert pool.make_room(settings, keep=set(), every_idle=True, room=lambda: False) == [idle.digest]
        assert wait_until(lambda: not pid_alive(idle.reuse_record()["pid"]))
    finally:
        pool.shutdown()


def test_a_new_keeper_has_a_lease_before_its_starter_lets_go_of_the_lock(standin_python: str, tmp_path: Path) -> None:
    """The starter writes the 'starting' lease itself: a run that takes the lock the moment after sees a live keeper
    and waits for it, instead of finding no lease and starting a second keeper for the same engine."""
    pool = EnginePool(tmp_path / "pool", owner_pid=os.getpid(), idle_s=600.0)
    settings = settings_for(standin_python)
    arm = ArmSpec("baseline")
    key = engine_key(settings, arm, {})
    digest = key_hash(key)
    pool.root.mkdir(parents=True)  # as acquire's lock makes it
    try:
        pool._spawn_keeper(settings, arm, key, digest, "a")
        lease = Lease.read(pool.lease_path(digest))  # at once, before the keeper has imported anything
        assert lease is not None and lease.state in ("starting", "ready") and lease.keeper_alive()
        assert wait_until(lambda: (now := Lease.read(pool.lease_path(digest))) is not None and now.state == "ready")
        ready = Lease.read(pool.lease_path(digest))
        assert ready is not None and ready.keeper_pid == lease.keeper_pid  # the keeper's own lease replaced it
    finally:
        pool.shutdown()


def test_a_lease_is_created_only_where_none_is(tmp_path: Path) -> None:
    path = tmp_path / "x.lease.json"
    mine = Lease("x", "baseline", "ready", 1, None, 1, 1.0, "keeper", 0.0)
    mine.write(path)
    replace(mine, state="starting").create(path)  # the keeper's 'ready' is already there: it stays
    again = Lease.read(path)
    assert again is not None and again.state == "ready"
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


def test_a_run_whose_engine_is_ready_does_not_wait_behind_another_runs_gpu_start(
    standin_python: str, tmp_path: Path
) -> None:
    """On a GPU one engine starts at a time across the pool (a lock held through a start, 40-110 s): a run that only
    reuses a ready engine takes it at once, while a run that must start one still waits for the lock."""
    import fcntl

    pool = EnginePool(tmp_path / "pool", owner_pid=os.getpid(), idle_s=600.0)
    gpu = StandinGpu(pool)
    settings = settings_for(standin_python)
    ngram = ArmSpec("ngram", speculative_config=NGRAM)
    logs = {n: tmp_path / f"{n}.log" for n in ("baseline", "ngram")}
    plan = pooled_plan(["baseline", "ngram"], gpu.read(), slots=3)
    taken: dict[str, dict] = {}

    def take(arm: ArmSpec) -> threading.Thread:
        def run() -> None:
            taken[arm.name] = pool.acquire(
                settings, [arm], started_by=arm.name, run_logs=logs, plan=plan, probe=gpu.read
            )

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    try:
        pool.acquire(settings, [ArmSpec("baseline")], started_by="a", run_logs=logs, plan=plan, probe=gpu.read)[
            "baseline"
        ].stop()
        with open(pool.root / "gpu-start.lock", "a") as another_start:
            fcntl.flock(another_start, fcntl.LOCK_EX)  # another run is starting an engine on this GPU
            reuse, start = take(ArmSpec("baseline")), take(ngram)
            reuse.join(60)
            start.join(2)
            reuse_waited, start_waited = reuse.is_alive(), start.is_alive()
            fcntl.flock(another_start, fcntl.LOCK_UN)
        start.join(60)
        assert not reuse_waited and taken["baseline"]["baseline"].reused
        assert start_waited and not start.is_alive() and not taken["ngram"]["ngram"].reused
        for held in taken.values():
            next(iter(held.values())).stop()
    finally:
        pool.shutdown()


def test_runs_sharing_one_gpu_queue_for_room_instead_of_failing(standin_python: str, tmp_path: Path) -> None:
    """Two shares fill the stand-in GPU, both held by run A: run B's new engine waits (saying who holds the device)
    instead of starting into a full device, and starts once A lets go of one (that one is stopped to make room)."""
    pool = EnginePool(tmp_path / "pool", owner_pid=os.getpid(), idle_s=600.0)
    gpu = StandinGpu(pool)
    settings = settings_for(standin_python)
    k2 = ArmSpec("ngram-k2", speculative_config={**NGRAM, "num_speculative_tokens": 2})
    logs = {n: tmp_path / f"{n}.log" for n in ("baseline", "ngram", "ngram-k2")}
    said: list[str] = []
    taken: dict[str, dict] = {}

    def run_b() -> None:
        plan = pooled_plan(["ngram-k2"], gpu.read(), slots=2)
        taken["b"] = pool.acquire(
            settings, [k2], started_by="run-b", run_logs=logs, plan=plan, probe=gpu.read, say=said.append
        )

    try:
        plan = pooled_plan(["baseline", "ngram"], gpu.read(), slots=2)
        a = pool.acquire(
            settings,
            [ArmSpec("baseline"), ArmSpec("ngram", speculative_config=NGRAM)],
            started_by="run-a",
            run_logs=logs,
            plan=plan,
            probe=gpu.read,
        )
        b = threading.Thread(target=run_b, daemon=True)
        b.start()
        assert wait_until(lambda: bool(said))
        assert "held by other runs: baseline (run-a), ngram (run-a)" in said[0], said
        assert b.is_alive() and sorted(lease.arm for lease in pool.leases()) == ["baseline", "ngram"]  # no start
        a["baseline"].stop()
        b.join(60)
        assert not b.is_alive()
        record = taken["b"]["ngram-k2"].reuse_record()
        assert record["waited_for_room_s"] > 0 and not record["retried_after"]
        assert not pid_alive(a["baseline"].reuse_record()["pid"]) and pid_alive(a["ngram"].reuse_record()["pid"])
        a["ngram"].stop()
        taken["b"]["ngram-k2"].stop()
    finally:
        pool.shutdown()


def test_a_run_waiting_for_room_holds_nothing_so_two_waiting_runs_cannot_block_each_other(
    standin_python: str, tmp_path: Path
) -> None:
    """Run A reuses an idle engine and needs a new one; the rest of the GPU is an engine another process holds. While
    A waits it holds nothing (a second waiting run could stop A's idle engine instead of waiting for A forever);
    once the other holder is gone, A takes its engine again and stops the other one to start its own."""
    pool = EnginePool(tmp_path / "pool", owner_pid=os.getpid(), idle_s=600.0)
    gpu = StandinGpu(pool)
    settings = settings_for(standin_python)
    ngram = ArmSpec("ngram", speculative_config=NGRAM)
    k2 = ArmSpec("ngram-k2", speculative_config={**NGRAM, "num_speculative_tokens": 2})
    logs = {n: tmp_path / f"{n}.log" for n in ("baseline", "ngram", "ngram-k2")}
    plan = pooled_plan(["baseline", "ngram"], gpu.read(), slots=2)  # 0.48 each: two fill the device
    said: list[str] = []
    taken: dict[str, dict] = {}
    other_run = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        first = pool.acquire(settings, [ArmSpec("baseline"), ngram], started_by="x", run_logs=logs, plan=plan)
        for engine in first.values():
            engine.stop()
        held_elsewhere = first["ngram"].digest
        (pool.root / f"{held_elsewhere}.hold.{other_run.pid}").touch()  # another run holds the ngram engine

        def run_a() -> None:
            try:
                taken["a"] = pool.acquire(
                    settings,
                    [ArmSpec("baseline"), k2],
                    started_by="a",
                    run_logs=logs,
                    plan=pooled_plan(["baseline", "ngram-k2"], gpu.read(), slots=2),
                    probe=gpu.read,
                    say=said.append,
                )
            except BaseException as error:
                said.append(f"failed: {error!r}")
                raise

        a = threading.Thread(target=run_a, daemon=True)
        a.start()
        assert wait_until(lambda: bool(said)) and "held by other runs: ngram (x)" in said[0], said
        assert not list(pool.root.glob(f"{first['baseline'].digest}.hold.*"))  # A let go of its idle baseline
        other_run.kill()
        other_run.wait()
        a.join(60)
        assert not a.is_alive()
        assert [taken["a"]["baseline"].reused, taken["a"]["ngram-k2"].reused] == [True, False]
        assert not pid_alive(first["ngram"].reuse_record()["pid"])
        for engine in taken["a"].values():
            engine.stop()
    finally:
        other_run.kill()
        pool.shutdown()


def test_the_report_names_a_wait_for_room_and_a_retried_start() -> None:
    from specharness.reporting.markdown import pool_lines

    fresh = {"reused": False, "waited_for_room_s": 0.0, "retried_after": ""}
    assert pool_lines(fresh) == []
    waited = pool_lines({**fresh, "waited_for_room_s": 41.6, "retried_after": "ValueError: No available memory"})
    assert waited == [
        "  - waited 41.6 s for room on the GPU before this run took its engines (other runs held the pooled engines)",
        "  - started again after a memory failure: ValueError: No available memory",
    ]
    reused = pool_lines({"reused": True, "started_by": "quick-1", "started_unix_s": 0.0, "pids": [7]})
    assert len(reused) == 1 and "started by `quick-1`" in reused[0]


RUN_IN_A_PROCESS = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    from test_pool import NGRAM, StandinGpu, settings_for
    from specharness.engines.fleet import pooled_plan
    from specharness.engines.pool import EnginePool
    from specharness.engines.server import ArmSpec
    root, owner, python, name, reuse, new = sys.argv[2:8]
    pool = EnginePool(Path(root), owner_pid=int(owner), idle_s=600.0)
    gpu = StandinGpu(pool)
    arms = [ArmSpec(reuse, speculative_config=NGRAM if reuse != "baseline" else None),
            ArmSpec(new, speculative_config={**NGRAM, "num_speculative_tokens": int(new[-1])})]
    plan = pooled_plan([a.name for a in arms], gpu.read(), slots=2)
    logs = {a.name: Path(root).parent / f"{name}-{a.name}.log" for a in arms}
    held = pool.acquire(settings_for(python), arms, started_by=name, run_logs=logs, plan=plan, probe=gpu.read,
                        say=lambda m: print("said:", m, flush=True), room_wait_s=120.0)
    print(json.dumps({a: e.reuse_record() for a, e in held.items()}), flush=True)
    time.sleep(2.0)  # the run uses its engines a moment
    for engine in held.values():
        engine.stop()
    """
)


def test_two_runs_in_two_processes_that_each_need_the_others_room_both_finish_without_waiting_it_out(
    standin_python: str, tmp_path: Path
) -> None:
    """The stand-in GPU holds two engines, one idle engine for each of two runs (separate processes); each run takes
    its idle engine and needs a new one. Holding what they took while waiting, each would wait for the other until
    the room wait (120 s) ran out; letting go while waiting, one stops the other's engine, starts, finishes, and the
    other follows."""
    pool = EnginePool(tmp_path / "pool", owner_pid=os.getpid(), idle_s=600.0)
    gpu = StandinGpu(pool)
    settings = settings_for(standin_python)
    ngram = ArmSpec("ngram", speculative_config=NGRAM)
    plan = pooled_plan(["baseline", "ngram"], gpu.read(), slots=2)
    logs = {n: tmp_path / f"{n}.log" for n in ("baseline", "ngram")}
    script = tmp_path / "run_in_a_process.py"
    script.write_text(RUN_IN_A_PROCESS)
    try:
        for engine in pool.acquire(
            settings, [ArmSpec("baseline"), ngram], started_by="x", run_logs=logs, plan=plan, probe=gpu.read
        ).values():
            engine.stop()
        runs = [
            subprocess.Popen(
                [
                    sys.executable,
                    str(script),
                    str(Path(__file__).parent),
                    str(pool.root),
                    str(os.getpid()),
                    standin_python,
                    name,
                    reuse,
                    new,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for name, reuse, new in (("run-1", "baseline", "ngram-k2"), ("run-2", "ngram", "ngram-k3"))
        ]
        outputs = [run.communicate(timeout=300)[0] for run in runs]
        assert [run.returncode for run in runs] == [0, 0], outputs
        records = [json.loads(out.strip().splitlines()[-1]) for out in outputs]
        waited = [r["waited_for_room_s"] for rec in records for r in rec.values()]
        assert max(waited) < 60.0, (waited, outputs)  # well short of the 120 s room wait: nobody waited it out
        assert any("said: waiting for room" in out for out in outputs), outputs  # and one of them did queue
        assert all(not r["retried_after"] for rec in records for r in rec.values())
    finally:
        pool.shutdown()
