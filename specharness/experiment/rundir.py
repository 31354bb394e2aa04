"""The run folder: its files' names, the manifest (written atomically), provenance, which cells are done, and its
lifecycle, shared by every kind of run.

One owner for the run-folder layout: ``manifest.json``, ``journal.jsonl`` (or, committed, ``journal.jsonl.xz``),
``logs/<arm>.s<segment>.log``; reporting writes its own files. A run creates its folder (or picks up an interrupted
one, :func:`open_run_folder`), then runs one segment (:func:`run_segment`): the manifest written, the journal open
between ``segment`` and ``segment_end`` events, how the segment ended recorded, the folder handed to ``on_finish``
(the report) even after a failure, and the failure raised again.
"""

from __future__ import annotations

import contextlib
import lzma
import os
import platform
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import orjson

from specharness import __version__
from specharness._errors import EngineDied, RunDirError, SpecharnessError
from specharness.engines.memory import MemoryProbe
from specharness.experiment.journal import Journal, JournalContents, parse_journal, read_journal
from specharness.experiment.telemetry import TextPolicy
from specharness.records import Manifest, SegmentEndEvent, SegmentEvent, base_key

__all__ = [
    "JOURNAL",
    "LOGS",
    "MANIFEST",
    "PACKED_JOURNAL",
    "RunFolder",
    "completed_cells",
    "copy_run",
    "cpu_model",
    "engine_log",
    "hardware_info",
    "harness_commit",
    "harness_provenance",
    "harness_version",
    "load_manifest",
    "open_run_folder",
    "read_manifest",
    "read_run_journal",
    "run_segment",
    "sigterm_as_interrupt",
    "write_manifest",
]

MANIFEST = "manifest.json"
JOURNAL = "journal.jsonl"
PACKED_JOURNAL = "journal.jsonl.xz"  # how committed run folders keep their journal (xz)
LOGS = "logs"


def engine_log(out_dir: Path, arm: str, segment: int, instance: int = 0) -> Path:
    """Where an arm's engine log goes for a run segment: ``logs/<arm>.s<segment>.log``, and for a later engine
    instance of the segment ``logs/<arm>.s<segment>.i<instance>.log``."""
    return out_dir / LOGS / (f"{arm}.s{segment}.log" if instance == 0 else f"{arm}.s{segment}.i{instance}.log")


def read_run_journal(run_dir: Path) -> JournalContents:
    """A run folder's journal, read from ``journal.jsonl`` or else from a packed ``journal.jsonl.xz``."""
    packed = run_dir / PACKED_JOURNAL
    if not (run_dir / JOURNAL).is_file() and packed.is_file():
        return parse_journal(lzma.decompress(packed.read_bytes()), str(packed))
    return read_journal(run_dir / JOURNAL)


def copy_run(source: Path, dest: Path) -> Path:
    """Copy a run folder's manifest and journal into ``dest`` (created), unpacking a packed journal; returns ``dest``
    (a working copy to write reports into, e.g. from a committed folder under reports/)."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / MANIFEST).write_bytes((source / MANIFEST).read_bytes())
    if (source / JOURNAL).is_file():
        (dest / JOURNAL).write_bytes((source / JOURNAL).read_bytes())
    else:
        (dest / JOURNAL).write_bytes(lzma.decompress((source / PACKED_JOURNAL).read_bytes()))
    return dest


def harness_version() -> str:
    """The installed specharness package version."""

    return __version__


def harness_commit() -> str:
    """The commit of specharness's own checkout (``-dirty`` with uncommitted changes), or "not a checkout" when the
    package is installed, or sits inside a repository that is not specharness's (its commit would say nothing)."""
    package = Path(__file__).resolve().parents[1]
    with contextlib.suppress(Exception):
        top = subprocess.run(
            ["git", "-C", str(package), "rev-parse", "--show-toplevel"], capture_output=True, text=True, timeout=5
        )
        root = Path(top.stdout.strip()) if top.returncode == 0 else None
        if root is None or (root / "specharness").resolve() != package or not (root / "pyproject.toml").is_file():
            return "not a checkout"
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        if out.returncode == 0:
            dirty = subprocess.run(
                ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
                timeout=5,
            ).stdout.strip()
            return out.stdout.strip() + ("-dirty" if dirty else "")
    return "unknown"


def harness_provenance() -> str:
    """The harness that measured a run or value: ``<version> (<commit>)``, or ``<version> (<commit>, dirty, diff
    sha256 <first 12 hex>)`` when the checkout had uncommitted changes (the hash of ``git diff HEAD`` names the tree)."""
    import hashlib

    commit = harness_commit()
    if not commit.endswith("-dirty"):
        return f"{harness_version()} ({commit})"
    root = Path(__file__).resolve().parents[2]
    try:
        diff = subprocess.run(["git", "-C", str(root), "diff", "HEAD"], capture_output=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return f"{harness_version()} ({commit.removesuffix('-dirty')}, dirty, diff not readable)"
    digest = hashlib.sha256(diff.stdout).hexdigest()[:12]
    return f"{harness_version()} ({commit.removesuffix('-dirty')}, dirty, diff sha256 {digest})"


def cpu_model() -> str:
    """The CPU's model name plus family/model/stepping (virtual machines often report a generic name)."""
    fields: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "cpu family", "model", "stepping") and key.strip() not in fields:
                fields[key.strip()] = value.strip()
    name = fields.get("model name") or platform.processor() or "unknown"
    if "cpu family" in fields:
        name += (
            f" (family {fields['cpu family']} model {fields.get('model', '?')} stepping {fields.get('stepping', '?')})"
        )
    return name


def hardware_info(probe: MemoryProbe) -> dict[str, Any]:
    cpu = cpu_model()
    mem_gib = float("nan")
    with contextlib.suppress(Exception):
        import psutil

        mem_gib = psutil.virtual_memory().total / 2**30
    return {
        "machine": platform.machine(),
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "memory_gib": round(mem_gib, 1),
        "gpus": probe.gpu_names(),
        "gpu_memory_observed": probe.gpu_observed,
        "python": platform.python_version(),
        "hostname_hash": hex(abs(hash(platform.node())) % (1 << 32)),
    }


def write_manifest(out_dir: Path, manifest: Manifest) -> None:
    """Write ``manifest.json`` atomically (a temporary file, then a rename)."""
    tmp = out_dir / (MANIFEST + ".tmp")
    tmp.write_bytes(orjson.dumps(manifest.to_dict(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
    tmp.replace(out_dir / MANIFEST)


def load_manifest(out_dir: Path) -> Manifest:
    """The run folder's manifest, typed (to resume a run or rebuild its configuration)."""
    return Manifest.from_dict(read_manifest(out_dir))


def read_manifest(out_dir: Path) -> dict[str, Any]:
    """The run folder's manifest as written (analysis and report.json keep it whole, keys of every schema)."""
    path = out_dir / MANIFEST
    if not path.is_file():
        raise RunDirError(f"{out_dir} has no {MANIFEST}; pass a folder made by 'specharness run'")
    try:
        obj = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise RunDirError(f"{path} is not valid JSON ({exc}); the run folder is damaged") from None
    if not isinstance(obj, dict) or "config" not in obj:
        raise RunDirError(f"{path} has no 'config'; the run folder is damaged")
    return obj


def completed_cells(out_dir: Path) -> tuple[set[str], int]:
    """Keys of cells with a valid record, and the next segment number."""
    if not (out_dir / JOURNAL).is_file():
        return set(), 0
    contents = read_journal(out_dir / JOURNAL)
    done = {base_key(c.cell) for c in contents.cells if c.valid}
    segments = [e.segment for e in contents.events_of(SegmentEvent)]
    return done, (max(segments) + 1 if segments else 0)


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
    """One open segment of a run folder: the manifest as last written, the open journal, the segment number and the
    engine instance now running (the driver moves it on where the profile renews the engines)."""

    out: Path
    manifest: Manifest
    journal: Journal
    segment: int
    instance: int = 0

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
