"""Engines quiet before a cell: the arm measured last and when it ended, shared by every step that sends (the peak
probe, the blocks, the looks). Rule and measurements: docs/method.md#what-a-run-does ("Engines quiet before a cell")."""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["ENGINE_SETTLE_S", "EngineQuiet"]

# vLLM's workers busy-wait for 1 s after their last step (shm_broadcast's reader, busy_loop_s = 1): on the CPU build,
# whose engines' workers share a core, the engine just measured would slow the next one's first second
ENGINE_SETTLE_S = 1.2


@dataclass(slots=True)
class EngineQuiet:
    """Waits before an arm sends until the engine that sent before it (another arm) has been quiet ``settle_s``."""

    settle_s: float = 0.0
    last_arm: str = ""
    last_end: float = 0.0  # time.monotonic() when the last arm's sending ended

    def wait_for(self, arm: str) -> float:
        """Sleep until the previous arm's engine has been quiet long enough (none for the same arm, or the first);
        returns the seconds slept."""
        if not self.settle_s or not self.last_arm or self.last_arm == arm:
            return 0.0
        wait = max(0.0, self.last_end + self.settle_s - time.monotonic())
        if wait:
            time.sleep(wait)
        return wait

    def ended(self, arm: str) -> None:
        """``arm`` has just finished sending."""
        self.last_arm, self.last_end = arm, time.monotonic()
