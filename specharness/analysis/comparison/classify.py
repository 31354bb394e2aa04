"""How the pairs of one comparison split (:func:`classify`), and the old rules' per-block speedups over them.

Same work, divergent, unstable, failed or after a diverged history; :func:`block_log_speedups` times the same-work
pairs block by block (only the simulation's reference rule reads them; no verdict does).
Rules: docs/method.md#the-speed-estimate-pair-by-pair.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from specharness.analysis.comparison.records import PairCounts
from specharness.analysis.pairing import Pair, finished, history_intact, is_identical

__all__ = ["block_log_speedups", "classify"]


def classify(pairs: Sequence[Pair], greedy: bool) -> tuple[dict[int, list[Pair]], PairCounts]:
    """The counts of every kind of pair, and by block the same-work pairs of the cases that are the same work in
    every block where they ran (only the simulation's reference rule reads them; no verdict does): a case that
    diverged, failed or followed a diverged history somewhere leaves every block. Sampled runs: "same work" is both
    arms finishing by themselves (complete); a truncated answer is a loop or a longer answer, and its time per token
    is not compared. Replayed turns after the two arms' histories differed are counted apart
    (docs/method.md#the-speed-estimate-pair-by-pair)."""
    intact = history_intact(pairs)
    done = [finished(x) and finished(y) for x, y in pairs]
    ended = [p for p, ok, same_history in zip(pairs, done, intact, strict=True) if ok and same_history]
    failed = done.count(False)
    history_diverged = len(pairs) - failed - len(ended)
    if greedy:
        is_same = [is_identical(x, y) for x, y in ended]
    else:
        is_same = [x.verdict == y.verdict == "complete" for x, y in ended]
    same = [p for p, ok in zip(ended, is_same, strict=True) if ok]
    divergent = len(ended) - len(same)
    differs_somewhere = {x.case_id for (x, _), ok in zip(ended, is_same, strict=True) if not ok}
    differs_somewhere |= {x.case_id for (x, _), ok, h in zip(pairs, done, intact, strict=True) if not (ok and h)}
    stable = [(x, y) for x, y in same if x.case_id not in differs_somewhere]
    by_block: dict[int, list[Pair]] = {}
    for x, y in stable:
        by_block.setdefault(x.block, []).append((x, y))
    return by_block, PairCounts(
        pairs=len(pairs),
        same_work=len(stable),
        divergent=divergent,
        unstable=len(same) - len(stable),
        failed=failed,
        same_work_truncated=sum(1 for x, _ in stable if x.verdict == "truncated"),
        history_diverged=history_diverged,
    )


def block_log_speedups(by_block: dict[int, list[Pair]], greedy: bool) -> dict[int, float]:
    """Block -> log speedup (A's time over B's) over the same-work pairs :func:`classify` kept: the summed times
    (greedy), or the summed times per summed output token (sampled)."""
    out = {}
    for block, ps in by_block.items():
        time_a = float(np.sum([x.e2e_s for x, _ in ps]))
        time_b = float(np.sum([y.e2e_s for _, y in ps]))
        if greedy:  # the same tokens in both: time for the same work
            out[block] = math.log(time_a / time_b)
        else:  # time per output token
            tok_a = float(np.sum([x.output_tokens for x, _ in ps]))
            tok_b = float(np.sum([y.output_tokens for _, y in ps]))
            out[block] = math.log((time_a / tok_a) / (time_b / tok_b))
    return out
