"""Answer checks, fixed in advance per case, by type: one table (:data:`PARSERS`) from a check's ``type`` to the
function that validates its dict, which a new check type joins in one place. Basic checks live in
:mod:`~specharness.traffic.basic_checks`, reference checks in :mod:`~specharness.traffic.reference`, JSON-schema and
tool-call checks in :mod:`~specharness.traffic.structured`. ``parse_check`` runs when the workload is loaded, so a bad
rubric fails before any request is sent; the client judges a response with :meth:`Check.evaluate_response`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specharness._errors import WorkloadError
from specharness.traffic.basic_checks import (
    BASIC_CHECK_TYPES,
    DEFAULT_ABSTAIN_PHRASES,
    Check,
    CheckResult,
    parse_basic_check,
)
from specharness.traffic.reference import parse_reference_check
from specharness.traffic.structured import parse_structured_check

__all__ = ["CHECK_TYPES", "DEFAULT_ABSTAIN_PHRASES", "PARSERS", "Check", "CheckResult", "parse_check"]

PARSERS: dict[str, Callable[[dict[str, Any], str], Check]] = {
    **dict.fromkeys(BASIC_CHECK_TYPES, parse_basic_check),
    "reference": parse_reference_check,
    "json_schema": parse_structured_check,
    "tool_call": parse_structured_check,
}
CHECK_TYPES = tuple(PARSERS)


def parse_check(raw: Any, where: str) -> Check:
    """Validate a check dict; ``where`` names the file and line for the error message."""
    if not isinstance(raw, dict):
        raise WorkloadError(f'{where}: check must be an object like {{"type": "contains", "values": [..]}}')
    kind = raw.get("type")
    if not isinstance(kind, str) or kind not in PARSERS:
        raise WorkloadError(f"{where}: check.type {kind!r} is unknown; use one of {', '.join(CHECK_TYPES)}")
    return PARSERS[kind](raw, where)
