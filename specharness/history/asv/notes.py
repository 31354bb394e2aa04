"""What a tracked value carries beyond its number: its interval, its sample count, or why its release failed.

Each lookup writes a :class:`Note` (:func:`write_note`); the ASV plugin copies the notes into the result file's
statistics columns as ASV saves it (:func:`apply_notes`) and keeps them in a companion ``<result>.notes.jsonl``
(:func:`update_companion`, :func:`read_companion`). This module owns the note format; nothing else reads or writes it.
What the columns hold: docs/asv-site.md#notes-what-a-tracked-value-carries.
"""

from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from specharness.history.asv.spreadfile import spread_sd

if TYPE_CHECKING:
    from specharness.history.asv.metrics import Interval

__all__ = [
    "ASV_LEVEL",
    "FAILURE_BENCHMARK",
    "FailureText",
    "Note",
    "apply_notes",
    "block_stats",
    "companion_path",
    "consume_notes",
    "failure_entry",
    "failure_stderr",
    "notes_dir",
    "params_label",
    "read_companion",
    "read_notes",
    "reset_notes",
    "setups_differ",
    "spread_stats",
    "stats_entry",
    "update_companion",
    "value_note",
    "write_companion",
    "write_note",
]

NOTE_SCHEMA = 1
ASV_LEVEL = 0.99  # the level of ASV's ``ci_99_a/b`` columns
NO_ENV = "no-env"  # where notes go when ASV did not name the environment (an existing one, which runs one commit)


@dataclass(frozen=True, slots=True)
class Note:
    """One tracked value's extra: ``benchmark`` is ASV's name (``bench_paired.PairedNgram.track_slowdown``),
    ``params`` the parameter values as ASV writes them (``repr``), ``commit`` the ledger commit (None where ASV did
    not say: an existing environment)."""

    benchmark: str
    params: tuple[str, ...]
    commit: str | None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_level: float | None = None
    n: int | None = None
    failed: str | None = None
    source: str = ""
    block_values: tuple[float, ...] = ()
    speed_verdict: str = ""
    quality_verdict: str = ""
    harness: str = ""  # the harness version (and its commit) that measured the value
    setup: str = ""  # the ASV profile and engine options it was measured with (suite.measured_setup); "" unknown


def setups_differ(a: str, b: str) -> bool:
    """Whether two notes' setups say their values were measured another way: both recorded and unequal (a note older
    than the record says nothing, and is taken as comparable)."""
    return bool(a and b and a != b)


def value_note(
    benchmark: str,
    params: tuple[Any, ...],
    commit: str | None,
    interval: Interval | None,
    *,
    source: str = "",
    failed: str | None = None,
    harness: str = "",
    setup: str = "",
) -> Note:
    """The note of one tracked value: ASV's parameter strings (``repr`` of each value) and, where the value has an
    interval, its ends, level, block count, per-block values and verdicts."""
    note = Note(
        benchmark=benchmark,
        params=tuple(repr(p) for p in params),
        commit=commit,
        failed=failed,
        source=source,
        harness=harness,
        setup=setup,
    )
    if interval is None:
        return note
    return replace(
        note,
        ci_low=interval.low,
        ci_high=interval.high,
        ci_level=interval.confidence,
        n=interval.blocks,
        block_values=tuple(interval.block_values),
        speed_verdict=interval.speed_verdict,
        quality_verdict=interval.quality_verdict,
    )


def params_label(params: Sequence[object]) -> str:
    """ASV's parameter strings as a reader writes them: ``('copy', 4)`` → ``copy, 4``."""
    return ", ".join(str(p).strip("'") for p in params)


def _line(note: Note) -> str:
    return json.dumps({"schema": NOTE_SCHEMA, **asdict(note)}) + "\n"


def notes_dir(conf_dir: Path | None = None) -> Path:
    """Where lookups leave notes: ``SPECHARNESS_ASV_NOTES`` or ``<ASV conf dir>/.asv/specharness-notes``."""
    raw = os.environ.get("SPECHARNESS_ASV_NOTES")
    if raw:
        return Path(raw)
    base = conf_dir or Path(os.environ.get("ASV_CONF_DIR") or Path.cwd())
    return base / ".asv" / "specharness-notes"


def _file(env_name: str, bench_class: str, root: Path) -> Path:
    return root / env_name / f"{bench_class}.jsonl"


def reset_notes(bench_class: str) -> None:
    """Forget a class's notes for this environment (its ``setup_cache`` starts a new experiment)."""
    path = _file(os.environ.get("ASV_ENV_NAME", NO_ENV), bench_class, notes_dir())
    path.unlink(missing_ok=True)


def write_note(note: Note) -> None:
    """Append one note for this environment (``ASV_ENV_NAME``), flushed at once."""
    bench_class = ".".join(note.benchmark.split(".")[:2])
    path = _file(os.environ.get("ASV_ENV_NAME", NO_ENV), bench_class, notes_dir())
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(_line(note))


def _parse(line: str) -> Note | None:
    try:
        raw = json.loads(line)
    except json.JSONDecodeError:
        return None
    if not isinstance(raw, dict) or raw.pop("schema", None) != NOTE_SCHEMA:
        return None
    known = {f.name for f in fields(Note)}
    raw = {k: v for k, v in raw.items() if k in known}  # a newer writer's extra fields are ignored
    raw["params"] = tuple(raw.get("params") or ())
    raw["block_values"] = tuple(raw.get("block_values") or ())
    try:
        return Note(**raw)
    except TypeError:
        return None


def read_notes(env_name: str, commit: str, root: Path | None = None) -> list[Note]:
    """The notes left in an environment for ``commit`` (or with no commit: an existing environment runs one; its
    benchmarks leave notes under :data:`NO_ENV`, read only for an existing environment's result)."""
    notes: list[Note] = []
    for path in _note_files(env_name, root):
        for line in path.read_text().splitlines():
            note = _parse(line)
            if note is not None and note.commit in (None, commit):
                notes.append(note)
    return notes


def _note_files(env_name: str, root: Path | None = None) -> list[Path]:
    base = root or notes_dir()
    folders = [base / env_name] + ([base / NO_ENV] if env_name.startswith("existing") else [])
    return [p for folder in folders if folder.is_dir() for p in sorted(folder.glob("*.jsonl"))]


def consume_notes(env_name: str, root: Path | None = None) -> None:
    """Delete an environment's notes once its result is saved, so none can attach to a later commit's result."""
    for path in _note_files(env_name, root):
        path.unlink(missing_ok=True)


def stats_entry(
    value: float, low: float, high: float, n: int, q25: float | None = None, q75: float | None = None
) -> dict[str, Any]:
    """ASV's stats dict: ``ci_99_a/b`` a 99% interval, ``q_25/q_75`` quartiles (the interval ends where none are
    known), ``repeat`` != 1 so that ``compare`` reads the interval."""
    return {
        "ci_99_a": low,
        "ci_99_b": high,
        "q_25": low if q25 is None else q25,
        "q_75": high if q75 is None else q75,
        "repeat": max(int(n), 2),
        "number": 1,
    }


def block_stats(value: float, note: Note) -> dict[str, Any] | None:
    """ASV stats of a value with an interval in its note: from its block values (99% t interval of the geometric
    mean, quartiles of the blocks), else the note's interval widened to 99% on the log scale; None without one."""
    from scipy import stats

    blocks = np.array([b for b in note.block_values if _finite(b) and b > 0], dtype=float)
    if blocks.size >= 2:
        logs = np.log(blocks)
        half = (
            float(stats.t.ppf(0.5 + ASV_LEVEL / 2, blocks.size - 1)) * float(logs.std(ddof=1)) / math.sqrt(blocks.size)
        )
        centre = float(logs.mean())
        q25, q75 = (float(q) for q in np.percentile(blocks, [25, 75]))
        return stats_entry(value, math.exp(centre - half), math.exp(centre + half), int(blocks.size), q25, q75)
    if not _finite(note.ci_low, note.ci_high) or not (note.ci_low or 0) > 0 or not (note.n or 0) >= 2:
        return None
    level = note.ci_level or 0.95
    df = (note.n or 2) - 1
    widen = float(stats.t.ppf(0.5 + ASV_LEVEL / 2, df)) / float(stats.t.ppf(0.5 + level / 2, df))
    lo, hi = math.log(float(note.ci_low)), math.log(float(note.ci_high))  # type: ignore[arg-type]
    mid, half = (lo + hi) / 2, (hi - lo) / 2 * widen
    return stats_entry(value, math.exp(mid - half), math.exp(mid + half), note.n or 2)


def spread_stats(value: float, sd_log: float, df: float, runs: int) -> dict[str, Any]:
    """ASV stats of one run's absolute value from the run-to-run sd of its log: a 99% interval and the quartiles."""
    from scipy import stats

    half = float(stats.t.ppf(0.5 + ASV_LEVEL / 2, df)) * sd_log
    quart = float(stats.norm.ppf(0.75)) * sd_log
    return stats_entry(
        value, value * math.exp(-half), value * math.exp(half), runs, value * math.exp(-quart), value * math.exp(quart)
    )


def _index(params_grid: list[list[str]], params: tuple[str, ...]) -> int | None:
    if not params_grid:
        return 0 if not params else None
    for i, combo in enumerate(itertools.product(*params_grid)):
        if tuple(combo) == params:
            return i
    return None


def _finite(*values: Any) -> bool:
    return all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)


def apply_notes(results: Any, notes: list[Note], spread: dict[str, Any] | None = None) -> list[Note]:
    """Fill an ``asv.results.Results``' stats from notes (intervals) and the machine's spread (absolute values).

    Returns the notes it used, for the companion file. A failed release keeps ASV's null results; its note carries
    the reason. Every value other than a slowdown gets its interval from the spread alone, rebuilt here (none
    without a measured spread)."""
    spread = spread or {}
    used: list[Note] = []
    stats_of = results._stats
    values_of = results._results
    grids = results._benchmark_params
    for note in notes:
        if note.benchmark not in values_of:
            continue
        used.append(note)
        i = _index(grids.get(note.benchmark) or [], note.params)
        values = values_of.get(note.benchmark)
        if i is None or values is None or note.failed or not _finite(note.ci_low, note.ci_high):
            continue
        value = values[i] if i < len(values) else None
        if not _finite(value):
            continue
        entry = block_stats(float(value), note)  # type: ignore[arg-type]
        if entry is None:
            continue
        stats = list(stats_of.get(note.benchmark) or [None] * len(values))
        stats[i] = entry
        stats_of[note.benchmark] = stats
    for name, values in values_of.items():
        if name.endswith(".track_slowdown") or name == FAILURE_BENCHMARK or name.startswith(PAIR_RUN_PREFIX):
            continue  # its interval is the experiment's own (the notes, or a release pair's record)
        sd = spread_sd(spread, name)
        if values is None:
            continue
        if sd is None:  # no measured spread: no interval (compare falls back to its factor), never a stale one
            stats_of[name] = None
            continue
        runs = int(spread.get("runs", 3))
        stats_of[name] = [spread_stats(v, sd[0], sd[1], runs) if _finite(v) else None for v in values]
    failure_entry(results, used)
    return used


FAILURE_BENCHMARK = "bench_paired.EngineFailure.track_first_error"  # written by the plugin, not a benchmark class
PAIR_RUN_PREFIX = "bench_release."  # paired runs' values: a release pair's (its record) or a configuration pair's


def failure_entry(results: Any, notes: list[Note]) -> str | None:
    """Put a failed release's reason where ``asv compare`` prints it: a result row ``EngineFailure.track_first_error``
    whose one parameter is the reason (value 1), so ``asv compare A B`` lists ``…track_first_error('failed: ngram
    server ended …: TypeError: …')``. ASV stores no text per result otherwise (``stderr`` is not saved; ``failed`` is
    all it prints). A result without a failure loses a stale row. Returns the reason written, or None."""
    from asv.runner import BenchmarkResult

    reasons = [n.failed for n in sorted(notes, key=lambda n: not n.benchmark.startswith("bench_paired.")) if n.failed]
    if not reasons and not any(n.benchmark.startswith("bench_paired.PairedNgram.") for n in notes):
        return None  # the release's own experiment was not measured again: keep what the file says
    if FAILURE_BENCHMARK in results._results:
        results.remove_result(FAILURE_BENCHMARK)
    if not reasons:
        return None
    reason = reasons[0]
    results.add_result(
        {"name": FAILURE_BENCHMARK, "version": "specharness-failure-1", "params": [[repr(reason)]]},
        BenchmarkResult(result=[1.0], samples=[None], number=[None], errcode=0, stderr="", profile=None),
    )
    return reason


class FailureText(dict[str, str]):
    """A loaded result's ``stderr`` (ASV's ``Results._stderr``, benchmark name → text): a benchmark with no recorded
    reason reads ``""``. ASV's ``format_benchmark_result`` (``asv/results.py``) indexes ``results.stderr[name]`` for
    every failed parameterised benchmark once the dict is non-empty, so a plain dict would raise KeyError there."""

    def __missing__(self, key: str) -> str:
        return ""


def failure_stderr(result_file: Path, results: Any) -> FailureText:
    """The failure reason of ``result_file``'s release as ASV's per-benchmark ``stderr``, for every benchmark of the
    loaded ``results`` that has a failed (None) value and a failure note in the companion; empty when none failed.

    ASV never writes ``stderr`` to a result file (``asv/results.py``, ``Results.__init__``: "stderr and errcode are
    not saved to files"), so ``asv show`` prints only *failed* for a result it loads. ``format_benchmark_result``
    appends ``results.stderr[name]`` under a failed parameterised benchmark when the dict is non-empty; the plugin
    fills it from the companion as ASV loads the file, so ``asv show`` (with or without ``--details``) prints the
    reason there. One reason per release, the paired experiment's (other benchmarks' notes may hold a wrapper-only
    reason), as :func:`failure_entry` and the release review give it. No column of the result changes."""
    notes = read_companion(result_file)
    failed = [n for n in sorted(notes, key=lambda n: not n.benchmark.startswith("bench_paired.")) if n.failed]
    out = FailureText()
    if not failed:
        return out
    reason = str(failed[0].failed)
    with_reason = {n.benchmark for n in failed}
    for name, values in results._results.items():
        vals = values if isinstance(values, list) else [values]
        if name in with_reason and any(v is None for v in vals):
            out[name] = f"{reason}\n(the engine's first error, from {companion_path(result_file).name})"
    return out


def companion_path(result_file: Path) -> Path:
    """``<commit>-<env>.json`` → ``<commit>-<env>.notes.jsonl`` (not read by ASV)."""
    return result_file.with_name(result_file.name.removesuffix(".json") + ".notes.jsonl")


def read_companion(result_file: Path) -> list[Note]:
    path = companion_path(result_file)
    if not path.is_file():
        return []
    return [n for n in (_parse(line) for line in path.read_text().splitlines()) if n is not None]


def update_companion(result_file: Path, fresh: list[Note], remeasured: Collection[str] = ()) -> None:
    """Put ``fresh`` notes into a result's companion: an older note stays only where no fresh note has its benchmark
    and parameters and its benchmark was not measured again (``remeasured``: a save with a new ``started_at``)."""
    keys = {(n.benchmark, n.params) for n in fresh}
    kept = [
        n for n in read_companion(result_file) if (n.benchmark, n.params) not in keys and n.benchmark not in remeasured
    ]
    write_companion(result_file, kept + fresh)


def write_companion(result_file: Path, notes: list[Note]) -> None:
    path = companion_path(result_file)
    if not notes:
        path.unlink(missing_ok=True)
        return
    path.write_text("".join(_line(n) for n in notes))
