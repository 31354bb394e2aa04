"""The greedy speed estimate on a token-level simulation: both estimators ("prefix", "whole") against the truth.

Each run streams every request step by step: the baseline writes one token a step, ngram one plus the leading
accepted draft tokens, each accepted with the case's acceptance at that point of the answer; every step is one
chunk, after a TTFT. A divergent pair shares the baseline's first D tokens, then ngram writes its own continuation.
The truth of a run is the whole-output ratio over its own cases: the baseline's expected time for each whole answer
over ngram's expected time for writing that same answer, summed over cases, with expected step counts computed
exactly from the acceptance profile (:func:`expected_steps`, a recursion over positions; no noise, no offset).
The records are judged by the product's :func:`~specharness.analysis.comparison.speed_from_pairs`.
Entry points: :func:`token_run`, :func:`run_token_study`, :func:`format_token_study`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specharness.analysis.comparison import ComparisonRules, speed_from_pairs
from specharness.analysis.simulation.model import (
    HEAVY_DF,
    OUTLIER_FACTOR,
    OUTLIER_PROB,
    mirrored_a_first,
    sim_request,
)
from specharness.records import RequestRecord
from specharness.traffic.client import PREFIX_GROUP_HEX

__all__ = [
    "ESTIMATORS",
    "TokenResult",
    "TokenRun",
    "TokenWorld",
    "expected_steps",
    "format_token_study",
    "run_token_study",
    "token_run",
    "token_worlds",
]

ESTIMATORS = ("prefix", "whole")
MARGIN = 0.10
MAX_ACCEPT = 0.95
_GROUPS = "".join(f"{v:0{PREFIX_GROUP_HEX}x}" for v in range(16**PREFIX_GROUP_HEX)) * 2  # every group, in order


@dataclass(frozen=True, slots=True)
class TokenWorld:
    """One simulated world. A case's acceptance at relative position t (tokens written / its own output length) is
    ``accept[0] + (accept[1] - accept[0]) t + accept_sd z`` (z ~ N(0, 1) per case, clipped to [0, 0.95])."""

    name: str
    cases: int = 16
    blocks: int = 4  # mirrored arm order (mirrored_a_first)
    ttft_s: float = 0.3  # time to the first chunk (one token) in both arms
    step_s: float = 0.03  # the baseline's decode step
    overhead: float = 1.1  # ngram's step costs this times the baseline's (drafting and verifying)
    k: int = 4  # draft tokens per ngram step
    accept: tuple[float, float] = (0.3, 0.3)  # acceptance at the start and at the end of an answer
    accept_sd: float = 0.15  # case-to-case sd of acceptance
    tokens: tuple[int, int] = (40, 200)  # the baseline's output length, log-uniform over this range
    p_div: float = 0.0  # probability that a case's outputs diverge (the same in every block: greedy)
    div_tie: float = 0.0  # higher acceptance diverges less often (p_div e^(-tie z)) and later (at U^(e^(-tie z)) n)
    tail_accept: float = 1.0  # ngram's acceptance on its own continuation, times what it has on the baseline's
    length_sd: float = 0.15  # sd of log(m / n): ngram's own length m after diverging, the baseline's n
    step_sd: float = 0.2  # per-step log noise (mean one), TTFT included
    block_sd: float = 0.03  # per (block, arm) log noise on the whole request
    offset_sd: float = 0.0  # engine-instance offset of B against A (log), once per run; passed as offset_var
    heavy_tails: bool = False  # per-request log noise Student t (HEAVY_DF) with sd block_sd, and 5x outliers (1%)


def token_worlds() -> list[TokenWorld]:
    """The study's worlds: a control, divergence alone, divergence tied to gain, rising acceptance, long TTFT, heavy
    tails with an engine-instance offset, and one that breaks the whole-answer estimate's assumption (ngram's own
    continuation is less predictable than the baseline's answer)."""
    return [
        TokenWorld("no-divergence"),
        TokenWorld("aa-like divergence", p_div=0.5),
        TokenWorld("divergence tied to gain", accept=(0.08, 0.08), accept_sd=0.3, p_div=0.8, div_tie=1.5),
        TokenWorld("acceptance rising 0.1->0.8", accept=(0.1, 0.8), accept_sd=0.1, p_div=0.5),
        TokenWorld("long TTFT", ttft_s=2.0, p_div=0.5),
        TokenWorld("heavy tails + offset", p_div=0.5, offset_sd=0.03, heavy_tails=True),
        TokenWorld("continuation accepts half as often", p_div=0.5, tail_accept=0.5),
    ]


def _alpha(w: TokenWorld, z: np.ndarray, t: np.ndarray) -> np.ndarray:
    a0, a1 = w.accept
    return np.minimum(np.maximum(a0 + (a1 - a0) * np.minimum(t, 1.0) + w.accept_sd * z, 0.0), MAX_ACCEPT)


def expected_steps(w: TokenWorld, z: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Exact expected ngram decode steps to write tokens 2..n of an answer (the first comes with the TTFT), per case:
    S(p) = 1 + sum_j P(step writes j) S(p + j), S(p >= n) = 0, acceptance at p / n."""
    top = int(n.max())
    a = _alpha(w, z[:, None], np.arange(top)[None, :] / n[:, None])[:, :, None]
    prob = a ** np.arange(w.k + 1)  # a^j: the first j drafts accepted; exactly j: times (1 - a), except j = k
    prob[:, :, :-1] *= 1.0 - a
    prob *= (np.arange(top) < n[:, None])[:, :, None]  # positions past the end take no step
    s = np.zeros((n.size, top + w.k + 2))
    for p in range(top - 1, 0, -1):
        s[:, p] = np.where(p < n, 1.0 + np.einsum("ij,ij->i", prob[:, p], s[:, p + 1 : p + w.k + 2]), 0.0)
    return s[:, 1]


@dataclass(frozen=True, slots=True)
class TokenRun:
    """One simulated run: the request pairs (A, B), the arm order, the truth, and per case its baseline length and
    common prefix (the length itself when the outputs are identical)."""

    pairs: list[tuple[RequestRecord, RequestRecord]]
    order_a_first: dict[int, bool]
    truth: float
    lengths: tuple[int, ...]
    common: tuple[int, ...]


def _chain(case: int, start: int, stop: int, own: int) -> str:
    """Fixed-width hex groups for tokens [start, stop) of a case; ``own`` > 0 gives ngram's own tokens (every group
    differs from the baseline's at the same position)."""
    first = (case * 997 + start + own * 30011) % (16**PREFIX_GROUP_HEX)
    return _GROUPS[PREFIX_GROUP_HEX * first : PREFIX_GROUP_HEX * (first + stop - start)]


def _ngram_tokens(
    w: TokenWorld, z: np.ndarray, lens: np.ndarray, cut: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Tokens per decode step (rows: requests; zero after the end), after the first token; from position ``cut`` on
    (its own continuation) acceptance is ``w.tail_accept`` times the profile's."""
    pos = np.ones(lens.size, dtype=int)
    steps: list[np.ndarray] = []
    while (pos < lens).any():
        live = pos < lens
        alpha = _alpha(w, z, pos / lens) * np.where(pos >= cut, w.tail_accept, 1.0)
        alpha = np.minimum(alpha, MAX_ACCEPT)
        with np.errstate(divide="ignore"):  # P(accepted >= j) = a^j: one uniform per step
            accepted = np.minimum(w.k, np.floor(np.log(1.0 - rng.random(lens.size)) / np.log(alpha)))
        t = np.where(live, np.minimum(1 + accepted.astype(int), lens - pos), 0)
        steps.append(t)
        pos += t
    return np.stack(steps, axis=1) if steps else np.zeros((lens.size, 0), dtype=int)


def _request_factor(w: TokenWorld, rows: int, rng: np.random.Generator) -> np.ndarray:
    if not w.heavy_tails:
        return np.ones(rows)
    t = rng.standard_t(HEAVY_DF, rows) * (w.block_sd / math.sqrt(HEAVY_DF / (HEAVY_DF - 2)))
    return np.exp(t + np.where(rng.random(rows) < OUTLIER_PROB, math.log(OUTLIER_FACTOR), 0.0))


def _step_noise(w: TokenWorld, shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    return np.exp(rng.normal(-(w.step_sd**2) / 2, w.step_sd, shape))


def token_run(w: TokenWorld, rng: np.random.Generator) -> TokenRun:
    """One simulated run of ``w`` as request pairs, with its truth."""
    r, nb = w.cases, w.blocks
    lo, hi = w.tokens
    n = np.round(np.exp(rng.uniform(math.log(lo), math.log(hi), r))).astype(int)
    z = rng.normal(0.0, 1.0, r)
    tie = np.exp(-w.div_tie * z)
    diverge = rng.random(r) < np.clip(w.p_div * tie, 0.0, 1.0)
    m = np.where(diverge, np.maximum(2, np.round(n * np.exp(rng.normal(0.0, w.length_sd, r)))), n).astype(int)
    u = rng.random(r) ** tie  # later for higher acceptance when tied
    common = np.where(diverge, np.clip(np.floor(u * n), 1, np.minimum(n, m) - 1), n).astype(int)
    time_a = w.ttft_s + (n - 1) * w.step_s
    time_b = w.ttft_s + expected_steps(w, z, n) * w.step_s * w.overhead
    truth = float(time_a.sum() / time_b.sum())
    chains_a = [_chain(c, 0, int(n[c]), 0) for c in range(r)]
    chains_b = [chains_a[c][: PREFIX_GROUP_HEX * common[c]] + _chain(c, int(common[c]), int(m[c]), 1) for c in range(r)]
    digests_b = [f"c{c}" if not diverge[c] else f"c{c}-ngram" for c in range(r)]
    a_first = mirrored_a_first(nb)
    offset = math.exp(rng.normal(0.0, w.offset_sd)) if w.offset_sd > 0 else 1.0
    case_of = np.tile(np.arange(r), nb)
    lens_b = m[case_of]
    tok_b = _ngram_tokens(w, z[case_of], lens_b, np.where(diverge, common, m)[case_of], rng)
    tok_a_steps = int(n.max()) - 1
    scale_a = np.exp(rng.normal(0.0, w.block_sd, nb)).repeat(r) * _request_factor(w, nb * r, rng)
    scale_b = offset * np.exp(rng.normal(0.0, w.block_sd, nb)).repeat(r) * _request_factor(w, nb * r, rng)
    ttft_a = w.ttft_s * scale_a * _step_noise(w, (nb * r, 1), rng)[:, 0]
    ttft_b = w.ttft_s * scale_b * _step_noise(w, (nb * r, 1), rng)[:, 0]
    arr_a = ttft_a[:, None] + np.cumsum(w.step_s * scale_a[:, None] * _step_noise(w, (nb * r, tok_a_steps), rng), 1)
    dur_b = w.step_s * w.overhead * scale_b[:, None] * _step_noise(w, tok_b.shape, rng)
    arr_b = ttft_b[:, None] + np.cumsum(dur_b, axis=1)
    pairs = []
    for i in range(nb * r):
        blk, c = divmod(i, r)
        na = int(n[c])
        rec_a = sim_request(
            "baseline", blk, c, [float(ttft_a[i]), *arr_a[i, : na - 1].tolist()], [1] * na, f"c{c}", chains_a[c]
        )
        ns = int((tok_b[i] > 0).sum())
        rec_b = sim_request(
            "ngram",
            blk,
            c,
            [float(ttft_b[i]), *arr_b[i, :ns].tolist()],
            [1, *tok_b[i, :ns].tolist()],
            digests_b[c],
            chains_b[c],
        )
        pairs.append((rec_a, rec_b))
    order = {b: bool(a_first[b]) for b in range(nb)}
    return TokenRun(pairs, order, truth, tuple(int(x) for x in n), tuple(int(x) for x in common))


@dataclass(frozen=True, slots=True)
class TokenResult:
    """One estimator over ``runs`` runs of one world. ``false_helps``: of the runs whose truth is at most 1 + margin,
    the share that read *helps* (NaN when there are none); ``decisive``: helps, hurts or equivalent."""

    world: str
    estimator: str
    runs: int
    truth: float  # median over runs
    bias: float  # exp(mean log(estimate / truth)) - 1
    coverage: float
    false_helps: float
    helps: float
    decisive: float
    covered_share: float


def _judge(w: TokenWorld, run: TokenRun, estimate: str) -> tuple[float, float, float, str, float]:
    rules = ComparisonRules(margin=MARGIN, min_correct=0.5, offset_var=w.offset_sd**2, estimate=estimate)
    ci, verdict, work = speed_from_pairs(run.pairs, run.order_a_first, rules)
    if math.isfinite(work.these_prompts.low):  # the truth is about the run's own cases: their interval
        ci = work.these_prompts
    return ci.estimate, ci.low, ci.high, verdict.verdict, work.covered_token_share


def run_token_study(worlds: Sequence[TokenWorld] | None = None, runs: int = 300, seed: int = 0) -> list[TokenResult]:
    """Every world (default :func:`token_worlds`) judged by both estimators on the same simulated runs. Seeded."""
    out = []
    for i, w in enumerate(worlds if worlds is not None else token_worlds()):
        rng = np.random.default_rng([seed, i])
        rows: dict[str, list[tuple[float, float, float, str, float]]] = {e: [] for e in ESTIMATORS}
        truths = []
        for _ in range(runs):
            run = token_run(w, rng)
            truths.append(run.truth)
            for e in ESTIMATORS:
                rows[e].append(_judge(w, run, e))
        out += [_summary(w.name, e, np.asarray(truths), rows[e]) for e in ESTIMATORS]
    return out


def _summary(
    world: str, estimator: str, truth: np.ndarray, rows: list[tuple[float, float, float, str, float]]
) -> TokenResult:
    est, low, high = (np.array([row[j] for row in rows], dtype=float) for j in range(3))
    verdict = np.array([row[3] for row in rows])
    share = np.array([row[4] for row in rows], dtype=float)
    ok = np.isfinite(est) & (est > 0)
    near = truth <= 1.0 + MARGIN
    helps = verdict == "helps"
    return TokenResult(
        world=world,
        estimator=estimator,
        runs=len(rows),
        truth=float(np.median(truth)),
        bias=math.expm1(float(np.mean(np.log(est[ok] / truth[ok])))) if ok.any() else math.nan,
        coverage=float(np.mean((low <= truth) & (truth <= high))),
        false_helps=float(np.mean(helps[near])) if near.any() else math.nan,
        helps=float(np.mean(helps)),
        decisive=float(np.mean(np.isin(verdict, ("helps", "hurts", "equivalent")))),
        covered_share=float(np.nanmean(share)) if np.isfinite(share).any() else math.nan,
    )


def format_token_study(results: Sequence[TokenResult]) -> str:
    """A markdown table: one row per world and estimator."""
    lines = [
        "| world | estimator | truth (median) | bias | coverage | false helps | helps | decisive | covered share | runs |",
        "|" + "---|" * 10,
    ]
    for r in results:
        fh = "—" if math.isnan(r.false_helps) else f"{r.false_helps:.3f}"
        lines.append(
            f"| {r.world} | {r.estimator} | {r.truth:.3f} | {r.bias:+.1%} | {r.coverage:.3f} | {fh} | {r.helps:.3f} | "
            f"{r.decisive:.3f} | {r.covered_share:.2f} | {r.runs} |"
        )
    return "\n".join(lines)
