"""The refusal control: where one arm declined a question it cannot answer and the other answered anyway.

:func:`refusal_controls` lists, per comparison, the pairs of ``abstains`` cases on which the two arms disagree
(:class:`RefusalControl`); :func:`detectable_answer_rate` states the smallest rate of new answers the run could
have detected. Rules: docs/method.md#the-refusal-control.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from scipy import stats as sps

from specharness.analysis.pairing import pair_requests

if TYPE_CHECKING:  # analyse calls into this module, so no import at run time
    from specharness.analysis.analyse import Analysis

__all__ = ["RefusalControl", "detectable_answer_rate", "refusal_controls"]

ALPHA = 0.025
POWER = 0.80


def detectable_answer_rate(pairs: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest share of paired refusals the candidate must turn into answers for the exact one-sided McNemar
    test to flag it with the given power (no gains the other way); NaN when even all pairs could not."""
    needed = math.ceil(math.log(alpha) / math.log(0.5) + 1e-12)  # all-loss discordant pairs: p = 0.5^k
    if pairs < needed:
        return math.nan
    low, high = 0.0, 1.0
    for _ in range(60):  # P(Binomial(pairs, rate) >= needed) rises with rate: bisect for the power
        mid = (low + high) / 2
        low, high = (mid, high) if sps.binom.sf(needed - 1, pairs, mid) < power else (low, mid)
    return high


@dataclass(frozen=True, slots=True)
class RefusalControl:
    workload: str
    load: str
    arm_a: str
    arm_b: str
    pairs: int
    refused_a: int
    refused_b: int
    independent: int  # pairs that count as independent for the power statement
    detectable_rate: float
    disagreements: list[dict[str, Any]] = field(default_factory=list)  # block, case_id, which arm refused
    unfinished_pairs: int = 0  # either arm failed or was cut off: neither a refusal nor an answer

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def refusal_controls(a: Analysis) -> list[RefusalControl]:
    """One entry per comparison over the cases whose check is ``abstains`` (from the manifest's saved cases)."""
    abstain = {
        (name, c["id"])
        for name, saved in (a.manifest.get("workloads") or {}).items()
        for c in saved.get("cases", [])
        if (c.get("check") or {}).get("type") == "abstains"
    }
    out: list[RefusalControl] = []
    for c in a.comparisons:
        xs = [r for r in a.measured.get((c.workload, c.load, c.arm_a), []) if (c.workload, r.case_id) in abstain]
        ys = [r for r in a.measured.get((c.workload, c.load, c.arm_b), []) if (c.workload, r.case_id) in abstain]
        pairs = pair_requests(xs, ys)
        if not pairs:
            continue
        # greedy: a case repeated across blocks answers the same way, so the independent pairs are the distinct cases
        independent = len({x.case_id for x, _ in pairs}) if a.rules.greedy else len(pairs)
        # a refusal is a complete answer that declines; a failed or cut-off answer is neither, and is counted apart
        unfinished = sum(1 for x, y in pairs if x.verdict != "complete" or y.verdict != "complete")
        differ = [
            {"block": x.block, "case_id": x.case_id, "refused": c.arm_a if x.counts_correct else c.arm_b}
            for x, y in pairs
            if x.verdict == y.verdict == "complete" and x.counts_correct != y.counts_correct
        ]
        out.append(
            RefusalControl(
                workload=c.workload,
                load=c.load,
                arm_a=c.arm_a,
                arm_b=c.arm_b,
                pairs=len(pairs),
                refused_a=sum(1 for x, _ in pairs if x.counts_correct),
                refused_b=sum(1 for _, y in pairs if y.counts_correct),
                independent=independent,
                detectable_rate=detectable_answer_rate(independent),
                disagreements=differ,
                unfinished_pairs=unfinished,
            )
        )
    return out
