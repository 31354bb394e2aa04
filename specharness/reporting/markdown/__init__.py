"""``report.md``, the run's decision report: the decision first, then the evidence, one module per section.

- ``document``: :func:`render_markdown` assembles the sections in order
- ``cells``: how a number, share, time, interval or percentile reads in a table cell
- ``decision``: the decision table and the rules declared before the run
- ``speed``: the same-work speedup table
- ``changes``: every value of B over A between declared arms, paired by block
- ``quality``: quality verdicts, greedy identity and the sampled-distribution pointer
- ``structured``: the structured-validity table and its rule
- ``refusals``: refusal agreement
- ``delivery``: load delivered (open loop)
- ``per_arm``: per-arm latency and throughput, acceptance by draft position, correctness by group
- ``sweeps``: load sweeps (crossover, sustainable load, speedup against load)
- ``run_validity``: counter reconciliation and the validity list
- ``manifest``: the manifest, engine lines and engine-pool lines
"""

from __future__ import annotations

from specharness.reporting.markdown.document import render_markdown
from specharness.reporting.markdown.manifest import engine_lines, pool_lines
from specharness.reporting.markdown.structured import STRUCTURED_RULE, validity_text

__all__ = ["STRUCTURED_RULE", "engine_lines", "pool_lines", "render_markdown", "validity_text"]
