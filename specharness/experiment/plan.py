"""The units of a run's plan: a cell's load level (:class:`Load`), a planned cell (:class:`CellPlan`), the arm
order of every block (:func:`block_orders`: mirrored pairs, AB BA BA AB ...; more arms: a seeded random order,
then its reverse, so every arm runs first as often as second and block counts are even), and the looks a
sequential design may take. A profile's plan is :func:`specharness.experiment.design.plan_cells`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from specharness.records import cell_key, load_label

__all__ = [
    "BLOCKS_PER_LOOK",
    "OPEN_LOOP_WARM_ROUND",
    "CellPlan",
    "Load",
    "block_orders",
    "order_plan_text",
    "possible_looks",
    "warm_round",
]

OPEN_LOOP_WARM_ROUND = 4
BLOCKS_PER_LOOK = 2  # --until-decided adds one mirrored pair of blocks between looks


@dataclass(frozen=True, slots=True)
class Load:
    """One load level of a cell: a closed loop of ``clients`` clients (``rate`` empty), or an open loop at ``rate``
    requests per second (text, ``"inf"``: all at once) with at most ``clients`` in flight (0: no cap)."""

    clients: int
    rate: str = ""

    @property
    def label(self) -> str:
        return load_label(self.clients, self.rate)

    @property
    def open_loop(self) -> bool:
        return bool(self.rate)

    @property
    def offered(self) -> float:
        """The load as a number on its own axis: requests per second (open loop) or clients (closed loop)."""
        return float(self.rate) if self.rate else float(self.clients)


def warm_round(load: Load) -> int:
    """Requests in one warmup round of a load: one per client (closed loop), four (open loop), at the cell's load."""
    return load.clients if not load.open_loop else OPEN_LOOP_WARM_ROUND


@dataclass(frozen=True, slots=True)
class CellPlan:
    block: int
    workload: str
    load: Load
    arm_order: tuple[str, ...]

    @property
    def clients(self) -> int:
        return self.load.clients

    def key(self, arm: str) -> str:
        return cell_key(self.block, self.workload, self.load.label, arm)


def possible_looks(blocks: int, max_blocks: int | None, until_decided: bool = True) -> int:
    """Looks a sequential design may take at a cell: one after the first ``blocks``, then one after each further
    pair of blocks up to ``max_blocks``; a fixed design (or no ``max_blocks``) looks once."""
    if not until_decided or max_blocks is None:
        return 1
    return 1 + max(0, (max_blocks - blocks) // BLOCKS_PER_LOOK)


def order_plan_text(arms: tuple[str, ...], interleave: bool = False) -> str:
    if len(arms) == 2:
        text = "mirrored block pairs (AB BA BA AB …)"
    else:
        text = "mirrored block pairs (a seeded random arm order, then its reverse)"
    if interleave:
        text += (
            "; within a closed-loop cell the arms take turns round by round (one request per client each), "
            "in the block's order then its reverse"
        )
    return text


def block_orders(arms: tuple[str, ...], blocks: int, seed: int = 0) -> list[tuple[str, ...]]:
    """Arm order of every block: mirrored pairs. Two arms: AB BA BA AB AB BA ...; more: a random order from
    ``seed`` and its reverse. Every arm precedes every other equally often over each pair of blocks."""
    rng = random.Random(seed)
    orders: list[tuple[str, ...]] = []
    for pair in range((blocks + 1) // 2):
        if len(arms) == 2:
            first = arms if pair % 2 == 0 else tuple(reversed(arms))
        else:
            first = tuple(rng.sample(list(arms), len(arms)))
        orders += [first, tuple(reversed(first))]
    return orders[:blocks]
