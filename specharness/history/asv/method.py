"""The measuring method's version: ASV's benchmark ``version`` attribute for every class in ``benchmarks/``.

ASV keeps one series per benchmark version: bump this when what a tracked value means changes (the analysis, the
profile behind it, the metric's orientation), so the new method starts a new series instead of showing up as a vLLM
regression. Editing a benchmark's code without bumping it keeps the series (ASV would otherwise restart it on any
source change). History:

- ``paired-3``: same-work speedup on complete, correct pairs; CIs carried in ASV's stats columns; failures as results.
"""

from __future__ import annotations

__all__ = ["METHOD_VERSION"]

METHOD_VERSION = "paired-3"
