"""The mtbench format: MT-Bench question files (``question_id``, ``turns``, ``category``, ``reference``), whose
references are judged by a mode their category calls for (:func:`category_mode`).
Fields: docs/workloads.md#fields-per-format.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from specharness._errors import WorkloadError
from specharness.traffic.importers.fields import DEFAULT_MODE, Tally, build_case
from specharness.traffic.reference import THRESHOLD_MODES
from specharness.traffic.workloads import Case

if TYPE_CHECKING:  # options imports the format table, which imports this module: no import at run time
    from specharness.traffic.importers.options import ImportOptions

__all__ = ["CATEGORY_MODES", "DEFAULT_THRESHOLDS", "category_mode", "convert"]

CATEGORY_MODES = {  # MT-Bench-style category (lowercased) -> the mode its references are judged by
    "translation": "chrf",
    "summarization": "rouge-l",
    "summarisation": "rouge-l",
    "gsm8k": "final-number",
}
DEFAULT_THRESHOLDS = {"chrf": 0.5, "rouge-l": 0.3}  # a category's scored mode without reference_threshold


def category_mode(category: Any, reference: Any) -> str:
    """The reference mode an MT-Bench-style record's category (or a GSM8K ``#### N`` reference) calls for."""
    if isinstance(category, str) and category.strip().lower() in CATEGORY_MODES:
        return CATEGORY_MODES[category.strip().lower()]
    if isinstance(reference, str) and "####" in reference:
        return "final-number"
    return DEFAULT_MODE


def convert(obj: dict[str, Any], where: str, default_id: str, opts: ImportOptions, tally: Tally) -> Case:
    """One MT-Bench question as a case: its first turn, or every turn replayed; its category picks the mode."""
    turns = obj.get("turns")
    if not isinstance(turns, list) or not turns or not all(isinstance(t, str) and t.strip() for t in turns):
        raise WorkloadError(f"{where}: field 'turns' must be a non-empty list of non-blank strings")
    sent = turns if opts.turns == "replay" else turns[:1]
    group_field = opts.group_field or "category"
    reference_field = opts.reference_field or "reference"
    reference = obj.get(reference_field)
    if isinstance(reference, list):  # one reference answer per turn: the one for the last turn sent
        reference = reference[len(sent) - 1] if len(reference) >= len(sent) else None
    record = {**obj, reference_field: reference}
    mode = opts.reference_mode or category_mode(obj.get("category"), reference)  # the category, whatever groups
    threshold = (opts.reference_threshold or DEFAULT_THRESHOLDS[mode]) if mode in THRESHOLD_MODES else None
    mt_opts = replace(
        opts,
        group_field=group_field,
        reference_field=reference_field,
        reference_mode=mode,
        reference_threshold=threshold,
    )
    return build_case(
        where,
        default_id,
        (record,),
        mt_opts,
        tally,
        messages=[{"role": "user", "content": sent[0]}],
        turns=list(sent[1:]),
    )
