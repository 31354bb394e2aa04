"""The work each pair does: its common work (greedy) or its time per output token (sampled), and each arm's time.

:func:`prefix_work` (greedy runs: each pair's common prefix, :func:`time_to_token_s`) and :func:`sampled_work`
(sampled runs: time per output token) give each pair's part in the speed estimate, with the tallies beside it
(:class:`WorkTally`). Rules: docs/method.md#the-speed-estimate-pair-by-pair.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from specharness.analysis.comparison.records import ComparisonRules, PairWork
from specharness.analysis.pairing import Pair, finished, history_intact, is_identical
from specharness.analysis.summary import ratio
from specharness.records import RequestRecord
from specharness.traffic.client import common_prefix_tokens

__all__ = ["SAMPLED_BASIS", "WorkTally", "prefix_work", "sampled_work", "time_to_token_s"]

SAMPLED_BASIS = (
    "time per output token, pairs both complete, timeouts at the timeout (sampled: outputs differ by design)"
)


def _chunk_holding(r: RequestRecord, k: int) -> tuple[int, float]:
    """(tokens through the chunk holding the ``k``-th generated token, that chunk's arrival); (0, NaN) when none
    does (token 0: the first chunk)."""
    total = 0
    for t, n in zip(r.chunk_arrival_s, r.chunk_tokens, strict=False):
        total += n
        if total >= k:
            return total, t
    return 0, math.nan


def time_to_token_s(r: RequestRecord, k: int) -> float:
    """Seconds from send to the arrival of the chunk holding the ``k``-th generated token (NaN when not reached)."""
    return _chunk_holding(r, k)[1] if k > 0 else math.nan


def _time_for(r: RequestRecord, k: int) -> float:
    """An arm's time for its first ``k`` tokens: to the end of the request when they are its whole output (so an
    identical pair is timed end to end), else to the chunk holding token ``k``."""
    if k >= sum(r.chunk_tokens) and math.isfinite(r.e2e_s):
        return r.e2e_s
    return time_to_token_s(r, k)


# tokens after the common prefix from which B's own pace is read; fewer: its pace after the first chunk
MIN_PACE_TOKENS = 4


def _whole_b_s(y: RequestRecord, kb: int, n_a: int) -> float:
    """B's time for A's whole answer, ``n_a`` tokens counted in B's positions (A's tokens after its prefix follow B's
    ``kb``): to the chunk holding common token ``kb``, then B's own pace per token after that chunk (over its own
    continuation) for A's remaining tokens; NaN when B has no such chunk."""
    at, t_k = _chunk_holding(y, kb)
    n_b = sum(y.chunk_tokens)
    if not math.isfinite(t_k) or at <= 0:
        return math.nan
    if n_a <= at:
        return y.e2e_s if at >= n_b else t_k
    if n_b - at >= MIN_PACE_TOKENS and y.e2e_s > t_k:
        pace = (y.e2e_s - t_k) / (n_b - at)
    elif n_b > y.chunk_tokens[0] and y.e2e_s > y.chunk_arrival_s[0]:
        pace = (y.e2e_s - y.chunk_arrival_s[0]) / (n_b - y.chunk_tokens[0])
    else:
        pace = t_k / at
    return t_k + (n_a - at) * pace


def _kept_text(r: RequestRecord) -> bool:
    return not r.text.startswith(("hash:", "dropped:"))


def _common_prefix(x: RequestRecord, y: RequestRecord) -> tuple[int, int, bool]:
    """(A's tokens, B's tokens) of the work both wrote identically, and whether the chains gave it (else the texts,
    mapped to tokens in proportion; hashed or dropped texts give nothing beyond identical outputs)."""
    na, nb = sum(x.chunk_tokens), sum(y.chunk_tokens)
    if x.output_identity == y.output_identity:
        return na, nb, bool(x.prefix_chain and y.prefix_chain)
    if x.prefix_chain and y.prefix_chain:
        k = common_prefix_tokens(x.prefix_chain, y.prefix_chain)
        return k, k, True
    if not (_kept_text(x) and _kept_text(y) and x.text and y.text):
        return 0, 0, False
    chars = next(
        (i for i, (u, v) in enumerate(zip(x.text, y.text, strict=False)) if u != v), min(len(x.text), len(y.text))
    )
    return int(chars / len(x.text) * na), int(chars / len(y.text) * nb), False


def _base_time_s(r: RequestRecord, timeout_s: float) -> float:
    """The baseline's time for a request, for the time shares: to the end, the timeout for a timeout, else the last
    chunk seen (0 when none)."""
    if r.error_kind == "timeout":
        return timeout_s
    if math.isfinite(r.e2e_s):
        return r.e2e_s
    return r.chunk_arrival_s[-1] if r.chunk_arrival_s else 0.0


@dataclass(frozen=True, slots=True)
class WorkTally:
    """Every pair's part in the speed estimate, and how the other pairs and the baseline's tokens and time fell."""

    pairs: list[PairWork]
    short_prefix: int
    failed: int
    history_diverged: int
    chains: bool  # every pair in the estimate had prefix chains
    covered_token_share: float
    identical_share: float
    excluded_time_share: float


def prefix_work(pairs: Sequence[Pair], rules: ComparisonRules) -> WorkTally:
    """Every greedy pair's common work and each arm's time for it (docs/method.md#the-speed-estimate-pair-by-pair):
    failed pairs out (their baseline time counted), timeouts at the timeout, common prefixes under
    ``rules.min_prefix_tokens`` counted (kept for the whole-answer times, left out of the common-prefix ones)."""
    intact = history_intact(pairs)
    out: list[PairWork] = []
    short = failed = diverged_history = identical = 0
    chains = True
    base_tokens = excluded_time = total_time = 0.0
    for (x, y), same_history in zip(pairs, intact, strict=True):
        base_tokens += x.output_tokens
        t_base = _base_time_s(x, rules.timeout_s)
        total_time += t_base
        if not same_history:
            diverged_history += 1
            continue
        timed_out = (x.error_kind == "timeout", y.error_kind == "timeout")
        if any(timed_out) and all(t or finished(r) for t, r in zip(timed_out, (x, y), strict=True)):
            if all(timed_out):
                k = common_prefix_tokens(x.prefix_chain, y.prefix_chain)
                ta = tb = rules.timeout_s
            elif timed_out[0]:
                k, ta, tb = sum(y.chunk_tokens), rules.timeout_s, _time_for(y, sum(y.chunk_tokens))
            else:
                k, ta, tb = sum(x.chunk_tokens), _time_for(x, sum(x.chunk_tokens)), rules.timeout_s
            out.append(
                PairWork(
                    x.block,
                    x.case_id,
                    k,
                    ta,
                    tb,
                    identical=False,
                    capped=False,
                    censored=True,
                    whole_a_s=ta,
                    whole_b_s=tb,
                )
            )
            continue
        if not (finished(x) and finished(y)):
            failed += 1
            excluded_time += t_base
            continue
        same = is_identical(x, y)
        identical += same
        ka, kb, chained = _common_prefix(x, y)
        is_short = min(ka, kb) < rules.min_prefix_tokens
        short += is_short
        if is_short and rules.estimate != "whole":
            continue
        chains &= chained
        capped = (x.verdict == "truncated" and ka >= sum(x.chunk_tokens)) or (
            y.verdict == "truncated" and kb >= sum(y.chunk_tokens)
        )
        ta, tb = _time_for(x, ka), _time_for(y, kb)
        out.append(
            PairWork(
                x.block,
                x.case_id,
                min(ka, kb),
                ta,
                tb,
                identical=same,
                capped=capped,
                censored=False,
                whole_a_s=ta if same else x.e2e_s,
                whole_b_s=tb if same else _whole_b_s(y, kb, sum(x.chunk_tokens) - ka + kb),
                whole_capped="truncated" in (x.verdict, y.verdict),
                short_prefix=is_short,
            )
        )
    covered = sum(w.tokens for w in out)
    return WorkTally(
        out,
        short,
        failed,
        diverged_history,
        chains and bool(out),
        covered_token_share=min(1.0, ratio(covered, base_tokens)) if base_tokens else math.nan,
        identical_share=ratio(identical, len(pairs)),
        excluded_time_share=ratio(excluded_time, total_time) if total_time else 0.0,
    )


def sampled_work(pairs: Sequence[Pair], rules: ComparisonRules) -> WorkTally:
    """Every sampled pair's part in the time-per-token estimate (docs/method.md#sampled-runs), pair by pair as in greedy
    runs: a pair both arms finished by themselves (complete) enters with each arm's own time and tokens; a pair with a
    timeout keeps its place when the other arm completed or timed out too (the timed-out arm's time is the timeout, its
    tokens those it had written by then: censored, flagged); a failed pair leaves alone (its baseline time counted); a
    pair cut at the cap in either arm is counted apart (a loop's time per token is not compared)."""
    intact = history_intact(pairs)
    out: list[PairWork] = []
    failed = diverged_history = identical = 0
    base_tokens = covered = excluded_time = total_time = 0.0
    for (x, y), same_history in zip(pairs, intact, strict=True):
        base_tokens += x.output_tokens
        t_base = _base_time_s(x, rules.timeout_s)
        total_time += t_base
        if not same_history:
            diverged_history += 1
            continue
        identical += is_identical(x, y)
        timed_out = (x.error_kind == "timeout", y.error_kind == "timeout")
        complete = (finished(x) and x.verdict == "complete", finished(y) and y.verdict == "complete")
        if all(t or c for t, c in zip(timed_out, complete, strict=True)):
            ta, tok_a = (rules.timeout_s, sum(x.chunk_tokens)) if timed_out[0] else (x.e2e_s, x.output_tokens)
            tb, tok_b = (rules.timeout_s, sum(y.chunk_tokens)) if timed_out[1] else (y.e2e_s, y.output_tokens)
            covered += x.output_tokens
            out.append(
                PairWork(
                    x.block,
                    x.case_id,
                    tok_a,
                    ta,
                    tb,
                    identical=False,
                    capped=False,
                    censored=any(timed_out),
                    tokens_b=tok_b,
                )
            )
        elif not (finished(x) and finished(y)):  # a failed request: its pair leaves, its time is shown
            failed += 1
            excluded_time += t_base
        # else both finished and one was cut at the cap (a loop or a longer answer): not timed, counted apart
    return WorkTally(
        out,
        0,
        failed,
        diverged_history,
        False,
        covered_token_share=min(1.0, ratio(covered, base_tokens)) if base_tokens else math.nan,
        identical_share=ratio(identical, len(pairs)),
        excluded_time_share=ratio(excluded_time, total_time) if total_time else 0.0,
    )
