"""Quality tests with the case as the unit: right answers, completed requests and identical outputs, paired by case.

Each case's blocks are summarised first, then the cases are compared by a one-sided paired permutation test
(:func:`case_paired_test`, :func:`case_quality`). Greedy identity is judged against an A/A twin in the run
(:func:`identity_control`) or the machine's A/A record (:func:`identity_against_record`).
Rules: docs/method.md#quality-tests-case-by-case.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats as sps

from specharness.analysis.pairing import history_intact, is_identical
from specharness.experiment.aa_identity import AAIdentity
from specharness.records import RequestRecord
from specharness.traffic.workloads import split_turn_id

if TYPE_CHECKING:  # comparison imports this module
    from specharness.analysis.comparison import PairedComparison

__all__ = [
    "BOUND_CONFIDENCE",
    "CaseIdentity",
    "CasePairedTest",
    "CaseQuality",
    "IdentityControl",
    "case_key",
    "case_paired_test",
    "case_quality",
    "identity_against_record",
    "identity_control",
    "with_identity_controls",
]

BOUND_CONFIDENCE = 0.95  # the loss bound's one-sided confidence
PERMUTATIONS = 9999  # resamples of the permutation test (exact when 2^k is smaller, k = differing cases)
SEED = 20  # the permutation test's fixed seed: the same journal gives the same report

Pair = tuple[RequestRecord, RequestRecord]


@dataclass(frozen=True, slots=True)
class CasePairedTest:
    """One paired outcome (right answer, completed request) of arm B against arm A, over cases.

    ``statistic`` is the loss (mean per-case share A minus share B), ``pvalue`` the one-sided p that B loses more
    than ``margin``, ``loss_upper`` the one-sided upper bound on the loss at ``confidence``. ``cases_lost`` /
    ``cases_gained``: cases where B's share is below / above A's. ``a_only`` / ``b_only`` count the discordant
    pairs (block, case), shown for reference only: they are not independent."""

    statistic: float
    pvalue: float
    loss_upper: float
    n_cases: int
    cases_lost: int
    cases_gained: int
    pairs: int
    a_only: int
    b_only: int
    margin: float = 0.0
    confidence: float = BOUND_CONFIDENCE
    method: str = "paired permutation over cases"

    @property
    def interval(self) -> tuple[float, float]:
        """(-1, upper bound): the one-sided interval of the loss."""
        return -1.0, self.loss_upper

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


NO_TEST = CasePairedTest(math.nan, 1.0, math.nan, 0, 0, 0, 0, 0, 0)


def case_key(case_id: str) -> str:
    """The unit a test counts: the case id, or for a replayed turn (``<id>#t<k>``) its conversation's id."""
    turn = split_turn_id(case_id)
    return turn[0] if turn is not None else case_id


def _shares(cases: Sequence[str], a: Sequence[bool], b: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    total: dict[str, list[int]] = {}
    for case, x, y in zip(cases, a, b, strict=True):
        row = total.setdefault(case, [0, 0, 0])
        row[0] += bool(x)
        row[1] += bool(y)
        row[2] += 1
    counts = np.asarray(list(total.values()), dtype=float).reshape(-1, 3)
    return counts[:, 0] / counts[:, 2], counts[:, 1] / counts[:, 2]


def _permutation_pvalue(x: np.ndarray, y: np.ndarray, shift: float) -> float:
    """One-sided p that sum(x - y - shift) is this large when each case's ``x - y - shift`` may change sign (scipy's
    paired permutation test on (x - y - shift, 0): swapping within a pair flips the sign). With no shift that is
    swapping the arms within a case, and cases where x == y are left out: they do not move the statistic."""
    d = x - y - shift
    keep = np.abs(d) > 1e-12
    if not keep.any():
        return 1.0
    if keep.sum() == 1:  # scipy needs two observations: the two sign patterns of one case, by hand
        return 0.5 if d[keep][0] > 0 else 1.0

    def statistic(u: np.ndarray, v: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.asarray(np.sum(u - v, axis=axis))

    res = sps.permutation_test(
        (d[keep], np.zeros(int(keep.sum()))),
        statistic,
        permutation_type="samples",
        vectorized=True,
        n_resamples=PERMUTATIONS,
        alternative="greater",
        rng=np.random.default_rng(SEED),
    )
    return float(min(res.pvalue, 1.0))


def case_paired_test(
    cases: Sequence[str],
    a: Sequence[bool],
    b: Sequence[bool],
    *,
    margin: float = 0.0,
    confidence: float = BOUND_CONFIDENCE,
) -> CasePairedTest:
    """Paired test over cases that B loses more of an outcome than ``margin``
    (docs/method.md#quality-tests-case-by-case).

    ``cases[k]`` names the case of pair k (:func:`case_key`), ``a[k]`` / ``b[k]`` whether each arm had the outcome.
    """
    if len(cases) == 0:
        return NO_TEST
    x, y = _shares(cases, a, b)
    d = x - y
    lost, gained = int(np.sum(d > 1e-12)), int(np.sum(d < -1e-12))
    n = int(d.size)
    bound = float(sps.binomtest(lost, n).proportion_ci(confidence_level=2 * confidence - 1, method="exact").high)
    return CasePairedTest(
        statistic=float(d.mean()),
        pvalue=_permutation_pvalue(x, y, margin),
        loss_upper=bound,
        n_cases=n,
        cases_lost=lost,
        cases_gained=gained,
        pairs=len(cases),
        a_only=sum(1 for p, q in zip(a, b, strict=True) if p and not q),
        b_only=sum(1 for p, q in zip(a, b, strict=True) if q and not p),
        margin=margin,
        confidence=confidence,
    )


@dataclass(frozen=True, slots=True)
class IdentityControl:
    """Greedy identity of arm B vs A judged against an A/A twin (two identical engines) at the same load."""

    twin: str  # the A/A arm, or "" when the run has none
    n_cases: int = 0
    identical_share: float = math.nan  # mean per-case share of identical pairs, B vs A (cases both comparisons have)
    twin_identical_share: float = math.nan  # the same for the twin vs A (or over the record's prompts)
    pvalue: float = math.nan  # one-sided: B is identical less often than the twin
    text: str = "no A/A arm in this run"
    source: str = ""  # judged against the machine's recorded A/A (no A/A arm in the run): the record's source
    record_cases: int = 0  # the record's prompts
    over_tokens: int = 0  # both sides compared over their first this many tokens (the record's length); 0: whole

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class CaseIdentity:
    """Per case, identical pairs and pairs (both finished alike with the same output token ids), and the A/A
    control once :func:`identity_control` has judged it."""

    by_case: dict[str, tuple[int, int]] = field(default_factory=dict)
    control: IdentityControl | None = None
    max_output_tokens: int = 0  # the longest output arm A wrote (identity is rarer the longer the outputs)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class CaseQuality:
    """The three per-case questions of one comparison."""

    answers: CasePairedTest
    completion: CasePairedTest
    identity: CaseIdentity


def _identical(pairs: Sequence[Pair]) -> list[bool]:
    """Per pair: both finished alike (complete, or both cut at the cap) with the same output token ids, after an
    intact history (the comparison's own rule for identical outputs)."""
    intact = history_intact(pairs)
    return [ok and is_identical(x, y) for (x, y), ok in zip(pairs, intact, strict=True)]


def case_quality(pairs: Sequence[Pair], *, tolerance: float = 0.0) -> CaseQuality:
    """Right answers (pairs both arms checked; ``tolerance`` is the non-inferiority margin), completed requests
    (all pairs: finishing by itself is the outcome, so a candidate that fails, is cut off or loops where the
    baseline stopped loses; margin 0) and per-case identical outputs, from one comparison's pairs."""
    checked = [(x, y) for x, y in pairs if x.checked and y.checked]
    answers = case_paired_test(
        [case_key(x.case_id) for x, _ in checked],
        [x.counts_correct for x, _ in checked],
        [y.counts_correct for _, y in checked],
        margin=tolerance,
    )
    completion = case_paired_test(
        [case_key(x.case_id) for x, _ in pairs],
        [x.verdict == "complete" for x, _ in pairs],
        [y.verdict == "complete" for _, y in pairs],
    )
    by_case: dict[str, list[int]] = {}
    for (x, _), same in zip(pairs, _identical(pairs), strict=True):
        row = by_case.setdefault(case_key(x.case_id), [0, 0])
        row[0] += same
        row[1] += 1
    longest = max((x.output_tokens for x, _ in pairs), default=0)
    return CaseQuality(
        answers, completion, CaseIdentity({k: (v[0], v[1]) for k, v in by_case.items()}, max_output_tokens=longest)
    )


def identity_control(arm: CaseIdentity, twin: CaseIdentity | None, twin_name: str = "baseline-b") -> IdentityControl:
    """Arm B's identical share against the A/A twin's, paired over the cases both have: a one-sided paired
    permutation test that B is identical less often (docs/method.md#quality-tests-case-by-case). ``twin`` None: no
    A/A arm."""
    if twin is None:
        return IdentityControl("")
    common = [k for k in arm.by_case if k in twin.by_case and arm.by_case[k][1] and twin.by_case[k][1]]
    if not common:
        return IdentityControl(twin_name, text=f"no case in common with the A/A arm {twin_name}")
    x = np.asarray([arm.by_case[k][0] / arm.by_case[k][1] for k in common])
    y = np.asarray([twin.by_case[k][0] / twin.by_case[k][1] for k in common])
    p = _permutation_pvalue(y, x, 0.0)  # large when the twin is identical more often than B
    shares = f"identical {x.mean():.0%} vs {y.mean():.0%} for two identical engines over {len(common)} cases"
    text = (
        f"diverges more than two identical engines (p = {p:.3g}; {shares})"
        if p < 0.05
        else f"diverges no more than two identical engines ({shares}; p = {p:.2g})"
    )
    return IdentityControl(twin_name, len(common), float(x.mean()), float(y.mean()), p, text)


def _independent_pvalue(run: np.ndarray, record: np.ndarray) -> float:
    """One-sided p that the run's per-case shares are this much lower than the record's when the two sets of cases
    are exchangeable (``scipy.stats.permutation_test``, ``permutation_type="independent"``, difference of means)."""
    pooled = np.concatenate([run, record])
    if np.ptp(pooled) == 0:
        return 1.0
    if min(run.size, record.size) < 2:  # scipy wants two a sample: put each case in the lone one's place in turn
        total, n = pooled.sum(), pooled.size
        others = (total - pooled) / (n - 1)  # the mean of the other side when case i is the lone one
        stats_ = others - pooled if run.size == 1 else pooled - others
        observed = float(record.mean() - run.mean())
        return float(np.mean(stats_ >= observed - 1e-12))

    def statistic(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.asarray(np.mean(y, axis=axis) - np.mean(x, axis=axis))

    res = sps.permutation_test(
        (run, record),
        statistic,
        permutation_type="independent",
        vectorized=True,
        n_resamples=PERMUTATIONS,
        alternative="greater",
        rng=np.random.default_rng(SEED),
    )
    return float(min(res.pvalue, 1.0))


def _agree_within(
    arm: CaseIdentity, prefixes: Sequence[tuple[str, int, bool]], tokens: int
) -> dict[str, tuple[int, int]]:
    """Per case: pairs whose outputs would be identical cut at ``tokens`` (identical, or the same first ``tokens``
    tokens by the prefix chains), over the case's pairs. ``prefixes``: (case id, common-prefix tokens, identical)
    of each pair with a common prefix (the comparison's pair work; a pair not in it agrees on nothing)."""
    agree: dict[str, int] = {}
    for case, common, identical in prefixes:
        if identical or common >= tokens:
            agree[case_key(case)] = agree.get(case_key(case), 0) + 1
    return {k: (agree.get(k, 0), total) for k, (_, total) in arm.by_case.items()}


def identity_against_record(
    arm: CaseIdentity,
    record: AAIdentity | None,
    clients: int,
    prefixes: Sequence[tuple[str, int, bool]] | None = None,
) -> IdentityControl:
    """Arm B's identical share against the machine's recorded A/A at the same client count, for a run without an
    A/A arm. The record's prompts are not the run's, so the cases are not paired: each side's per-case shares (a
    case's blocks summarised first, the unit both times) go into a one-sided two-sample permutation test that B's
    cases are identical less often than the record's (both are samples of cases; the record's uncertainty is its
    number of prompts). The record's outputs are short (at most ``record.max_output_tokens``), and longer outputs
    diverge more even between two identical engines: when this comparison's are longer and ``prefixes`` (case id,
    common-prefix tokens from the prefix chains, identical) are given, identity is taken over the first
    ``record.max_output_tokens`` tokens, as if both arms had been cut there like the record's; without them the
    whole outputs are compared and the text says the test leans toward *diverges more*."""
    if record is None:
        plural = "s" if clients != 1 else ""
        return IdentityControl("", text=f"no A/A record at this load ({clients} client{plural}) for this machine kind")
    longer = arm.max_output_tokens > record.max_output_tokens
    by_case = _agree_within(arm, prefixes, record.max_output_tokens) if longer and prefixes is not None else arm.by_case
    shares = [same / total for same, total in by_case.values() if total]
    recorded = record.case_shares()
    if not shares or not recorded:
        return IdentityControl("", text="no case to compare with the recorded A/A", source=record.source)
    x, y = np.asarray(shares), np.asarray(recorded)
    p = _independent_pvalue(x, y)
    cut = f" over the first {record.max_output_tokens} tokens" if by_case is not arm.by_case else ""
    said = (
        f"identical{cut} {x.mean():.0%} per case over {len(x)} cases vs {y.mean():.0%} over the record's "
        f"{len(y)} prompts"
    )
    where = (
        f"recorded A/A at {clients} client{'s' if clients != 1 else ''}, {record.identical_pairs}/{record.pairs} "
        f"pairs identical, source: {record.source}"
    )
    note = ""
    if cut:
        note = (
            f"; outputs here reach {arm.max_output_tokens} tokens, the record's {record.max_output_tokens}: both "
            f"compared as if cut at {record.max_output_tokens} (prefix chains); an A/A arm in the run (baseline-b) "
            "would judge the whole outputs"
        )
    elif longer:
        note = (
            f"; outputs here reach {arm.max_output_tokens} tokens, the record's {record.max_output_tokens}, and this "
            "journal has no prefix chains to cut them there: longer outputs diverge more between identical engines "
            "too, so this leans toward diverges more"
        )
    text = (
        f"diverges more than two identical engines (p = {p:.3g}; {where}; {said}{note})"
        if p < 0.05
        else f"diverges no more than two identical engines ({where}; {said}, p = {p:.2g}{note})"
    )
    over = record.max_output_tokens if cut else 0
    return IdentityControl("", len(x), float(x.mean()), float(y.mean()), p, text, record.source, len(y), over)


def _prefixes(c: PairedComparison, tokens: int) -> list[tuple[str, int, bool]] | None:
    """(case id, common-prefix tokens, identical) of the comparison's pairs with a common prefix, when the prefix
    chains gave them and every pair sharing ``tokens`` is among them (greedy pair work; None for older journals,
    sampled runs, or a declared minimum prefix above ``tokens``)."""
    w = c.work
    if w is None or not w.basis.startswith("prefix chains") or w.min_prefix_tokens > tokens:
        return None
    return [(p.case_id, p.tokens, p.identical) for p in w.pairs if not p.censored]


TWIN = "baseline-b"  # the A/A arm: a second engine identical to the baseline


def with_identity_controls(
    comparisons: Sequence[PairedComparison],
    arms: Sequence[str],
    records: Mapping[int, AAIdentity] | None = None,
    aa_pairs: Collection[tuple[str, str]] = (("baseline", TWIN),),
    no_record: str = "",
) -> list[PairedComparison]:
    """Every comparison (the A/A pairs' own excepted) with its identity judged against an A/A pair's at the same
    (workload, load): the twin of its own reference arm where the run has one, else any A/A pair of the run; where the
    run has none, against ``records`` (client count -> the machine's recorded A/A,
    :func:`specharness.experiment.aa_identity.aa_identity_for`) at the same client count; an open-loop load or a
    client count with no record says "no A/A record at this load". ``aa_pairs``: (arm, its identical twin);
    ``no_record``: why the machine's record cannot judge this run's traffic (another model or workloads): then no
    claim is made, and the text says how to add an A/A arm."""
    pairs = set(aa_pairs)
    twins: dict[tuple[str, str], dict[str, PairedComparison]] = {}
    for c in comparisons:
        if (c.arm_a, c.arm_b) in pairs:
            twins.setdefault((c.workload, c.load), {})[c.arm_a] = c
    in_run = any(b in arms for _a, b in pairs)
    out = []
    for c in comparisons:
        if (c.arm_a, c.arm_b) not in pairs:
            here = twins.get((c.workload, c.load), {})
            twin = here.get(c.arm_a) or next(iter(here.values()), None)
            control: IdentityControl | None = None
            if twin is not None:
                control = identity_control(c.identity, twin.identity, twin.arm_b)
            elif not in_run and no_record:
                control = IdentityControl(
                    "",
                    text=f"no A/A pair of this traffic was run ({no_record}), so no claim on identical answers; add "
                    "one: --arms " + ",".join((*arms, TWIN)),
                )
            elif not in_run and c.rate:
                control = IdentityControl(
                    "", text="no A/A record at this load (open loop: records are per client count)"
                )
            elif not in_run:
                record = (records or {}).get(c.clients)
                prefixes = _prefixes(c, record.max_output_tokens) if record is not None else None
                control = identity_against_record(c.identity, record, c.clients, prefixes)
            if control is not None:
                c = replace(c, identity=replace(c.identity, control=control))
        out.append(c)
    return out
