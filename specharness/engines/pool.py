"""Engines kept running across experiments: one start serves every experiment that asks for the same engine.

An :class:`EnginePool` is a folder of leases, one per :func:`engine_key`; :meth:`EnginePool.acquire` finds a running
engine or starts one under a keeper process (:func:`keep`, ``python -m specharness.engines.pool keep SPEC``) and
returns a :class:`PooledEngine`. :func:`pool_from_env` gives the pool the environment names.
Leases, holds, lifetimes and GPU shares: docs/development.md#the-engine-pool.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from specharness import _errors
from specharness._errors import ConfigError, EngineError, EngineStartTimeout
from specharness.engines.attached import AttachedEngine
from specharness.engines.counters import REQUEST_SUCCESS, scrape
from specharness.engines.fleet import LaunchPlan, fits
from specharness.engines.memory import DeviceMemory
from specharness.engines.preload import process_start_time
from specharness.engines.server import ArmSpec, EngineServer, EngineSettings
from specharness.engines.startlog import first_error, is_memory_failure

__all__ = [
    "GPU_SLOTS_ENV",
    "IDLE_ENV",
    "OWNER_ENV",
    "POOL_ENV",
    "EnginePool",
    "Lease",
    "PooledEngine",
    "asv_owner_pid",
    "engine_key",
    "gpu_slots",
    "idle_limit_s",
    "key_hash",
    "pool_applies",
    "pool_from_env",
]

POOL_ENV = "SPECHARNESS_ENGINE_POOL"  # a folder: every run that starts engines takes them from this pool
OWNER_ENV = "SPECHARNESS_ENGINE_POOL_OWNER"  # a pid: keepers stop when it is gone (default: the asv run / parent)
IDLE_ENV = "SPECHARNESS_ENGINE_POOL_IDLE_S"  # seconds a lease may go unheld before its keeper stops the engine
GPU_SLOTS_ENV = "SPECHARNESS_ENGINE_POOL_GPU_SLOTS"  # on a GPU each pooled engine gets 1/slots of the device
DEFAULT_IDLE_S = 300.0
DEFAULT_GPU_SLOTS = 3  # an A/A pair and the ngram arm at once, as the control profile runs them
ENGINE_OVERHEAD_GIB = 2.0  # a CPU engine's memory beyond its KV cache space (weights, compiled graphs, processes)
_POLL_S = 1.0
# what the engine sees from the environment and can change it; anything else (paths, terminal) does not
_ENGINE_ENV = re.compile(r"^(VLLM_|CUDA_|TORCH|OMP_|MKL_|KMP_|HF_|TRANSFORMERS_|PYTORCH_|LD_PRELOAD$|PYTHONPATH$)")
_KEY_ENV = "SPECHARNESS_ENGINE_POOL_API_KEY"
_VANISHED_S = 60.0  # a lease not (or no longer) on disk this long after the hold began: its keeper is gone
_STOP_WAIT_S = 60.0  # how long a start waits for the keeper of an engine it replaces to be gone (server included)
_RELEASE_S = 15.0  # how long make_room waits for a stopped engine's memory to show as free
_GPU_START = "gpu-start"  # the lock one GPU start at a time holds


def idle_limit_s() -> float:
    """The idle limit from SPECHARNESS_ENGINE_POOL_IDLE_S (default 300 s); ConfigError on a bad value."""
    raw = os.environ.get(IDLE_ENV, "").strip()
    if not raw:
        return DEFAULT_IDLE_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ConfigError(f"{IDLE_ENV}={raw!r}: give a positive number of seconds, e.g. 300")
    return value


def gpu_slots() -> int:
    """How many pooled engines share one GPU (SPECHARNESS_ENGINE_POOL_GPU_SLOTS, default 3); ConfigError when bad."""
    raw = os.environ.get(GPU_SLOTS_ENV, "").strip()
    if not raw:
        return DEFAULT_GPU_SLOTS
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"{GPU_SLOTS_ENV}={raw!r}: give a whole number of engines, 1 or more, e.g. 3")
    return int(raw)


def engine_key(settings: EngineSettings, arm: ArmSpec, env: Mapping[str, str], instance: int = 0) -> dict[str, Any]:
    """Everything that makes an engine what it is: the settings less the port and timeout (the API key as a hash),
    the arm's engine options (not its name, nor its client-side slowdown: ``baseline-slow`` runs a plain baseline
    engine), the environment variables an engine reads, and ``instance``: the n-th engine of that kind in one run,
    so that two arms of one run with the same engine options (an A/A pair) never share one engine."""
    s = asdict(settings)
    s.pop("port")
    s.pop("start_timeout_s")
    key = s.pop("api_key")
    s["api_key_sha256"] = hashlib.sha256(key.encode()).hexdigest() if key else None
    a = arm.to_dict()
    for unrelated in ("name", "client_slowdown", "twin_of"):  # the client's business, not the engine's
        a.pop(unrelated)
    engine_env = {k: v for k, v in sorted(env.items()) if _ENGINE_ENV.match(k)}
    return {"settings": s, "arm": a, "env": engine_env, "instance": instance}


def key_hash(key: Mapping[str, Any]) -> str:
    """A short stable name for an engine key (the lease's file name)."""
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


def pool_applies(settings: EngineSettings) -> bool:
    """Whether an engine with ``settings`` can come from a pool: a port picked freely (the CPU build or a GPU)."""
    return settings.port == 0


def _alive(pid: int, started: str | None = None) -> bool:
    now = process_start_time(pid)
    return now is not None and (started is None or now == started)


def asv_owner_pid() -> int:
    """The ``asv run`` (or ``asv continuous``) process this one runs under, else the parent; SPECHARNESS_ENGINE_POOL_
    OWNER wins."""
    raw = os.environ.get(OWNER_ENV, "").strip()
    if raw.isdigit():
        return int(raw)
    import psutil

    with contextlib.suppress(psutil.Error):
        for proc in psutil.Process().parents():
            argv = proc.cmdline()
            for i, word in enumerate(argv[:-1]):
                if Path(word).name == "asv" and argv[i + 1] in ("run", "continuous", "dev"):
                    return int(proc.pid)
    return os.getppid()


@dataclass(frozen=True, slots=True)
class Lease:
    """A pooled engine as its keeper describes it (the lease file)."""

    key_hash: str
    arm: str
    state: str  # "starting", "ready", "failed"
    keeper_pid: int
    keeper_started: str | None
    owner_pid: int
    idle_s: float
    started_by: str  # the run folder (or label) of the experiment that asked for the start
    spawned_unix_s: float
    url: str = ""
    pid: int = -1
    pids: list[int] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    version: str = ""
    start_s: float = float("nan")
    ready_unix_s: float = float("nan")
    log_path: str = ""
    per_request_metrics: bool = False
    engine_env: dict[str, str] = field(default_factory=dict)
    start_phases_s: dict[str, float] = field(default_factory=dict)
    error: str = ""
    error_type: str = ""

    @classmethod
    def read(cls, path: Path) -> Lease | None:
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in raw.items() if k in names})

    def write(self, path: Path) -> None:
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        tmp.replace(path)

    def create(self, path: Path) -> None:
        """Write the lease only where none is yet (the keeper may have written its own already)."""
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink(missing_ok=True)

    def keeper_alive(self) -> bool:
        return _alive(self.keeper_pid, self.keeper_started)


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
        available memory covers its KV cache space plus :data:`ENGINE_OVERHEAD_GIB`; on a GPU the device's free
        memory covers its share); ``every_idle``: stop every idle one (a start that failed for memory although
        ``room`` said it fit); ``settle_s``: then wait up to that long for ``room`` (a GPU gives a stopped engine's
        memory back a moment after it exits). Idle engines kept for reuse must never make a start fail. Returns the
        lease hashes stopped."""
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


def _holders_phrase(held: Sequence[Lease]) -> str:
    """The engines other runs hold, in words, in the order of their runs and arms (the leases' own order follows
    their key hashes, which differ with the environment)."""
    names = [f"{lease.arm} ({lease.started_by})" for lease in sorted(held, key=lambda x: (x.started_by, x.arm))]
    return f"held by other runs: {', '.join(names)}" if names else "none held by other runs"


class _NoRoomYet(Exception):  # control flow inside acquire (it never leaves the pool), not an error
    """A new engine's share is not free and other runs hold pooled engines: :meth:`EnginePool.acquire` waits."""

    def __init__(self, arm: str, share: float | None, room: Callable[[], bool], holders: Sequence[Lease]) -> None:
        super().__init__(arm)
        self.arm, self.share, self.room, self.holders = arm, share, room, list(holders)
        self.phrase = _holders_phrase(holders)


def _touched(root: Path, digest: str) -> float:
    try:
        return (root / f"{digest}.touch").stat().st_mtime
    except OSError:
        return 0.0


def _room(settings: EngineSettings, probe: Callable[[], DeviceMemory | None] | None) -> Callable[[], bool]:
    """Whether one more engine with ``settings`` fits now: with ``probe`` (a GPU), its share of the device is free;
    without, the machine's available memory covers its KV cache space plus :data:`ENGINE_OVERHEAD_GIB`."""
    if probe is not None:
        share = settings.gpu_memory_utilization

        def gpu_room() -> bool:
            device = probe()
            return device is None or share is None or fits(device, share)

        return gpu_room

    def cpu_room() -> bool:
        import psutil

        return bool(psutil.virtual_memory().available >= ((settings.kv_cache_gib or 0) + ENGINE_OVERHEAD_GIB) * 2**30)

    return cpu_room


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


def requests_served(url: str, headers: Mapping[str, str] | None = None) -> int | None:
    """Requests the engine has finished so far (``vllm:request_success_total`` summed), None if unreadable."""
    try:
        totals = scrape(url, dict(headers or {})).totals
    except httpx.HTTPError:
        return None
    return int(totals[REQUEST_SUCCESS]) if REQUEST_SUCCESS in totals else None


class PooledEngine(AttachedEngine):
    """An engine held from a pool: driven like an attached one, but with its pids, command and start known, and its
    log copied into the run folder when released. :meth:`stop` releases the hold; the keeper stops the server."""

    def __init__(self, pool: EnginePool, arm: ArmSpec, digest: str, settings: EngineSettings, run_log: Path) -> None:
        # the URL is not known until the lease is ready; AttachedEngine's constructor wants one
        super().__init__(arm, "http://127.0.0.1:1", run_log, api_key=settings.api_key)
        self.pool = pool
        self.digest = digest
        self.reused = False
        self.lease: Lease | None = None
        self.requests_before: int | None = None
        self.start_timeout_s = settings.start_timeout_s
        self._hold = pool.root / f"{digest}.hold.{os.getpid()}"
        self._hold.parent.mkdir(parents=True, exist_ok=True)
        self._hold.touch()
        self._since = time.monotonic()
        self._released = False
        self._taken = False  # spawn() ran: this run looked the engine up (a failed acquire may never get that far)
        self.retried = ""  # the memory failure a retried start followed, if any
        self.waited_for_room_s = 0.0  # time acquire waited for other runs to let go of the GPU

    def restart_wait(self) -> None:
        """A new keeper was spawned for this engine: its lease is written anew (the wait for it starts again)."""
        self._since = time.monotonic()

    @property
    def server_log(self) -> Path:
        return self.pool.root / f"{self.digest}.log"

    def spawn(self) -> None:
        """Nothing to spawn (a keeper does): write the note that begins this engine's log in the run folder."""
        self._taken = True
        self._note(
            f"pooled {time.strftime('%Y-%m-%dT%H:%M:%S%z')}: the {self.arm.name} engine comes from the engine pool at "
            f"{self.pool.root} (lease {self.digest}, {'reused' if self.reused else 'started for this run'}); its "
            "server log is copied below when the run releases it"
        )

    def wait_ready(self) -> None:
        """Wait for the lease to be ready (or failed: raise the engine's own error), then for /health."""
        if self.version:
            return
        deadline = time.monotonic() + self.start_timeout_s + 60.0
        path = self.pool.lease_path(self.digest)
        while True:
            lease = Lease.read(path)
            if lease is not None and lease.state == "ready":
                break
            if lease is not None and lease.state == "failed":
                self._copy_log()
                cls = getattr(_errors, lease.error_type, EngineError)
                raise (cls if isinstance(cls, type) and issubclass(cls, EngineError) else EngineError)(lease.error)
            if lease is not None and not lease.keeper_alive():
                raise EngineError(f"{self.arm.name} engine pool keeper {lease.keeper_pid} ended; see {path.parent}")
            if lease is None and time.monotonic() - self._since > _VANISHED_S:
                raise EngineError(f"{self.arm.name} engine pool lease {path} is gone; see {path.parent}")
            if time.monotonic() > deadline:
                raise EngineStartTimeout(
                    f"{self.arm.name} pooled engine not ready within {self.start_timeout_s + 60:.0f} s; read "
                    f"{self.server_log}"
                )
            time.sleep(0.5)
        self.lease = lease
        self._url = lease.url
        self.port = int(lease.url.rsplit(":", 1)[1])
        self.command = list(lease.command)
        self.per_request_metrics = lease.per_request_metrics
        self.engine_env = dict(lease.engine_env)
        self.requests_before = requests_served(self.base_url, self.headers())
        super().wait_ready()
        self.start_s = lease.start_s

    def reuse_record(self) -> dict[str, Any]:
        """What the journal and manifest say of this engine's provenance."""
        lease = self.lease
        assert lease is not None
        return {
            "pooled": True,
            "reused": self.reused,
            "started_by": lease.started_by,
            "started_unix_s": lease.spawned_unix_s,
            "ready_unix_s": lease.ready_unix_s,
            "requests_served_before": self.requests_before,
            "pid": lease.pid,
            "pids": list(lease.pids),
            "keeper_pid": lease.keeper_pid,
            "lease": self.digest,
            "log": lease.log_path,
            "retried_after": self.retried,
            "waited_for_room_s": self.waited_for_room_s,
        }

    def pids(self) -> list[int]:
        return [p for p in (self.lease.pids if self.lease else []) if _alive(p)]

    def exit_status(self) -> str:
        if self.lease is None:
            return "pooled: not ready"
        return "running" if _alive(self.lease.pid) else "pooled: server process gone"

    def cause(self) -> str:
        try:
            text = self.server_log.read_text(errors="replace")
        except OSError:
            return f"{self.exit_status()} (no log at {self.server_log})"
        return f"{first_error(text)} (log: {self.server_log})"

    def log_tail(self, lines: int = 1) -> str:
        return self.cause()

    def _copy_log(self) -> None:
        with contextlib.suppress(OSError):
            text = self.server_log.read_bytes()
            with open(self.log_path, "ab") as out:
                out.write(b"--- the pooled engine's log, from its start to this release ---\n" + text)

    def let_go(self) -> None:
        """Drop the hold only (acquire waits for room and will hold the engine again): its idle clock starts, no log
        is copied."""
        self._released = True
        self._hold.unlink(missing_ok=True)
        if self._taken:  # idle from now (a stale clock would let its keeper stop it at once); others' left alone
            with contextlib.suppress(OSError):
                (self.pool.root / f"{self.digest}.touch").touch()

    def stop(self, grace_s: float = 20.0) -> None:
        """Release the hold (the keeper's idle clock starts) and copy the engine's log into the run folder. An engine
        this run held but never took (its acquire failed before it) is only let go: its log and idle clock are
        another run's business."""
        del grace_s
        if self._released:
            return
        self._released = True
        if not self._taken:
            self._hold.unlink(missing_ok=True)
            return
        self._copy_log()
        self._hold.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            (self.pool.root / f"{self.digest}.touch").touch()


def pool_from_env() -> EnginePool | None:
    """The pool named by SPECHARNESS_ENGINE_POOL (owner SPECHARNESS_ENGINE_POOL_OWNER, else the parent process)."""
    raw = os.environ.get(POOL_ENV, "").strip()
    if not raw:
        return None
    owner = os.environ.get(OWNER_ENV, "").strip()
    if owner and not owner.isdigit():
        raise ConfigError(f"{OWNER_ENV}={owner!r}: give the pid of the process the pooled engines live with")
    return EnginePool(Path(raw), owner_pid=int(owner) if owner else os.getppid())


# --- the keeper ---------------------------------------------------------------------------------------------------


def _holders(root: Path, digest: str) -> list[int]:
    pids = []
    for path in root.glob(f"{digest}.hold.*"):
        pid = path.name.rsplit(".", 1)[1]
        if pid.isdigit() and _alive(int(pid)):
            pids.append(int(pid))
        else:
            path.unlink(missing_ok=True)
    return pids


def keep(spec_path: Path) -> int:
    """Run one pooled engine until it idles, its owner goes, it dies, or a signal comes; returns the exit code."""
    spec = json.loads(spec_path.read_text())
    key = os.environ.pop(_KEY_ENV, None)
    settings = EngineSettings(
        **{**spec["settings"], "extra_args": tuple(spec["settings"]["extra_args"]), "api_key": key}
    )
    arm = ArmSpec.from_dict(spec["arm"])
    lease_path, digest = Path(spec["lease"]), spec["key_hash"]
    root = lease_path.parent
    touch = root / f"{digest}.touch"
    me = os.getpid()
    lease = Lease(
        key_hash=digest,
        arm=arm.name,
        state="starting",
        keeper_pid=me,
        keeper_started=process_start_time(me),
        owner_pid=spec["owner_pid"],
        idle_s=spec["idle_s"],
        started_by=spec["started_by"],
        spawned_unix_s=time.time(),
        log_path=spec["log"],
    )
    owner_started = process_start_time(lease.owner_pid)

    def stop_on_signal(signum: int, frame: object) -> None:
        raise SystemExit(f"keeper {me}: signal {signum}")

    signal.signal(signal.SIGTERM, stop_on_signal)
    signal.signal(signal.SIGINT, stop_on_signal)
    server = EngineServer(settings, arm, Path(spec["log"]))
    # forked servers (on a GPU): the keepers of one pool share one preloader, which lives as long as the pool's owner
    server.preload_scope, server.preload_owner, server.preload_idle_s = str(root), lease.owner_pid, lease.idle_s
    why = "stopped"
    try:
        lease.write(lease_path)
        print(f"keeper {me} ({arm.name}, {digest}): starting the server", flush=True)  # one line per start
        try:
            server.start()
        except EngineError as error:
            lease = replace(lease, state="failed", error=str(error), error_type=type(error).__name__)
            lease.write(lease_path)
            return 1
        assert server.process is not None
        lease = replace(
            lease,
            state="ready",
            url=server.base_url,
            pid=server.process.pid,
            pids=server.pids(),
            command=server.command,
            version=server.version,
            start_s=server.start_s,
            ready_unix_s=time.time(),
            per_request_metrics=server.per_request_metrics,
            engine_env=dict(server.engine_env),
            start_phases_s=server.start_phases().as_dict(),
        )
        lease.write(lease_path)
        touch.touch()
        while True:
            time.sleep(_POLL_S)
            if not server.alive():
                why = f"server ended ({server.exit_status()}): {server.cause()}"
                break
            if owner_started is None or not _alive(lease.owner_pid, owner_started):
                why = f"owner {lease.owner_pid} is gone"
                break
            if not _holders(root, digest):
                idle = time.time() - touch.stat().st_mtime
                if idle > lease.idle_s:
                    why = f"idle for {idle:.0f} s (limit {lease.idle_s:.0f} s)"
                    break
        return 0
    except SystemExit as exc:
        why = str(exc)
        return 0
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        server.stop(grace_s=10.0)
        server.wait_gone()  # the engine core and its workers too: on a GPU their memory is what make_room waits for
        current = Lease.read(lease_path)
        if current is not None and current.keeper_pid == me and current.state != "failed":
            lease_path.unlink(missing_ok=True)
        print(f"keeper {me} ({arm.name}, {digest}): {why}; server stopped", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0] != "keep":
        print("usage: python -m specharness.engines.pool keep SPEC.json", file=sys.stderr)
        return 2
    return keep(Path(args[1]))


if __name__ == "__main__":
    sys.exit(main())
