"""The ASV parameter grid, one for every profile and machine: ASV keys results by these values, so a grid that
changed with the profile would orphan committed results; cells a profile does not run read as NaN ("n/a")."""

from __future__ import annotations

__all__ = ["ASV_GRID"]

ASV_GRID: tuple[list[str], list[int]] = (["copy", "transform"], [1, 4, 8])  # workloads, clients
