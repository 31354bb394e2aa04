"""One simulated run of a traffic scenario as request records: chunk arrivals, tokens per chunk, prefix chains and
digests, with divergent outputs, failures, timeouts and loops, and the run's true speedups.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from specharness.analysis.simulation.model import (
    DRIFT_CURVATURE,
    HEAVY_DF,
    OUTLIER_FACTOR,
    OUTLIER_PROB,
    sim_request,
)
from specharness.analysis.simulation.traffic_scenarios import TrafficScenario
from specharness.records import RequestRecord

__all__ = ["run_records"]


def run_records(
    sc: TrafficScenario, rng: np.random.Generator, a_first: np.ndarray
) -> tuple[list[tuple[RequestRecord, RequestRecord]], float, float, float, float]:
    """One simulated run as request pairs, with its true speedup (all cases, loops included: what the verdict is
    about), the identifiable one, the true speedup without the looping cases, and the request timeout (300 s when
    the scenario has none)."""
    nb, r = a_first.size, sc.cases
    base = rng.normal(math.log(2.0), sc.case_sd, r)
    tokens = np.maximum(12, np.round(40.0 * np.exp(base))).astype(int)
    z = rng.normal(0.0, 1.0, r)
    log_s = math.log(sc.true_speedup) + sc.case_speed_sd * z
    if sc.long_case is not None:
        factor, own = sc.long_case
        tokens[0] = int(tokens.max() * factor)
        base[0] = math.log(tokens[0] / 40.0)
        log_s[0] = math.log(own)
    loops = np.zeros(r, dtype=bool)
    loops[: round(sc.loop_share * r)] = True
    tok = np.where(loops, tokens * 4, tokens)
    log_base = np.where(loops, base + math.log(4.0), base)
    log_s = np.where(loops, math.log(sc.loop_speedup), log_s)
    kept = ~loops
    truth = float(np.exp(log_base).sum() / np.exp(log_base - log_s).sum())
    truth_no_loops = float(np.exp(log_base[kept]).sum() / np.exp(log_base[kept] - log_s[kept]).sum())
    inst = rng.normal(0.0, sc.instance_sd, 2) if sc.instance_sd > 0 else np.zeros(2)
    timeout = sc.timeout_factor * float(np.exp(log_base).max())
    p_div = (
        np.clip(sc.p_div * np.exp(-sc.div_bias * sc.case_speed_sd * z), 0.0, 1.0)
        if sc.div_bias
        else np.full(r, sc.p_div)
    )
    horizon = sc.planned_blocks * 2 * r
    k = DRIFT_CURVATURE
    pairs = []
    for blk in range(nb):
        block = rng.normal(0.0, sc.block_sd)
        for arm in (0, 1):
            jitter = rng.normal(0.0, sc.jitter_sd)
            slot = (0 if a_first[blk] else 1) if arm == 0 else (1 if a_first[blk] else 0)
            t = (blk * 2 * r + slot * r + np.arange(r) + 0.5) / horizon
            trend = -math.log1p(sc.drift) * (1 - np.exp(-k * t)) / (1 - math.exp(-k))
            order = -math.log1p(sc.order_effect) if slot == 1 else 0.0
            if sc.heavy_tails:
                noise = rng.standard_t(HEAVY_DF, r) * (sc.noise_sd / math.sqrt(HEAVY_DF / (HEAVY_DF - 2)))
                noise += np.where(rng.random(r) < OUTLIER_PROB, math.log(OUTLIER_FACTOR), 0.0)
            else:
                noise = rng.normal(0.0, sc.noise_sd, r)
            secs = np.exp(log_base - (log_s if arm else 0.0) + inst[arm] + trend + order + block + jitter + noise)
            if arm == 0:
                secs_a = secs
            else:
                secs_b = secs
        diverge = (rng.random(r) < p_div) & ~loops
        cut = np.maximum(1, np.floor(rng.random(r) * tok)).astype(int)
        fail = rng.random((2, r)) < sc.p_fail
        for c in range(r):
            n = int(tok[c])
            common = int(cut[c]) if diverge[c] else n
            recs = []
            for arm, secs in ((0, secs_a), (1, secs_b)):
                chain = "0000" * n if arm == 0 or not diverge[c] else "0000" * common + "1111" * (n - common)
                digest = f"c{c}" if arm == 0 or not diverge[c] else f"c{c}-b{blk}"
                recs.append(
                    _sim_record(
                        ("baseline", "ngram")[arm],
                        blk,
                        c,
                        n,
                        float(secs[c]),
                        chain,
                        digest,
                        "failed" if fail[arm, c] else ("truncated" if loops[c] else "complete"),
                        timeout,
                    )
                )
            pairs.append((recs[0], recs[1]))
    return (
        pairs,
        truth,
        truth * math.exp(inst[0] - inst[1]),
        truth_no_loops,
        timeout if math.isfinite(timeout) else 300.0,
    )


def _sim_record(
    arm: str, block: int, case: int, n: int, secs: float, chain: str, digest: str, verdict: str, timeout: float
) -> RequestRecord:
    chunks = min(n, 8)
    per = [n // chunks + (1 if i < n % chunks else 0) for i in range(chunks)]
    arrivals = [secs * x / n for x in itertools.accumulate(per)]
    error = None
    if verdict == "failed":
        error, arrivals, per, cut_chain = "http_error", [], [], ""
    elif secs > timeout:
        keep = [i for i, t in enumerate(arrivals) if t <= timeout]
        error, verdict = "timeout", "failed"
        arrivals, per = [arrivals[i] for i in keep], [per[i] for i in keep]
        cut_chain = chain[: 4 * int(sum(per))]
    else:
        cut_chain = chain
    return sim_request(arm, block, case, arrivals, per, digest, cut_chain, verdict=verdict, error=error, e2e_s=secs)
