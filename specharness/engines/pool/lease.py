"""The lease file a keeper writes for its engine (:class:`Lease`), and the files beside it: holds
(``<digest>.hold.<pid>``, one per run using the engine) and the touch file whose age is the engine's idle time.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from specharness.engines.preloader import process_start_time

__all__ = ["Lease"]


def _alive(pid: int, started: str | None = None) -> bool:
    now = process_start_time(pid)
    return now is not None and (started is None or now == started)


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


def _holders(root: Path, digest: str) -> list[int]:
    pids = []
    for path in root.glob(f"{digest}.hold.*"):
        pid = path.name.rsplit(".", 1)[1]
        if pid.isdigit() and _alive(int(pid)):
            pids.append(int(pid))
        else:
            path.unlink(missing_ok=True)
    return pids


def _touched(root: Path, digest: str) -> float:
    try:
        return (root / f"{digest}.touch").stat().st_mtime
    except OSError:
        return 0.0
