"""Grids and the metric lookup the benchmark classes share (the logic lives in specharness.history.asvsuite)."""

from specharness.history.asvsuite import ASV_GRID, SWEEP_GRID
from specharness.history.metrics import lookup

WORKLOADS, CLIENTS = ASV_GRID
SPEC_TOKENS, LOOKUP_MAX = SWEEP_GRID
SETUP_TIMEOUT_S = 5400

__all__ = ["CLIENTS", "LOOKUP_MAX", "SETUP_TIMEOUT_S", "SPEC_TOKENS", "WORKLOADS", "lookup"]
