"""Per-block log speedups from the pairs' work: the numbers the speed interval is computed over.

:func:`work_logs` (greedy: time for the common work), :func:`per_token_logs` (sampled: time per output token),
:func:`case_times` (by block and case, for the interval over cases) and :func:`speed_block_logs` (a comparison's).
Rules: docs/method.md#the-speed-estimate-pair-by-pair.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from specharness.analysis.comparison.records import PairedComparison, PairWork
from specharness.analysis.comparison.work import SAMPLED_BASIS

__all__ = ["case_times", "per_token_logs", "speed_block_logs", "work_logs"]


def per_token_logs(work: Sequence[PairWork]) -> dict[int, float]:
    """Sampled: one log speedup per block, A's time per output token over B's (summed times over summed tokens)."""
    sums: dict[int, list[float]] = {}
    for w in work:
        if math.isfinite(w.time_a_s) and math.isfinite(w.time_b_s):
            row = sums.setdefault(w.block, [0.0, 0.0, 0.0, 0.0])
            row[0] += w.time_a_s
            row[1] += w.tokens
            row[2] += w.time_b_s
            row[3] += w.tokens_b or 0
    return {k: math.log((ta / na) / (tb / nb)) for k, (ta, na, tb, nb) in sums.items() if min(ta, na, tb, nb) > 0}


def pair_times(w: PairWork, whole: bool) -> tuple[float, float]:
    """A pair's two times: for the baseline's whole answer (``whole``) or for the common prefix."""
    return (w.whole_a_s, w.whole_b_s) if whole else (w.time_a_s, w.time_b_s)


def timed(w: PairWork, whole: bool) -> bool:
    """The pair enters the estimate: both its times (:func:`pair_times`) finite and positive, and, for the
    common-prefix times, a prefix of the declared minimum."""
    a, b = pair_times(w, whole)
    return math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0 and (whole or not w.short_prefix)


def work_logs(work: Sequence[PairWork], whole: bool = False) -> dict[int, float]:
    """One log speedup per block: A's summed time over B's, over the block's pairs (their whole-answer times with
    ``whole``, else their common-prefix times)."""
    ta: dict[int, float] = {}
    tb: dict[int, float] = {}
    for w in work:
        if timed(w, whole):
            a, b = pair_times(w, whole)
            ta[w.block] = ta.get(w.block, 0.0) + a
            tb[w.block] = tb.get(w.block, 0.0) + b
    return {k: math.log(ta[k] / tb[k]) for k in ta}


def case_times(work: Sequence[PairWork], whole: bool = False) -> list[dict[str, tuple[float, float]]]:
    """By block (in block order): case id -> (A's summed time, B's summed time) over the case's pairs."""
    blocks: dict[int, dict[str, tuple[float, float]]] = {}
    for w in work:
        if timed(w, whole):
            a_s, b_s = pair_times(w, whole)
            a, b = blocks.setdefault(w.block, {}).get(w.case_id, (0.0, 0.0))
            blocks[w.block][w.case_id] = (a + a_s, b + b_s)
    return [blocks[k] for k in sorted(blocks)]


def speed_block_logs(c: PairedComparison) -> dict[int, float]:
    """Block -> log same-work speedup (A's time over B's), as the comparison's speed interval used them."""
    if c.work is None:
        return {}
    if c.work.basis == SAMPLED_BASIS:
        return per_token_logs(c.work.pairs)
    return work_logs(c.work.pairs, whole=c.work.whole)
