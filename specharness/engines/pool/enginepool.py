"""The pool itself: :class:`EnginePool`, a folder of leases that hands each arm a held engine, reusing a live one or
starting a keeper, stopping idle engines to make room and queueing behind other runs on a shared GPU;
:func:`pool_from_env` gives the pool the environment names.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import httpx

from specharness._errors import ConfigError, EngineError
from specharness.engines.fleet import LaunchPlan
from specharness.engines.memory import DeviceMemory
from specharness.engines.pool.keys import (
    _KEY_ENV,
    _POLL_S,
    GPU_SLOTS_ENV,
    OWNER_ENV,
    POOL_ENV,
    engine_key,
    idle_limit_s,
    key_hash,
)
from specharness.engines.pool.lease import Lease, _holders, _touched
from specharness.engines.pool.pooled import PooledEngine
from specharness.engines.pool.room import _holders_phrase, _NoRoomYet, _room
from specharness.engines.preloader import process_start_time
from specharness.engines.server import ArmSpec, EngineSettings
from specharness.engines.startlog import is_memory_failure

__all__ = ["EnginePool", "pool_from_env"]

_STOP_WAIT_S = 60.0  # how long a start waits for the keeper of an engine it replaces to be gone (server included)
_RELEASE_S = 15.0  # how long make_room waits for a stopped engine's memory to show as free
_GPU_START = "gpu-start"  # the lock one GPU start at a time holds


class EnginePool:
    """A folder of leases (docs/development.md#the-engine-pool). ``owner_pid``: keepers started from here stop when
    it is gone."""

    def __init__(self, root: Path, *, owner_pid: int, idle_s: float | None = None, python: str = "") -> None:
        self.root = root
        self.owner_pid = owner_pid
        self.idle_s = idle_limit_s() if idle_s is None else idle_s
        self.python = python or sys.executable  # runs the keeper (the server runs settings.python)

    def lease_path(self, digest: str) -> Path:
        return self.root / f"{digest}.lease.json"

    @contextlib.contextmanager
    def _try_locked(self, digest: str) -> Iterator[bool]:
        """Like :meth:`_locked` without waiting: yields whether the lock was taken."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f"{digest}.lock", "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def _locked(self, digest: str) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f"{digest}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def acquire(
        self,
        settings: EngineSettings | Mapping[str, EngineSettings],
        arms: Sequence[ArmSpec],
        *,
        started_by: str,
        run_logs: Mapping[str, Path],
        env: Mapping[str, str] | None = None,
        plan: LaunchPlan | None = None,
        probe: Callable[[], DeviceMemory | None] | None = None,
        say: Callable[[str], None] | None = None,
        room_wait_s: float | None = None,
    ) -> dict[str, PooledEngine]:
        """One held engine per arm: a live lease's, or a new keeper's. ``plan``
        (:func:`~specharness.engines.fleet.pooled_plan`) gives each arm's GPU memory share and the order: "together"
        (the CPU build: every new keeper spawned before any is waited for, so their starts overlap) or "one-by-one"
        (a GPU: each engine ready before the next starts, one start at a time across the pool, while an engine found
        ready is taken without waiting for another run's start; ``probe`` reads the device for :meth:`make_room`, and
        a start that fails for memory is retried once after every idle pooled engine is stopped). ``run_logs``: each
        arm's log in the run folder (a note, then the engine's log copied in on release). A start that fails raises
        the engine's error.

        Runs that share one GPU queue for room: when a new engine's share is not free after idle engines were stopped
        and other runs hold pooled engines (never stopped under a run), this run lets go of everything it holds (so
        two waiting runs cannot hold each other up), says so through ``say``, and tries again once one of those
        engines is let go or the share is free; after ``room_wait_s`` (default: the engine start timeout) in all it
        starts anyway (a memory failure then names the holders). Each engine's :meth:`PooledEngine.reuse_record`
        gives the time lost to that queueing (every pass before the one that took the engines). ``settings``: one
        for every arm, or each arm's by name."""
        env = os.environ if env is None else env
        per_arm = {a.name: settings if isinstance(settings, EngineSettings) else settings[a.name] for a in arms}
        one_by_one = plan is not None and plan.strategy == "one-by-one"
        wanted: list[tuple[ArmSpec, EngineSettings, dict[str, Any], str]] = []
        kinds: list[str] = []
        for arm in arms:
            share = plan.shares.get(arm.name) if plan is not None else None
            arm_settings = per_arm[arm.name]
            arm_settings = replace(arm_settings, gpu_memory_utilization=share) if share is not None else arm_settings
            kinds.append(key_hash(engine_key(arm_settings, arm, env)))
            key = engine_key(arm_settings, arm, env, instance=kinds.count(kinds[-1]) - 1)
            wanted.append((arm, arm_settings, key, key_hash(key)))
        ours = {digest for *_, digest in wanted}  # never stopped to make room: this run is about to use them
        t0 = time.monotonic()
        timeout_s = max(s.start_timeout_s for s in per_arm.values()) if per_arm else 0.0
        wait_until = t0 + (timeout_s if room_wait_s is None else room_wait_s)
        started: set[str] = set()  # engines this acquire started, in any pass (never "reused" by it)
        retried: dict[str, str] = {}  # the memory failure a start of this acquire followed, by engine
        waited_s = 0.0
        while True:
            held: dict[str, PooledEngine] = {}
            try:
                self._take(held, wanted, ours, started_by, run_logs, one_by_one, probe, wait_until, started)
            except _NoRoomYet as busy:
                for engine in held.values():
                    if engine.retried:
                        retried[engine.digest] = engine.retried
                    engine.let_go()
                if say is not None:
                    say(
                        f"waiting for room on the GPU for the {busy.arm} engine (share {busy.share or 0:.2f}): "
                        f"{busy.phrase}; up to {max(0.0, wait_until - time.monotonic()):.0f} s more"
                    )
                self._wait_for_room(busy.room, ours, busy.holders, until=wait_until)
                waited_s = time.monotonic() - t0  # every pass before the one that takes the engines: queueing
                continue
            except BaseException:
                for engine in held.values():
                    engine.stop()
                raise
            for engine in held.values():
                engine.waited_for_room_s = waited_s
                if engine.digest in started:
                    engine.reused = False
                engine.retried = engine.retried or retried.get(engine.digest, "")
            return held

    def _take(
        self,
        held: dict[str, PooledEngine],
        wanted: Sequence[tuple[ArmSpec, EngineSettings, dict[str, Any], str]],
        ours: set[str],
        started_by: str,
        run_logs: Mapping[str, Path],
        one_by_one: bool,
        probe: Callable[[], DeviceMemory | None] | None,
        wait_until: float,
        started: set[str],
    ) -> None:
        """One pass of :meth:`acquire`, filling ``held`` and adding the engines it starts to ``started``; on a GPU,
        before ``wait_until``, raises :class:`_NoRoomYet` when a new engine's share is not free and other runs hold
        pooled engines."""
        for arm, arm_settings, _key, digest in wanted:  # every hold first: another run's make_room skips them
            held[arm.name] = PooledEngine(self, arm, digest, arm_settings, run_logs[arm.name])
        for arm, arm_settings, key, digest in wanted:
            engine = held[arm.name]
            if one_by_one and self._ready_now(engine, arm_settings):
                engine.spawn()  # a ready engine answering: nothing starts, so no wait behind another run's start
                continue
            room = _room(arm_settings, probe)
            # on a GPU one start at a time across every run of this pool: vLLM sizes its KV cache from what the
            # device has free while it profiles, so an engine starting beside another would get less
            with self._locked(_GPU_START) if one_by_one else contextlib.nullcontext():
                with self._locked(digest):
                    lease = Lease.read(self.lease_path(digest))
                    engine.reused = lease is not None and _usable(lease, arm_settings)
                    if not engine.reused:
                        if lease is not None:  # one that is stopping, failed or unhealthy: gone before the next
                            _stop_keeper(lease, wait_s=_STOP_WAIT_S)
                        self.make_room(arm_settings, keep=ours, room=room, settle_s=_RELEASE_S if probe else 0.0)
                        queue = one_by_one and time.monotonic() < wait_until and not room()
                        if queue and (holders := self._others(ours)[1]):
                            raise _NoRoomYet(arm.name, arm_settings.gpu_memory_utilization, room, holders)
                        self._spawn_keeper(arm_settings, arm, key, digest, started_by)
                        started.add(digest)
                        engine.restart_wait()  # its hold may be minutes old: the lease wait starts now
                engine.spawn()
                if one_by_one:
                    self._ready_or_retry(engine, arm_settings, key, started_by, keep=ours, room=room)
                    if engine.retried:
                        started.add(digest)
        for engine in held.values():
            engine.wait_ready()

    def _wait_for_room(
        self, room: Callable[[], bool], ours: set[str], holders: Sequence[Lease], *, until: float
    ) -> None:
        """Wait until the share is free, one of ``holders`` is let go, another pooled engine is idle (either may be
        stopped now), or ``until``."""
        seen = {lease.key_hash for lease in holders}
        while time.monotonic() < until and not room():
            time.sleep(_POLL_S)
            idle, held = self._others(ours)
            if idle or not seen <= {lease.key_hash for lease in held}:
                return

    def _ready_now(self, engine: PooledEngine, settings: EngineSettings) -> bool:
        """Whether ``engine``'s lease is ready and its server answers (then it is reused as it is); a lease that is
        still starting, failed or gone goes the way of a start, behind the GPU start lock."""
        with self._locked(engine.digest):
            lease = Lease.read(self.lease_path(engine.digest))
            engine.reused = lease is not None and lease.state == "ready" and _usable(lease, settings)
        return engine.reused

    def _ready_or_retry(
        self,
        engine: PooledEngine,
        settings: EngineSettings,
        key: dict[str, Any],
        started_by: str,
        *,
        keep: set[str],
        room: Callable[[], bool],
    ) -> None:
        """Wait for a new (or still starting) engine; one that failed for memory is started once more after every
        idle pooled engine is stopped (on a GPU another engine's memory is what such a start lacks), unless none was
        stopped and the device still lacks the engine's share (then a second start would fail the same way)."""
        try:
            engine.wait_ready()
        except EngineError as error:
            if not is_memory_failure(str(error)):
                raise
            with self._locked(engine.digest):
                current = Lease.read(self.lease_path(engine.digest))
                if current is not None and current.state != "failed" and current.keeper_alive():
                    engine.retried = f"{error} (another run sharing this engine started it again)"
                else:
                    if current is not None:  # the failed engine's own memory: its keeper stops the server, then ends
                        _stop_keeper(current, wait_s=_STOP_WAIT_S)
                    stopped = self.make_room(settings, keep=keep, room=room, every_idle=True, settle_s=_RELEASE_S)
                    if not stopped and not room():  # the same start again would fail the same way
                        busy = _holders_phrase(self._others(keep)[1])
                        raise type(error)(
                            f"{error} (not retried: no idle pooled engine to stop ({busy}), and the device still "
                            "lacks this engine's share: free the device, or give pooled engines a smaller share with "
                            f"more {GPU_SLOTS_ENV} or --gpu-memory-utilization)"
                        ) from None
                    engine.retried = f"{error} (started again after stopping {len(stopped)} idle pooled engine(s))"
                    self._spawn_keeper(settings, engine.arm, key, engine.digest, started_by)
            engine.reused = False
            engine.restart_wait()
            try:
                engine.wait_ready()
            except EngineError as again:
                raise type(again)(f"{again} (retried after: {error})") from None

    def _others(self, keep: set[str]) -> tuple[list[Lease], list[Lease]]:
        """The live pooled engines not in ``keep``, in two lists: idle (no live holder: may be stopped for a start)
        and held by other runs (never stopped under them)."""
        idle: list[Lease] = []
        held: list[Lease] = []
        for lease in self.leases():
            if lease.key_hash not in keep and lease.keeper_alive():
                (held if _holders(self.root, lease.key_hash) else idle).append(lease)
        return idle, held

    def make_room(
        self,
        settings: EngineSettings,
        keep: set[str],
        *,
        wait_s: float = 60.0,
        room: Callable[[], bool] | None = None,
        every_idle: bool = False,
        settle_s: float = 0.0,
    ) -> list[str]:
        """Before a new engine starts: while there is no room for it, stop idle pooled engines (no live holder, not
        in ``keep``), the longest idle first. ``room``: whether the new engine fits now (default: the machine's
        available memory covers its KV cache space plus
        :data:`~specharness.engines.pool.room.ENGINE_OVERHEAD_GIB`; on a GPU the device's free memory covers its
        share); ``every_idle``: stop every idle one (a start that failed for memory although ``room`` said it fit);
        ``settle_s``: then wait up to that long for ``room`` (a GPU gives a stopped engine's memory back a moment
        after it exits). Idle engines kept for reuse must never make a start fail. Returns the lease hashes
        stopped."""
        has_room = room or _room(settings, None)
        stopped: list[str] = []
        idle = sorted(self._others(keep)[0], key=lambda lease: _touched(self.root, lease.key_hash))
        for lease in idle:
            if not every_idle and has_room():
                break
            with self._try_locked(lease.key_hash) as mine:
                # another run may have taken it since the list was made: skip one that is busy or now held
                current = Lease.read(self.lease_path(lease.key_hash))
                if not mine or current is None or current.keeper_pid != lease.keeper_pid:
                    continue
                if _holders(self.root, lease.key_hash):
                    continue
                _stop_keeper(lease, wait_s=wait_s)
            stopped.append(lease.key_hash)
            deadline = time.monotonic() + settle_s  # the memory comes back a moment after: wait before the next victim
            while not has_room() and time.monotonic() < deadline:
                time.sleep(0.2)
        return stopped

    def _spawn_keeper(
        self, settings: EngineSettings, arm: ArmSpec, key: dict[str, Any], digest: str, started_by: str
    ) -> None:
        spec = {
            "settings": {**asdict(settings), "extra_args": list(settings.extra_args), "api_key": None},
            "arm": asdict(arm),
            "key": key,
            "key_hash": digest,
            "lease": str(self.lease_path(digest)),
            "log": str(self.root / f"{digest}.log"),
            "owner_pid": self.owner_pid,
            "idle_s": self.idle_s,
            "started_by": started_by,
        }
        spec_path = self.root / f"{digest}.spec.json"
        spec_path.write_text(json.dumps(spec, indent=1))
        self.lease_path(digest).unlink(missing_ok=True)
        (self.root / f"{digest}.touch").touch()
        env = dict(os.environ)
        if settings.api_key:
            env[_KEY_ENV] = settings.api_key  # the key reaches the keeper through its environment, never a file
        with open(self.root / f"{digest}.keeper.log", "ab") as log:
            keeper = subprocess.Popen(
                [self.python, "-m", "specharness.engines.pool", "keep", str(spec_path)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # outlives the experiment that started it; ASV's kill does not reach it
            )
        # the lease exists before the caller lets go of the lock (the keeper rewrites it a moment later): a run that
        # takes the lock next sees this keeper instead of starting a second one
        Lease(
            key_hash=digest,
            arm=arm.name,
            state="starting",
            keeper_pid=keeper.pid,
            keeper_started=process_start_time(keeper.pid),
            owner_pid=self.owner_pid,
            idle_s=self.idle_s,
            started_by=started_by,
            spawned_unix_s=time.time(),
            log_path=str(self.root / f"{digest}.log"),
        ).create(self.lease_path(digest))

    def leases(self) -> list[Lease]:
        return [lease for p in sorted(self.root.glob("*.lease.json")) if (lease := Lease.read(p)) is not None]

    def shutdown(self, wait_s: float = 60.0) -> None:
        """Stop every keeper of this pool (and so its server); waits until they are gone."""
        leases = self.leases()
        for lease in leases:
            _stop_keeper(lease)
        deadline = time.monotonic() + wait_s
        while any(lease.keeper_alive() for lease in leases) and time.monotonic() < deadline:
            time.sleep(0.2)
        for lease in leases:
            if lease.keeper_alive():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(lease.keeper_pid, signal.SIGKILL)


def _usable(lease: Lease, settings: EngineSettings) -> bool:
    """A lease worth reusing: its keeper alive and, once ready, the server answering /health and serving the model."""
    if lease.state == "failed" or not lease.keeper_alive():
        return False
    if lease.state != "ready":
        return True  # starting: wait for it
    headers = {"Authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
    try:
        if httpx.get(f"{lease.url}/health", timeout=5.0).status_code != 200:
            return False
        models = httpx.get(f"{lease.url}/v1/models", headers=headers, timeout=10.0).json()
        return any(m.get("id") == settings.served_model_name for m in models.get("data", []))
    except (httpx.HTTPError, ValueError, AttributeError, TypeError):
        return False


def _stop_keeper(lease: Lease, wait_s: float = 0.0) -> None:
    """Ask a keeper to stop its server; with ``wait_s``, wait up to that long until the keeper is gone (it waits for
    every process of its server first, so on a GPU their memory is free by then)."""
    if lease.keeper_alive():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(lease.keeper_pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while lease.keeper_alive() and time.monotonic() < deadline:
        time.sleep(0.2)


def pool_from_env() -> EnginePool | None:
    """The pool named by SPECHARNESS_ENGINE_POOL (owner SPECHARNESS_ENGINE_POOL_OWNER, else the parent process)."""
    raw = os.environ.get(POOL_ENV, "").strip()
    if not raw:
        return None
    owner = os.environ.get(OWNER_ENV, "").strip()
    if owner and not owner.isdigit():
        raise ConfigError(f"{OWNER_ENV}={owner!r}: give the pid of the process the pooled engines live with")
    return EnginePool(Path(raw), owner_pid=int(owner) if owner else os.getppid())
