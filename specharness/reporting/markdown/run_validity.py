"""report.md's checks that the run counted: engine /metrics counters reconciled with the client journal, and the
validity list (requests journaled, errors by kind, invalid, missing and resumed cells)."""

from __future__ import annotations

from specharness.analysis.analyse import Analysis

__all__ = ["run_validity_lines"]


def run_validity_lines(a: Analysis) -> list[str]:
    """Counter reconciliation, then the validity list."""
    lines = ["## Counter reconciliation (engine /metrics vs client journal)", ""]
    bad = [r for r in a.reconciliation if not r["ok"]]
    if bad:
        lines.append(f"**MISMATCH in {len(bad)} of {len(a.reconciliation)} cells:**")
        for r in bad:
            lines.append(
                f"- {r['cell']}: {'; '.join(r['problems'])} (engine generated {r['engine_generation_tokens']}, "
                f"journal {r['journal_completion_tokens']}; engine drafts {r['engine_draft_tokens']}, "
                f"per-request {r['journal_spec_draft_tokens']})"
            )
    else:
        lines.append(
            f"All {len(a.reconciliation)} cells reconcile: the engine's generation-token delta equals the "
            "journal's completion tokens, and per-request spec-decode sums equal the counters where reported."
        )
    lines += ["", "## Validity", ""]
    lines.append(
        f"- Requests journaled: {a.counts['journaled_requests']} (warmups {a.counts['warmup_requests']}, "
        f"measured and counted {a.counts['measured_requests_counted']}, excluded from invalid cells "
        f"{a.counts['measured_requests_excluded']})."
    )
    lines.append(f"- Errors by kind: {a.counts['errors_by_kind'] or 'none'}.")
    for bad_cell in a.invalid_cells:
        lines.append(
            f"- Invalid cell {bad_cell['cell']}: {bad_cell['reason']}"
            f"{' (re-run on resume)' if bad_cell['replaced'] else ''}"
        )
    if a.missing_cells:
        lines.append(
            f"- Missing cells ({len(a.missing_cells)}): {', '.join(a.missing_cells[:12])}"
            f"{' …' if len(a.missing_cells) > 12 else ''}"
        )
    if a.resumed_cells:
        lines.append(f"- Cells measured on resume ({len(a.resumed_cells)}): {', '.join(a.resumed_cells)}")
    return lines
