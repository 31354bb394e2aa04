"""The prompt and csv formats: one prompt per record (``prompt``, ``text`` or ``prompt_column``) as one user
message, or as raw text for ``/v1/completions`` with ``raw_prompts``. Fields: docs/workloads.md#fields-per-format.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specharness.traffic.importers.fields import Tally, build_case, parse_text
from specharness.traffic.workloads import Case

if TYPE_CHECKING:  # options imports the format table, which imports this module: no import at run time
    from specharness.traffic.importers.options import ImportOptions

__all__ = ["convert"]


def convert(obj: dict[str, Any], where: str, default_id: str, opts: ImportOptions, tally: Tally) -> Case:
    """One record's prompt field as a case: one user message, or raw text with ``raw_prompts``."""
    names = (opts.prompt_column,) if opts.prompt_column else ("prompt", "text")
    name = next((n for n in names if obj.get(n) is not None), names[0])
    text = parse_text(obj.get(name), where, name)
    if opts.raw_prompts:
        return build_case(where, default_id, (obj,), opts, tally, prompt=text)
    return build_case(where, default_id, (obj,), opts, tally, messages=[{"role": "user", "content": text}])
