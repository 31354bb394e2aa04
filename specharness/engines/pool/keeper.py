"""The keeper process (``python -m specharness.engines.pool keep SPEC``): starts one pooled engine's server, writes its
lease, and stops the server when the lease idles, the pool's owner goes, the server dies, or a signal comes.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from specharness._errors import EngineError
from specharness.engines.pool.keys import _KEY_ENV, _POLL_S
from specharness.engines.pool.lease import Lease, _alive, _holders
from specharness.engines.preloader import helper_log, process_start_time
from specharness.engines.server import ArmSpec, EngineServer, EngineSettings

_LOG = helper_log("keeper")  # lines to the keeper's log (its stdout)

__all__ = ["keep", "main"]


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
        _LOG.info(f"keeper {me} ({arm.name}, {digest}): starting the server")  # one line per start
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
        _LOG.info(f"keeper {me} ({arm.name}, {digest}): {why}; server stopped")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0] != "keep":
        print("usage: python -m specharness.engines.pool keep SPEC.json", file=sys.stderr)
        return 2
    return keep(Path(args[1]))
