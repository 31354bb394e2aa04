"""The specharness format: a workload JSONL, read as a run reads it
(:func:`~specharness.traffic.workloads.parse_case`); it carries its own id, group, max_tokens and check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specharness.traffic.importers.fields import Tally
from specharness.traffic.workloads import Case, parse_case

if TYPE_CHECKING:  # options imports the format table, which imports this module: no import at run time
    from specharness.traffic.importers.options import ImportOptions

__all__ = ["convert"]


def convert(obj: dict[str, Any], where: str, default_id: str, opts: ImportOptions, tally: Tally) -> Case:
    """One line of a workload file, validated as a run reads it; ``opts`` and ``tally`` do not apply."""
    return parse_case(obj, where)
