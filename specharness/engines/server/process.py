"""The running server of one arm: :class:`EngineServer` spawns it in its own session (logging to a file in the run
folder), waits for ``/health``, inspects and stops it; :func:`stop_all` stops every server this process started."""

from __future__ import annotations

import contextlib
import functools
import math
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

from specharness._errors import EngineDied, EngineNotInstalled, EngineStartTimeout
from specharness.engines import preload
from specharness.engines.memory import MemoryProbe
from specharness.engines.server.arm import ArmSpec
from specharness.engines.server.group import die_with_parent, stop_group, wait_group_gone
from specharness.engines.server.launch import (
    ENTRYPOINT,
    EngineSettings,
    build_command,
    choose_port,
    server_environment,
    supports_per_request_spec_metrics,
    vllm_available,
)
from specharness.engines.server.reported import log_tail, settings_from_log, settings_from_server_info
from specharness.engines.startlog import StartPhases, first_error, start_phases

__all__ = ["EngineServer", "stop_all"]

_LIVE: list[EngineServer] = []
STOP_GRACE_S = 20.0  # a ready server's time to finish after SIGTERM, then SIGKILL
STARTING_GRACE_S = 5.0  # the same for a server still starting (vLLM ignores SIGTERM through much of its start)


@functools.cache
def _gpu_seen() -> bool:
    return MemoryProbe().gpu_observed


class EngineServer:
    """A running vLLM server for one arm. Use as a context manager, or call ``start`` and ``stop``."""

    def __init__(self, settings: EngineSettings, arm: ArmSpec, log_path: Path) -> None:
        self.settings = settings
        self.arm = arm
        self.log_path = log_path
        self.port = 0
        self.command: list[str] = []
        self.process: subprocess.Popen[bytes] | preload.ForkedProcess | None = None
        self.start_s = float("nan")
        self.version = ""
        self.per_request_metrics = False
        self.on_spawn: Callable[[int], None] | None = None  # told the pid as soon as the process exists
        self.spawned_at = float("nan")  # wall-clock time of the spawn (time.time()), for the start's phases
        self.engine_env: dict[str, str] = {}  # environment the harness set for the server (the API key left out)
        self._log_offset = 0  # where this start's output begins in the log (a restart or resume appends)
        self._t0 = time.perf_counter()
        # a server forked from a preloaded interpreter (preload.enabled): one preloader per scope, ending with its owner
        self.preload_scope = f"process-{os.getpid()}"
        self.preload_owner = os.getpid()
        self.preload_idle_s = 300.0
        self.preload_note = ""  # why a start meant to be forked was spawned as usual

    @property
    def base_url(self) -> str:
        return f"http://{self.settings.host}:{self.port}"

    def start(self) -> None:
        """Spawn the server and wait until it answers /health."""
        self.spawn()
        self.wait_ready()

    def spawn(self) -> None:
        """Start the server process (returns at once); :meth:`wait_ready` waits for it. Several servers may be
        spawned before any is waited for, so their starts overlap."""
        s = self.settings
        if not vllm_available(s.python, s.site):
            where = f"{s.python} with {s.site} first on PYTHONPATH" if s.site else s.python
            raise EngineNotInstalled(
                f"{self.arm.name}: vLLM is not importable by {where}; run scripts/setup.sh or name another environment"
            )
        self.port = choose_port(s.host, s.port)
        self.per_request_metrics = (
            self.arm.speculative_config is not None
            and s.per_request_spec_metrics
            and supports_per_request_spec_metrics(s.python, s.site)
        )
        self.command = build_command(s, self.arm, self.port, supports_per_request_metrics=self.per_request_metrics)
        env, self.engine_env = server_environment(os.environ, s, cpu_build=not _gpu_seen())
        if s.api_key:
            env["VLLM_API_KEY"] = s.api_key
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child after Popen
        self._log_offset = log.tell()
        t0 = time.perf_counter()
        spawned_at = time.time()
        try:
            self.process = self._forked(env) if preload.enabled(os.environ, cpu_build=not _gpu_seen()) else None
            if self.process is None:
                if self.preload_note:  # the reason goes to the engine's own log, above its output
                    log.write(f"specharness: {self.preload_note}\n".encode())
                    log.flush()
                    t0, spawned_at = time.perf_counter(), time.time()  # the usual start gets its own time
                self.process = subprocess.Popen(
                    self.command,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,
                    preexec_fn=die_with_parent,
                )
        finally:
            log.close()
        self.engine_env[preload.ENV] = "1" if isinstance(self.process, preload.ForkedProcess) else "0"
        _LIVE.append(self)
        self._t0 = t0
        self.spawned_at = spawned_at  # a forked start's preloader import (its first start) counts as import
        if self.on_spawn is not None:
            self.on_spawn(self.process.pid)

    def _forked(self, env: Mapping[str, str]) -> preload.ForkedProcess | None:
        """The server forked from this scope's preloader (started when none answers); None, with the reason in
        :attr:`preload_note`, when no preloader can serve it (the start then goes the usual way)."""
        try:
            return preload.spawn_forked(
                self.settings.python,
                ENTRYPOINT,
                self.command[3:],
                env,
                self.log_path,
                scope=self.preload_scope,
                owner_pid=self.preload_owner,
                idle_s=self.preload_idle_s,
                ready_timeout_s=self.settings.start_timeout_s,
            )
        except preload.PreloadUnavailable as why:
            self.preload_note = f"not forked from a preloaded interpreter ({why}); spawned as usual"
            return None

    def wait_ready(self) -> None:
        """Wait for /health (or the process's end, or the start timeout); then read the version. Idempotent."""
        if self.version:
            return
        try:
            self._wait_healthy(self._t0)
        except BaseException:
            self.stop()
            raise
        self.start_s = time.perf_counter() - self._t0
        self.version = self._read_version()

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.settings.api_key}"} if self.settings.api_key else {}

    def _wait_healthy(self, t0: float) -> None:
        assert self.process is not None
        deadline = t0 + self.settings.start_timeout_s
        with httpx.Client(timeout=5.0) as client:
            while True:
                code = self.process.poll()
                if code is not None:
                    cause = self.cause()
                    raise EngineDied(f"{self.arm.name} server ended ({self.exit_status()}) while starting: {cause}")
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.base_url}/health").status_code == 200:
                        return
                if time.perf_counter() > deadline:
                    raise EngineStartTimeout(
                        f"{self.arm.name} server did not answer /health within {self.settings.start_timeout_s:.0f} s; "
                        f"raise --start-timeout or read {self.log_path}"
                    )
                time.sleep(0.5)

    def _read_version(self) -> str:
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
            reply = httpx.get(f"{self.base_url}/version", headers=self._headers(), timeout=10.0)
            return str(reply.json()["version"])
        return "unknown"

    def time_request(self, model: str, max_tokens: int = 16, timeout_s: float = 60.0) -> float:
        """Seconds one short greedy chat request takes (after a start, the first one shows any work vLLM leaves to
        the first request); NaN when it does not get an answer."""
        body = {
            "model": model,
            "messages": [{"role": "user", "content": "Repeat: the quick brown fox jumps over the lazy dog."}],
            "max_tokens": max_tokens,
            "temperature": 0.0,
        }
        t0 = time.perf_counter()
        try:
            reply = httpx.post(
                f"{self.base_url}/v1/chat/completions", json=body, headers=self._headers(), timeout=timeout_s
            )
        except httpx.HTTPError:
            return float("nan")
        return round(time.perf_counter() - t0, 3) if reply.status_code == 200 else float("nan")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def exit_status(self) -> str:
        """How the server process ended, in words: "killed by SIGKILL", "exit code 1", or "running"."""
        code = self.process.poll() if self.process is not None else None
        if code is None:
            return "running"
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"killed by {signal.Signals(-code).name}"
            return f"killed by signal {-code}"
        return f"exit code {code}"

    def _log_text(self) -> str | None:
        """This start's part of the log (a log holds every start of its arm in the run folder's segment)."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_offset)
                return log.read().decode(errors="replace")
        except OSError:
            return None

    def cause(self) -> str:
        """Why the server failed, one line: the first real error this start wrote to its log (not vLLM's wrapper),
        and the log path."""
        text = self._log_text()
        if text is None:
            return f"(no log at {self.log_path})"
        return f"{first_error(text)} (log: {self.log_path})"

    def start_phases(self) -> StartPhases:
        """How long each phase of the last start took, from the log's timestamps and the spawn time."""
        return start_phases(self._log_text() or "", None if math.isnan(self.spawned_at) else self.spawned_at)

    def log_tail(self, lines: int = 1) -> str:
        """The last meaningful line(s) of the server log, for one-line error messages: error records and exception
        lines first (a WARNING that merely mentions an error is not one), else the last lines."""
        return log_tail(self.log_path, lines)

    def effective_settings(self) -> dict[str, Any]:
        """Settings as the engine itself reports them: ``/server_info`` (vLLM dev mode, loopback only), else its log."""
        found: dict[str, Any] = {}
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
            reply = httpx.get(
                f"{self.base_url}/server_info", params={"config_format": "json"}, headers=self._headers(), timeout=60.0
            )
            if reply.status_code == 200:
                found = settings_from_server_info(reply.json()["vllm_config"])
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return found
        return settings_from_log(text, found)

    def pids(self) -> list[int]:
        """The server process and all its descendants."""
        if self.process is None:
            return []
        try:
            import psutil

            root = psutil.Process(self.process.pid)
            return [root.pid] + [c.pid for c in root.children(recursive=True)]
        except Exception:
            return [self.process.pid]

    def stop(self, grace_s: float | None = None) -> None:
        """Stop the whole process group: SIGTERM, then SIGKILL after ``grace_s`` (default :data:`STOP_GRACE_S`, or
        :data:`STARTING_GRACE_S` for a server that never answered: it holds no request to finish). Safe to call
        twice."""
        proc = self.process
        if proc is None:
            return
        stop_group(proc, grace_s if grace_s is not None else STOP_GRACE_S if self.version else STARTING_GRACE_S)
        if self in _LIVE:
            _LIVE.remove(self)

    def wait_gone(self, timeout_s: float = 30.0) -> bool:
        """After :meth:`stop`: wait until no process of the server's group is left (its engine core and workers take
        a moment to exit and free their memory); True when none is left."""
        if self.process is None:
            return True
        return wait_group_gone(self.process.pid, timeout_s)

    def __enter__(self) -> EngineServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stop_all() -> None:
    """Stop every server this process started (used by signal handlers and atexit)."""
    for server in list(_LIVE):
        server.stop(grace_s=10.0)
