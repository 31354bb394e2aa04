"""The client side of a pooled engine: :class:`PooledEngine`, driven like an attached engine once its lease is
ready, holding the lease while a run uses it and copying the engine's log into the run folder on release.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import httpx

from specharness import _errors
from specharness._errors import EngineError, EngineStartTimeout
from specharness.engines.attached import AttachedEngine
from specharness.engines.counters import REQUEST_SUCCESS, scrape
from specharness.engines.pool.lease import Lease, _alive
from specharness.engines.server import ArmSpec, EngineSettings
from specharness.engines.startlog import first_error

__all__ = ["LeaseFolder", "PooledEngine", "requests_served"]

_VANISHED_S = 60.0  # a lease not (or no longer) on disk this long after the hold began: its keeper is gone


class LeaseFolder(Protocol):
    """What a pooled engine needs of its pool (an :class:`~specharness.engines.pool.enginepool.EnginePool`)."""

    root: Path

    def lease_path(self, digest: str) -> Path: ...


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

    def __init__(self, pool: LeaseFolder, arm: ArmSpec, digest: str, settings: EngineSettings, run_log: Path) -> None:
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
