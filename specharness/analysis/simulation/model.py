"""What both simulated studies share: the heavy-tail and drift constants of the data-generating model, the nominal
confidence, and the mirrored arm order of the current design. Model: docs/method.md#the-error-rate-simulation.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "CONFIDENCE",
    "DRIFT_CURVATURE",
    "HEAVY_DF",
    "OUTLIER_FACTOR",
    "OUTLIER_PROB",
    "mirrored_a_first",
]

CONFIDENCE = 0.95
OUTLIER_PROB = 0.01
OUTLIER_FACTOR = 5.0
HEAVY_DF = 3
DRIFT_CURVATURE = 2.0  # shape(t) = (1 - exp(-k t)) / (1 - exp(-k)); k = 2 gives +13% then +7% over thirds


def mirrored_a_first(blocks: int) -> np.ndarray:
    """A runs first in block b of the mirrored plan AB BA BA AB AB BA ... (as experiment.design.block_orders)."""
    b = np.arange(blocks)
    return (b % 2 == 0) == ((b // 2) % 2 == 0)
