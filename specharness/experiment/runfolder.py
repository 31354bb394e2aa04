"""A run folder's lifecycle, shared by every kind of run: create it (or pick up an interrupted one), write the
manifest, open the journal for one segment (``segment`` / ``segment_end`` events), record how the segment ended,
then hand the folder to ``on_finish`` (the report) even after a failure, and re-raise the failure."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from specharness._errors import EngineDied, RunDirError, SpecharnessError
from specharness.experiment.journal import Journal, read_journal
from specharness.experiment.rundir import JOURNAL, completed_cells, load_manifest, write_manifest
from specharness.experiment.telemetry import TextPolicy
from specharness.records import Manifest, SegmentEndEvent, SegmentEvent

__all__ = ["RunFolder", "open_run_folder", "run_segment", "sigterm_as_interrupt"]


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt for the run, so teardown and the partial report happen."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def open_run_folder(out: Path, *, resume: bool) -> tuple[Manifest | None, set[str], int]:
    """A new run folder (created; refused if it already holds a run) or, with ``resume``, an interrupted one: its
    manifest (None when new), the keys of the cells already done, and the next segment number."""
    if resume:
        manifest = load_manifest(out)
        done, segment = completed_cells(out)
        return manifest, done, segment
    if (out / JOURNAL).exists():
        raise RunDirError(f"{out} already holds a run; pass --resume {out} to finish it or choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    return None, set(), 0


@dataclass(slots=True)
class RunFolder:
    """One open segment of a run folder: the manifest as last written, the open journal and the segment number."""

    out: Path
    manifest: Manifest
    journal: Journal
    segment: int

    def update_manifest(self, **changes: Any) -> None:
        """Change fields of the manifest and write it at once (atomically)."""
        self.manifest = replace(self.manifest, **changes)
        write_manifest(self.out, self.manifest)


@contextlib.contextmanager
def run_segment(
    out: Path,
    manifest: Manifest,
    *,
    segment: int,
    resume: bool,
    done: set[str],
    fsync: bool = True,
    policy: TextPolicy | None = None,
    on_finish: Callable[[Path], object] | None = None,
) -> Iterator[RunFolder]:
    """Run the body of a ``with`` as one segment of the run in ``out``. The manifest is written with the segment's
    start; the journal opens with a ``segment`` event and closes with ``segment_end`` (status complete,
    interrupted, engine-died or failed); the manifest then records the status, ``on_finish(out)`` runs, and a
    failure is raised again. SIGTERM interrupts like Ctrl-C."""
    started = time.time()
    entry = {"segment": segment, "started_unix_s": started, "resume": resume}
    manifest = replace(
        manifest,
        started_unix_s=manifest.started_unix_s if manifest.started_unix_s is not None else started,
        segments=[*manifest.segments, entry],
    )
    write_manifest(out, manifest)
    status = "interrupted"
    error: BaseException | None = None
    with Journal(out / JOURNAL, fsync=fsync, policy=policy) as journal, sigterm_as_interrupt():
        journal.write(
            SegmentEvent(segment=segment, resume=resume, started_unix_s=time.time(), skipped_cells=sorted(done))
        )
        folder = RunFolder(out, manifest, journal, segment)
        try:
            yield folder
            status = "complete"
        except KeyboardInterrupt as exc:
            status, error = "interrupted", exc
        except EngineDied as exc:
            status, error = "engine-died", exc
        except BaseException as exc:
            status, error = "failed", exc
        finally:
            ended = SegmentEndEvent(segment=segment, status=status, ended_unix_s=time.time(), error=str(error or ""))
            journal.write(ended)
    ended_s = time.time()
    segments = [
        *folder.manifest.segments[:-1],
        {**folder.manifest.segments[-1], "ended_unix_s": ended_s, "status": status},
    ]
    reused = _engines_reused(out) or folder.manifest.engines_reused
    folder.update_manifest(status=status, ended_unix_s=ended_s, segments=segments, engines_reused=reused)
    if on_finish is not None:
        on_finish(out)
    if error is not None:
        raise error


def _engines_reused(out: Path) -> list[dict[str, Any]] | None:
    """Every pooled engine the journal records (:attr:`EngineRecord.reused`), with its arm; None if none."""
    try:
        engines = read_journal(out / JOURNAL).engines
    except (OSError, SpecharnessError):
        return None
    found = [{"arm": e.arm, **e.reused} for e in engines if e.reused]
    return found or None
