"""Engine start phases in words: ``starts.md`` (the starts ``specharness starts`` measured, one row each, and per arm
its first start against the median of the later ones) and the one-line summary under each engine in ``report.md``."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

from specharness.engines.preload import ENV as PRELOAD_ENV
from specharness.engines.preload import forked
from specharness.experiment.startbench import CACHES, StartMeasurement
from specharness.numbers import number

__all__ = ["format_starts", "phases_text"]

_PHASES = (
    ("total_s", "total"),
    ("import_s", "import"),
    ("weights_s", "weights"),
    ("compile_s", "compile"),
    ("kv_cache_s", "KV cache / warm-up"),
    ("graph_capture_s", "graph capture"),
    ("ready_s", "ready"),
)


def _s(value: float | None, digits: int = 0) -> str:
    v = number(value)
    return "—" if math.isnan(v) else f"{v:.{digits}f}"


def phases_text(phases: Mapping[str, float | None], first_request_s: float | None = None) -> str:
    """One engine start in a line, e.g. ``start 38 s (import 16, weights 7, compile 13, KV cache / warm-up 0, graph
    capture 1, ready 1; engine log, whole seconds), first request 0.27 s``; "" for an engine with no phases
    (attached, or a journal from before they were read)."""
    if not phases or math.isnan(number(phases.get("total_s"))):
        return ""
    parts = ", ".join(f"{label} {_s(phases.get(key))}" for key, label in _PHASES[1:])
    text = f"start {_s(phases.get('total_s'))} s ({parts}; engine log, whole seconds)"
    first = number(first_request_s)
    return text + (f", first request {first:.2f} s" if not math.isnan(first) else "")


def _median(starts: Sequence[StartMeasurement], key: str) -> float:
    values = [v for s in starts if not math.isnan(v := number(s.phases_s.get(key)))]
    return statistics.median(values) if values else math.nan


def format_starts(starts: Sequence[StartMeasurement]) -> str:
    """The table of every start (failed ones listed under it) and a line per arm: its first start and the median
    of its later ones, with their count."""
    if not starts:
        return "No engine start was measured.\n"
    head = starts[0]
    lines = [
        f"# Engine starts: vLLM {head.vllm_version}, {head.machine}",
        "",
        "Each engine started alone, in rounds (every arm once, then again). Phases in seconds from the engine log's",
        "timestamps (whole seconds); *to /health* from the harness's clock (spawn to the first healthy answer); then",
        "two 16-token chat requests, timed.",
        "Compile caches: " + "; ".join(f"*{key}*: {text}" for key, text in CACHES.items()) + ".",
        "Server: *spawned* (`python -m`, every import done again) or *preloaded* (forked from a process that imported",
        f"torch and vLLM once: that process's import counts in the first such start; {PRELOAD_ENV}).",
        "",
        "| arm | round | caches | server | "
        + " | ".join(label for _, label in _PHASES)
        + " | to /health | 1st request | 2nd request |",
        "|---|---|---|---|" + "---|" * (len(_PHASES) + 3),
    ]
    for s in starts:
        phases = " | ".join(_s(s.phases_s.get(key)) for key, _ in _PHASES)
        tail = f"{_s(s.to_health_s, 1)} | {_s(s.first_request_s, 2)} | {_s(s.second_request_s, 2)}"
        server = "preloaded" if forked(s.engine_env) else "spawned"
        lines.append(f"| {s.arm} | {s.index} | {s.caches} | {server} | {phases} | {tail} |")
    lines.append("")
    failed = [s for s in starts if s.error]
    for s in failed:
        lines.append(f"- failed: {s.arm}, round {s.index}: {s.error}")
    if failed:
        lines.append("")
    for arm in dict.fromkeys(s.arm for s in starts):
        if command := next((s.command for s in starts if s.arm == arm and s.command), None):
            lines.append(f"- {arm}'s command (first start): `{' '.join(command)}`")
    for arm in dict.fromkeys(s.arm for s in starts):
        mine = [s for s in starts if s.arm == arm]
        first = next((s for s in mine if s.index == 1), None)
        later = [s for s in mine if s.index > 1 and not s.error]
        first_text = f"{_s(first.phases_s.get('total_s'))} s (caches {first.caches})" if first else "—"
        lines.append(
            f"- {arm}: first start {first_text}; later starts median {_s(_median(later, 'total_s'))} s "
            f"(n = {len(later)}; import {_s(_median(later, 'import_s'))} s, compile {_s(_median(later, 'compile_s'))} s)"
        )
    return "\n".join(lines) + "\n"
