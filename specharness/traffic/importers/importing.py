"""The import: a dataset file becomes a workload through the format table, with every record counted.

:func:`import_workload` reads the records, converts each with its format's converter, rejects and counts the
malformed, filters by prompt length and samples by group (:func:`stratified_sample`).
"""

from __future__ import annotations

import math
import random
from pathlib import Path

from specharness._errors import ConfigError, WorkloadError
from specharness.traffic.importers.fields import Tally
from specharness.traffic.importers.formats import CONVERTERS
from specharness.traffic.importers.options import KEPT_REJECTIONS, ImportOptions, ImportResult
from specharness.traffic.importers.records import Unreadable, csv_records, detect_and_read, json_records
from specharness.traffic.workloads import Case, Workload

__all__ = ["import_workload", "stratified_sample"]


def _prompt_chars(case: Case) -> int:
    if case.messages is not None:
        return sum(len(m["content"]) for m in case.messages) + sum(len(t) for t in case.turns or ())
    return len(case.prompt or "")


def stratified_sample(cases: list[Case], n: int, seed: int) -> list[Case]:
    """``n`` cases stratified by group, in their original order; deterministic for ``seed``.

    Proportional allocation (largest remainders) with at least one case per group when ``n`` is at least the number
    of groups; with fewer, the ``n`` largest groups get one each (ties: first seen). Within a group the cases are
    drawn with ``random.Random(f"{seed}:{group}")``, so a group's draw does not depend on the other groups.
    """
    by_group: dict[str, list[int]] = {}
    for i, case in enumerate(cases):
        by_group.setdefault(case.group, []).append(i)
    if n >= len(cases):
        return list(cases)
    groups = list(by_group)
    sizes = {g: len(by_group[g]) for g in groups}
    quota = {g: n * sizes[g] / len(cases) for g in groups}
    if n < len(groups):
        alloc = {g: 0 for g in groups}
        for g in sorted(groups, key=lambda g: -sizes[g])[:n]:  # sorted() is stable: ties keep first-seen order
            alloc[g] = 1
    else:
        alloc = {g: min(sizes[g], max(1, math.floor(quota[g]))) for g in groups}
        while sum(alloc.values()) > n:  # the floors of 1 overshot: take from the most over-allocated
            g = max((g for g in groups if alloc[g] > 1), key=lambda g: alloc[g] - quota[g])
            alloc[g] -= 1
        while sum(alloc.values()) < n:
            g = max((g for g in groups if alloc[g] < sizes[g]), key=lambda g: quota[g] - alloc[g])
            alloc[g] += 1
    chosen: list[int] = []
    for g in groups:
        chosen += random.Random(f"{seed}:{g}").sample(by_group[g], alloc[g])
    return [cases[i] for i in sorted(chosen)]


def import_workload(path: str | Path, options: ImportOptions | None = None) -> ImportResult:
    """Read ``path`` into a workload; malformed records are rejected and counted, never silently dropped."""
    opts = options or ImportOptions()
    path = Path(path)
    if not path.is_file():
        raise WorkloadError(f"dataset file {path} not found")
    if opts.format == "auto":
        fmt, records = detect_and_read(path, opts)
    else:
        fmt = opts.format
        records = csv_records(path, opts) if fmt == "csv" else json_records(path)
    if fmt == "specharness":
        given = [
            n
            for n in ("prompt_column", "id_field", "group_field", "max_tokens_field", "reference_field")
            if getattr(opts, n) is not None
        ]
        if given:
            raise ConfigError(
                f"{path}: {given[0]} does not apply to a specharness workload file, which carries id, "
                "group, max_tokens and check itself"
            )
    if fmt != "mtbench" and opts.reference_mode is None and opts.reference_threshold is not None:
        raise ConfigError(
            f"{path}: reference_threshold applies to reference_mode rouge-l or chrf only (or an MT-Bench file's "
            "categories); pass --reference-mode"
        )
    if fmt == "mtbench" and opts.turns == "all":
        raise ConfigError(
            f"{path}: turns=all sends a conversation's answers with it, and an MT-Bench question file has "
            "none; use turns=first (the first question) or turns=replay (every question, after each arm's "
            "own answers)"
        )
    convert = CONVERTERS[fmt]
    tallies: dict[str, Tally] = {}  # per kept case id
    read = rejected = skipped = 0
    rejections: list[str] = []
    first_seen: dict[str, str] = {}
    kept: list[Case] = []
    for where, default_id, obj in records:
        read += 1
        try:
            if isinstance(obj, Unreadable):
                what = "not valid JSON" if fmt != "csv" else "malformed row"
                raise WorkloadError(f"{where}: {what} ({obj.error})")
            if not isinstance(obj, dict):
                raise WorkloadError(f"{where}: expected a JSON object, got {type(obj).__name__}")
            tally = Tally()
            case = convert(obj, where, default_id, opts, tally)
            if case.id in first_seen:
                raise WorkloadError(
                    f"{where}: duplicate id {case.id!r} (first at {first_seen[case.id]}); ids must be unique"
                )
        except WorkloadError as exc:
            rejected += 1
            if len(rejections) < KEPT_REJECTIONS:
                rejections.append(str(exc))
            continue
        first_seen[case.id] = where
        chars = _prompt_chars(case)
        if (opts.min_prompt_chars is not None and chars < opts.min_prompt_chars) or (
            opts.max_prompt_chars is not None and chars > opts.max_prompt_chars
        ):
            skipped += 1
            continue
        kept.append(case)
        tallies[case.id] = tally
    if not kept:
        problems = []
        if skipped:
            problems.append(
                f"{skipped} of {read} records outside the prompt-length filter (min_prompt_chars="
                f"{opts.min_prompt_chars}, max_prompt_chars={opts.max_prompt_chars}; characters)"
            )
        if rejected:
            problems.append(f"{rejected} of {read} records rejected, the first: {rejections[0]}")
        raise WorkloadError(f"{path}: nothing imported: {'; '.join(problems) or 'the file has no records'}")
    cases = stratified_sample(kept, opts.sample, opts.seed) if opts.sample else kept
    workload = Workload(name=opts.name or path.stem, cases=tuple(cases), source=str(path))
    final = [tallies[c.id] for c in cases]
    return ImportResult(
        workload=workload,
        format=fmt,
        read=read,
        imported=len(cases),
        skipped_by_filter=skipped,
        not_sampled=len(kept) - len(cases),
        rejected=rejected,
        group_defaulted=sum(t.group_defaulted for t in final),
        unchecked=sum(t.unchecked for t in final),
        reference_modes=tuple(
            (m, sum(t.mode == m for t in final)) for m in dict.fromkeys(t.mode for t in final if t.mode)
        ),
        max_tokens_defaulted=sum(t.max_tokens_defaulted for t in final),
        rejections=tuple(rejections),
    )
