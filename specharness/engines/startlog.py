"""Reading a vLLM server log: the first real error (the cause, not vLLM's wrapper) and the phases of a start.

vLLM logs a failure several times: the worker's own exception first, then the engine core's re-raise ("Worker failed
with error ..., please check the stack trace above"), then the API server's "Engine core initialization failed. See
root cause above". :func:`first_error` returns the first exception that is not one of those wrappers.
:func:`start_phases` times a start from the log records' timestamps (one-second resolution, as vLLM writes them).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields
from datetime import datetime

__all__ = ["StartPhases", "first_error", "is_memory_failure", "start_phases"]

_MAX_CHARS = 300
# "(EngineCore pid=2) ERROR 12-04 09:39:32 [core.py:1366] " and similar record prefixes, any part optional
_PROCESS = r"(?:\(\w+(?:_\w+)? pid=\d+\)\s*)?"
_RECORD = re.compile(
    _PROCESS + r"(?:(DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+(\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)?\s+"
    r"(?:\[[^\]]*\]\s*)?)?"
)
_EXCEPTION = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt))(?::\s*(.*))?$")
_WRAPPER = re.compile(
    r"Engine core initialization failed|Worker failed with error|please check the stack trace above"
    r"|See root cause above|See stack trace \(above\)|EngineCore encountered an issue|Engine process failed to start"
)
_MEMORY = re.compile(
    r"No available memory for the cache blocks|CUDA out of memory|OutOfMemoryError"
    r"|Free memory on device .* is less than desired [GC]PU memory utilization"
)


def _strip(line: str) -> tuple[str, str | None]:
    """(message, level) of one log line: the record prefix removed; level None for a line that is not a record."""
    m = _RECORD.match(line)
    assert m is not None  # every part of the pattern is optional
    return line[m.end() :].strip(), m.group(1)


def _plain_record(message: str) -> bool:
    """An ERROR record that says something itself: not a wrapper, nor a traceback's frame or marker line."""
    return not _WRAPPER.search(message) and not message.startswith(("Traceback", "File ", "^", "~"))


def first_error(log_text: str) -> str:
    """The cause of a failure, one line: the first exception in the log that is not vLLM's wrapper of another
    (``ValueError: No available memory for the cache blocks...``); else the first wrapper; else the first ERROR
    record; else the last non-empty line. DEBUG/INFO/WARNING records never count, even when they name an error."""
    wrapper = error_record = last = ""
    for raw in log_text.splitlines():
        message, level = _strip(raw)
        if not message:
            continue
        last = message
        if level in ("DEBUG", "INFO", "WARNING"):
            continue
        m = _EXCEPTION.match(message)
        if m and m.group(1).rsplit(".", 1)[-1] not in ("KeyboardInterrupt", "SystemExit"):
            if not _WRAPPER.search(message):
                return message[:_MAX_CHARS]
            wrapper = wrapper or message
        elif level in ("ERROR", "CRITICAL") and not error_record and _plain_record(message):
            error_record = message
    found = wrapper or error_record or last
    return found[:_MAX_CHARS] if found else "(empty log)"


def is_memory_failure(reason: str) -> bool:
    """Whether a failure reason (or a whole log) says the engine ran out of device memory while starting."""
    return bool(_MEMORY.search(reason))


@dataclass(frozen=True, slots=True)
class StartPhases:
    """Durations of one engine start in seconds, from its log's timestamps (whole seconds, as vLLM writes them; NaN
    when a phase's end was not logged, and the next phase is then timed from the last end found).

    ``import_s``: from the spawn (or the log's first record) to the engine core's first record: Python and vLLM
    imports, argument parsing, the core process started; ``weights_s``: to "Loading weights took" / "Model loading
    took"; ``compile_s``: to the end of torch.compile ("torch.compile took"; on the CPU build, which does not log
    that, "Warming up done": compile and the warm-up runs); ``kv_cache_s``: the profiling run and KV cache set-up,
    to "KV cache size"; ``graph_capture_s``: CUDA graph capture (the CPU build's last warm-up), to "init engine
    (profile, create kv cache, warmup model) took"; ``ready_s``: to "Starting vLLM server on" (the API server listening);
    ``total_s``: the sum, spawn (or first record) to ready."""

    import_s: float
    weights_s: float
    compile_s: float
    kv_cache_s: float
    graph_capture_s: float
    ready_s: float
    total_s: float

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


_START = re.compile(r"non-default args|vLLM API server version")
# (phase, marker of its end) in the order a start goes through them
_PHASE_ENDS = (
    ("import_s", re.compile(r"\(EngineCore\w* pid=")),
    ("weights_s", re.compile(r"Loading weights took|Model loading took")),
    (
        "compile_s",
        re.compile(r"torch\.compile took [\d.]+ s in total|Warming up done"),
    ),
    ("kv_cache_s", re.compile(r"KV cache size")),
    ("graph_capture_s", re.compile(r"init engine \(profile, create kv cache, warmup model\) took")),
    ("ready_s", re.compile(r"Starting vLLM server on|Application startup complete")),
)


def _seconds(stamp: str, year: int) -> float:
    return datetime.strptime(f"{year}-{stamp}", "%Y-%m-%d %H:%M:%S").timestamp()


def start_phases(log_text: str, spawned_at: float | None = None) -> StartPhases:
    """Phase durations of the last start in a server log (a resumed run appends starts to one log).

    ``spawned_at``: the process's spawn time (``time.time()``), to count the imports before the first record; the
    log's timestamps are read as this machine's local time."""
    year = datetime.fromtimestamp(spawned_at).year if spawned_at is not None else datetime.now().year
    records: list[tuple[float, str]] = []
    for raw in log_text.splitlines():
        m = _RECORD.match(raw)
        if m is not None and m.group(2):
            records.append((_seconds(m.group(2), year), raw))
    starts = [i for i, (_, line) in enumerate(records) if _START.search(line)]
    if starts:
        records = records[starts[-1] :]
    nan = float("nan")
    if not records:
        return StartPhases(nan, nan, nan, nan, nan, nan, nan)
    t0 = prev = records[0][0] if spawned_at is None else min(spawned_at, records[0][0])
    ends: dict[str, float] = {}
    cursor = 0
    for name, marker in _PHASE_ENDS:
        hit = next((i for i in range(cursor, len(records)) if marker.search(records[i][1])), None)
        if hit is None:
            ends[name] = nan
            continue
        cursor = hit
        ends[name] = round(max(0.0, records[hit][0] - prev), 2)
        prev = max(prev, records[hit][0])
    total = round(prev - t0, 2) if not math.isnan(ends["ready_s"]) else nan
    return StartPhases(total_s=total, **ends)
