"""Requests of two arms paired by case and position, and the rules every paired test shares: a request that
finished, outputs that are identical, and a replayed conversation whose history is still the same in both arms."""

from __future__ import annotations

from collections.abc import Sequence

from specharness.records import RequestRecord
from specharness.traffic.workloads import split_turn_id

__all__ = ["Pair", "finished", "history_intact", "is_identical", "pair_requests"]

Pair = tuple[RequestRecord, RequestRecord]


def pair_requests(a: Sequence[RequestRecord], b: Sequence[RequestRecord]) -> list[Pair]:
    """Requests matched by (block, case id, position): the same case at the same place in the same block."""
    index = {(r.block, r.case_id, r.seq): r for r in a}
    return [(index[k], r) for r in b if (k := (r.block, r.case_id, r.seq)) in index]


def finished(r: RequestRecord) -> bool:
    """Ended without an error, complete or cut at the cap, with tokens and a time."""
    return r.error_kind is None and r.verdict in ("complete", "truncated") and r.output_tokens > 0 and r.e2e_s > 0


def is_identical(x: RequestRecord, y: RequestRecord) -> bool:
    """The rule for identical outputs: both finished alike (complete, or both cut at the cap) with the same output
    token ids (their digest)."""
    return finished(x) and finished(y) and x.output_identity == y.output_identity and x.verdict == y.verdict


def history_intact(pairs: Sequence[Pair]) -> list[bool]:
    """Per pair: True unless it is turn k > 1 of a replayed conversation and some earlier turn of that conversation
    (same block and position) did not give identical outputs in both arms, or has no pair."""
    identical: dict[tuple[int, int, str, int], bool] = {}
    turns: list[tuple[str, int] | None] = [split_turn_id(x.case_id) for x, _ in pairs]
    for (x, y), turn in zip(pairs, turns, strict=True):
        if turn is not None:
            identical[(x.block, x.seq, *turn)] = (
                x.error_kind is None and y.error_kind is None and x.output_identity == y.output_identity
            )
    return [
        turn is None or all(identical.get((x.block, x.seq, turn[0], k), False) for k in range(1, turn[1]))
        for (x, _), turn in zip(pairs, turns, strict=True)
    ]
