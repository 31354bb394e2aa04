"""The structured-validity table (per arm and check type, each structured request at the first stage it failed;
counted in :mod:`specharness.analysis.structured_validity`), its rule, and report.md's section built from them.
``sampled.md`` shows the same table."""

from __future__ import annotations

from specharness.analysis.analyse import Analysis
from specharness.analysis.structured_validity import StructuredValidity, structured_validity
from specharness.reporting.answer import load_text
from specharness.reporting.markdown.cells import pct as _pct

__all__ = ["STRUCTURED_RULE", "structured_lines", "validity_text"]


_CHECK_TEXT = {"json_schema": "JSON answer", "tool_call": "forced tool call"}


def validity_text(rows: list[StructuredValidity]) -> list[str]:
    """The structured-validity table, one row per :class:`StructuredValidity`."""
    lines = [
        "| workload | load | arm | kind | requests | rejected / failed | no tool call | not JSON | off the schema | "
        "**invalid** (share) | wrong values | valid and right | detail not kept | cut at max_tokens (any stage) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in rows:
        tool = str(v.no_tool_call) if v.check == "tool_call" else "n/a"
        lines.append(
            f"| {v.workload} | {load_text(v.load)} | {v.arm} | {_CHECK_TEXT[v.check]} | {v.requests} | "
            f"{v.rejected} / {v.failed} | {tool} | {v.not_json} | {v.schema_invalid} | **{v.invalid}** "
            f"({_pct(v.invalid_fraction)}) | {v.wrong_values} | {v.valid} | {v.unknown} | {v.truncated} |"
        )
    return lines


STRUCTURED_RULE = (
    "Each structured request (a json_schema or tool_call check) is counted once, at the first stage it failed: "
    "rejected by the server (HTTP 4xx) or failed (no finished answer); no tool call to the function expected; not "
    "JSON; off the schema; wrong values. *Invalid* = no tool call + not JSON + off the schema, over all requests: "
    "output a client cannot use, which constrained decoding is meant to rule out; a cut answer (max_tokens) counts "
    "there too (mostly as not JSON: both arms share the cap). Wrong values are the model's accuracy."
)


def structured_lines(a: Analysis) -> list[str]:
    """The Structured validity subsection, or a line saying it was not measured."""
    rows = structured_validity((r for rs in a.measured.values() for r in rs), a.manifest)
    head = ["### Structured validity", ""]
    if not rows:
        return [
            *head,
            "Not measured in this run: no workload has structured cases (json_schema or tool_call "
            "checks; the built-in `structured` workload has them).",
            "",
        ]
    return [
        *head,
        STRUCTURED_RULE + " Right answers are judged by the quality verdict above.",
        "",
        *validity_text(rows),
        "",
    ]
