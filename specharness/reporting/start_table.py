"""``starts.md``: the engine starts ``specharness starts`` measured, one row each, and per arm the first start
against the median of the later ones."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from specharness.experiment.startbench import StartMeasurement

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


def _s(value: float, digits: int = 0) -> str:
    return "—" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def phases_text(phases: dict[str, float]) -> str:
    """One engine start's phases in a line (the run report's engine list): ``total 38 s: import 16, weights 7, ...``,
    and the first request after it when measured; "" for an engine with no phases (attached, or an old journal)."""
    if not phases or math.isnan(phases.get("total_s", math.nan)):
        return ""
    parts = ", ".join(f"{label} {_s(phases.get(key, math.nan))}" for key, label in _PHASES[1:])
    text = f"start {_s(phases['total_s'])} s ({parts})"
    first = phases.get("first_request_s", math.nan)
    return text + (f", first request {_s(first, 2)} s" if not math.isnan(first) else "")


def _later_median(starts: Sequence[StartMeasurement], key: str) -> float:
    values = [s.phases_s.get(key, math.nan) for s in starts if s.index > 1 and not s.error]
    values = [v for v in values if not math.isnan(v)]
    return statistics.median(values) if values else math.nan


def format_starts(starts: Sequence[StartMeasurement]) -> str:
    """The table of every start and a line per arm: first start, later starts' median total and its count."""
    if not starts:
        return "No engine start was measured.\n"
    head = starts[0]
    fresh = "fresh, empty compile-cache folders before the first start" if head.fresh_caches else "the caches as found"
    lines = [
        f"# Engine starts: vLLM {head.vllm_version}, {head.machine}",
        "",
        f"Each engine started alone, {fresh}.",
        "Phases in seconds from the engine log's timestamps (whole seconds); *to /health* from the harness's clock",
        "(spawn to the first healthy answer); then two 16-token chat requests, timed.",
        "",
        "| arm | start | " + " | ".join(label for _, label in _PHASES) + " | to /health | 1st request | 2nd request |",
        "|---|---|" + "---|" * (len(_PHASES) + 3),
    ]
    for s in starts:
        phases = " | ".join(_s(s.phases_s.get(key, math.nan)) for key, _ in _PHASES)
        tail = f"{_s(s.to_health_s, 1)} | {_s(s.first_request_s, 2)} | {_s(s.second_request_s, 2)}"
        if s.error:
            tail += f" | failed: {s.error}"
        lines.append(f"| {s.arm} | {s.index} | {phases} | {tail} |")
    lines.append("")
    for arm in dict.fromkeys(s.arm for s in starts):
        mine = [s for s in starts if s.arm == arm]
        first = next((s for s in mine if s.index == 1), None)
        later = [s for s in mine if s.index > 1 and not s.error]
        first_text = _s(first.phases_s.get("total_s", math.nan)) if first else "—"
        lines.append(
            f"- {arm}: first start {first_text} s; later starts median {_s(_later_median(mine, 'total_s'))} s "
            f"(n = {len(later)}; import {_s(_later_median(mine, 'import_s'))} s, "
            f"compile {_s(_later_median(mine, 'compile_s'))} s)"
        )
    return "\n".join(lines) + "\n"
