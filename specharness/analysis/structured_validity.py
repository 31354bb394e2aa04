"""Structured validity: per arm and check type, each structured request counted once at the first stage it failed.

The check types are the structured cases' (``json_schema``, ``tool_call``; :mod:`specharness.traffic.structured`
owns the checks and the wording of their details, which :func:`validity_stage` reads).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from specharness.records import RequestRecord

__all__ = ["STAGES", "STRUCTURED_CHECKS", "StructuredValidity", "structured_validity", "validity_stage"]

STRUCTURED_CHECKS = ("json_schema", "tool_call")  # the check types of structured cases (traffic.structured)
STAGES = ("rejected", "failed", "no_tool_call", "not_json", "schema_invalid", "wrong_values", "valid", "unknown")


@dataclass(frozen=True, slots=True)
class StructuredValidity:
    """One arm's structured requests of one check type in one (workload, load) cell, each counted once, at the first
    stage it failed (in this order):

    ``rejected``        the server refused the request (HTTP 4xx, e.g. a schema it cannot enforce)
    ``failed``          any other error (5xx, timeout, broken stream) or a stream that did not finish
    ``no_tool_call``    tool_call check: no tool call came back, or none to the function expected
    ``not_json``        the answer (a tool call's arguments) is not one JSON value
    ``schema_invalid``  JSON that breaks the schema (a function's ``parameters``)
    ``wrong_values``    schema-valid, but an expected value is missing or different (the model's accuracy, not the
                        constraint's)
    ``valid``           parses, validates and carries every expected value
    ``unknown``         the check failed and its detail was not kept (``--keep-text hash|none``)

    ``truncated`` counts the answers cut at max_tokens among them (a cut answer is mostly ``not_json``): both arms
    share the cap, and a cut structured answer is unusable whatever caused it.
    """

    workload: str
    load: str
    arm: str
    check: str
    requests: int
    rejected: int = 0
    failed: int = 0
    no_tool_call: int = 0
    not_json: int = 0
    schema_invalid: int = 0
    wrong_values: int = 0
    valid: int = 0
    unknown: int = 0
    truncated: int = 0

    @property
    def invalid(self) -> int:
        """Answers that are not usable structured output: no (right) tool call, not JSON, or off the schema."""
        return self.no_tool_call + self.not_json + self.schema_invalid

    @property
    def invalid_fraction(self) -> float:
        """:attr:`invalid` over all requests; NaN for none, or when some failures' stage was not kept."""
        return self.invalid / self.requests if self.requests and not self.unknown else math.nan

    @property
    def rejected_fraction(self) -> float:
        """Requests rejected or failed (no answer to judge) over all requests; NaN for none."""
        return (self.rejected + self.failed) / self.requests if self.requests else math.nan

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "invalid": self.invalid,
            "invalid_fraction": self.invalid_fraction,
            "rejected_fraction": self.rejected_fraction,
        }


def validity_stage(r: RequestRecord, check: str) -> str:
    """The first stage (:data:`STAGES`) at which a structured request failed, or ``valid``. It reads the record's
    error and the check's detail, whose wording :mod:`specharness.traffic.structured` owns (docs/workloads.md#structured-answers
    lists them; tests/unit/test_quality_metrics.py ties the two)."""
    if r.error_kind == "http_error" and r.http_status is not None and 400 <= r.http_status < 500:
        return "rejected"
    if r.error_kind is not None or r.verdict not in ("complete", "truncated"):
        return "failed"
    if r.correct:
        return "valid"
    detail = r.check_detail
    if check == "tool_call" and (not r.tool_calls or detail.startswith(("no tool call", "wrong function"))):
        return "no_tool_call"
    detail = detail.removeprefix("arguments ")
    for prefix, stage in (("not JSON", "not_json"), ("schema:", "schema_invalid"), ("value at", "wrong_values")):
        if detail.startswith(prefix):
            return stage
    return "unknown"


def _declared_checks(manifest: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """(workload, case id) -> check type, from the cases the manifest keeps (every --keep-text policy keeps the
    type); empty where it keeps only ids (``specharness sampled``)."""
    out: dict[tuple[str, str], str] = {}
    for name, entry in (manifest.get("workloads") or {}).items():
        for case in (entry or {}).get("cases", []) if isinstance(entry, dict) else []:
            if isinstance(case, dict) and isinstance(case.get("check"), dict):
                out[(name, str(case.get("id")))] = str(case["check"].get("type"))
    return out


def _inferred_check(r: RequestRecord) -> str | None:
    """The check type read off the record where the manifest does not say: a tool call, or a json_schema detail."""
    detail = r.check_detail
    if detail.startswith(("arguments ", "no tool call", "wrong function", "no function to expect")):
        return "tool_call"
    if detail.startswith(("not JSON", "schema:", "value at", "valid JSON, ", "no schema to check")):
        return "json_schema"
    return None


def structured_validity(records: Iterable[RequestRecord], manifest: Mapping[str, Any]) -> list[StructuredValidity]:
    """Per (workload, load, arm, check type) of the structured cases (json_schema and tool_call checks) among
    ``records`` (measured requests), how many failed at each stage; cells in the order first met, check types in
    :data:`STRUCTURED_CHECKS` order. Empty when no record is of a structured case."""
    declared = _declared_checks(manifest)
    counts: dict[tuple[str, str, str, str], dict[str, int]] = {}
    for r in records:
        check = declared.get((r.workload, r.case_id)) or declared.get((r.workload, r.case_id.split("#", 1)[0]))
        if check is None and not declared:
            check = _inferred_check(r)
        if check not in STRUCTURED_CHECKS:
            continue
        row = counts.setdefault((r.workload, r.load, r.arm, check), dict.fromkeys((*STAGES, "truncated"), 0))
        row[validity_stage(r, check)] += 1
        row["truncated"] += r.verdict == "truncated"
    order = {c: i for i, c in enumerate(STRUCTURED_CHECKS)}
    cells = list(dict.fromkeys(k[:3] for k in counts))
    keys = sorted(counts, key=lambda k: (cells.index(k[:3]), order[k[3]]))
    return [
        StructuredValidity(
            workload=k[0], load=k[1], arm=k[2], check=k[3], requests=sum(counts[k][s] for s in STAGES), **counts[k]
        )
        for k in keys
    ]
