"""The distribution check's records: one request's :class:`Sample` and the results it is judged into.

:class:`StatisticResult` is one statistic's pooled test; :class:`DistributionComparison` is two streams compared on
all three. Tests and assumptions: docs/method.md#the-distribution-check-under-sampling.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["DistributionComparison", "Pairs", "Sample", "StatisticResult"]


@dataclass(frozen=True, slots=True)
class Sample:
    """One request's outcome in a stream: its case, first generated token id, output length and rubric result.

    ``None`` means not observed (a failed request) or, for ``passed``, that the case has no rubric.
    """

    case_id: str
    first_token: int | None
    length: int | None
    passed: bool | None
    repetition: int = 0  # the repetition (block) it was sent in: with the case and stream, its cell


Pairs = dict[str, tuple[list[Sample], list[Sample]]]  # case id -> (stream A's samples, stream B's samples)


@dataclass(frozen=True, slots=True)
class StatisticResult:
    """One statistic's pooled test, its effect and minimum detectable effect, and the per-case p-values.

    ``effect`` and ``mde`` are in ``unit`` (stream A minus stream B where signed). ``mde`` is the smallest effect the
    pooled test would flag with the comparison's power at ``alpha`` (the per-statistic Bonferroni level);
    ``mde_total_variation`` restates it as a total-variation distance (first token only, NaN otherwise).
    """

    name: str
    method: str
    statistic: float
    df: int | None
    p_value: float
    alpha: float
    differs: bool
    effect: float
    mde: float
    unit: str
    cases_used: int
    cases_skipped: int
    samples_a: int
    samples_b: int
    per_case_p: dict[str, float] = field(default_factory=dict)
    mde_total_variation: float = math.nan
    test_unit: str = "sample"  # "sample": asymptotic p over independent samples; "cell": cell permutation
    cells: int = 0  # (case, repetition) cells swapped by the permutation ("cell" only)
    p_value_samples: float = math.nan  # the asymptotic p-value that assumes independent samples, for comparison

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "per_case_p": dict(self.per_case_p)}


@dataclass(frozen=True, slots=True)
class DistributionComparison:
    """Two streams compared on three statistics; ``verdict`` is "differs" or "no difference detected".

    ``differs_on`` names the statistics whose pooled test is significant at ``alpha_per_statistic`` (α/3).
    """

    first_token: StatisticResult
    length: StatisticResult
    pass_rate: StatisticResult
    alpha: float
    alpha_per_statistic: float
    power: float
    cases_compared: int  # cases present in both streams
    cases_only_a: int
    cases_only_b: int
    verdict: str
    differs_on: tuple[str, ...]

    @property
    def statistics(self) -> tuple[StatisticResult, StatisticResult, StatisticResult]:
        return (self.first_token, self.length, self.pass_rate)

    def to_dict(self) -> dict[str, Any]:
        return {
            "first_token": self.first_token.to_dict(),
            "length": self.length.to_dict(),
            "pass_rate": self.pass_rate.to_dict(),
            "alpha": self.alpha,
            "alpha_per_statistic": self.alpha_per_statistic,
            "power": self.power,
            "cases_compared": self.cases_compared,
            "cases_only_a": self.cases_only_a,
            "cases_only_b": self.cases_only_b,
            "verdict": self.verdict,
            "differs_on": list(self.differs_on),
        }
