"""Every twin an A/A engine pair (issue 49, item 3.1): the release controls run one arm with three twins (A/A and
two slowed), and each twin, its known factor taken out, is an engine of that arm. Simulated with stand-in A/A cells
(no run folder): the record from the independent contrasts of each run's engines covers the true pair offset and is
narrower than the A/A twin's alone; the twins counted as pairs of their own runs share the arm's engine and would
understate it."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats as sps

from specharness.reporting.aa_record import engine_pair_contrasts, memory_offset
from specharness.reporting.aa_scorecard import ControlCell, offset_evidence

TWINS = ("baseline-b", "slow1.05", "slow1.10")


def _runs(rng: np.random.Generator, runs: int, engine_sd: float, se: float) -> list[ControlCell]:
    """Stand-in twin cells: each run's 4 engines (the arm and its 3 twins) have offsets of sd ``engine_sd`` (the
    same in every cell of the run), each cell's estimate adds noise of standard error ``se`` (6 blocks, df 5); the
    slowed twins' factors are already taken out."""
    t = float(sps.t.ppf(0.975, 5))
    cells = []
    for r in range(runs):
        u = rng.normal(0.0, engine_sd, len(TWINS) + 1)
        for cell in range(4):
            for j, twin in enumerate(TWINS, start=1):
                est = math.exp(u[j] - u[0] + rng.normal(0.0, se))
                cells.append(
                    ControlCell(
                        f"run{r}", "w", cell, twin, est, est * math.exp(-t * se), est * math.exp(t * se), "", "", 6, 5
                    )
                )
    return cells


def test_contrasts_count_every_engine_pair_once() -> None:
    rng = np.random.default_rng(9)
    engine_sd = 0.01  # a pair's offset sd is sqrt(2) times it
    truth = math.sqrt(2) * engine_sd
    found: dict[str, list[float]] = {"aa": [], "contrasts": [], "as_pairs": []}
    for _ in range(300):
        cells = _runs(rng, 5, engine_sd, 0.003)
        found["aa"].append(offset_evidence([c for c in cells if c.twin == "baseline-b"]).sd_upper)
        found["contrasts"].append(offset_evidence(engine_pair_contrasts(cells)).sd_upper)
        relabelled = [ControlCell(f"{c.run}/{c.twin}", *[getattr(c, f) for f in c.__slots__[1:]]) for c in cells]
        found["as_pairs"].append(offset_evidence(relabelled).sd_upper)
    cover = {k: float(np.mean([v >= truth for v in vals])) for k, vals in found.items()}
    assert cover["aa"] >= 0.93 and cover["contrasts"] >= 0.93
    assert float(np.median(found["contrasts"])) < 0.85 * float(np.median(found["aa"]))
    assert cover["as_pairs"] < cover["contrasts"]


def test_one_twin_is_its_own_pair() -> None:
    rng = np.random.default_rng(2)
    cells = [c for c in _runs(rng, 4, 0.02, 0.005) if c.twin == "baseline-b"]
    contrasts = engine_pair_contrasts(cells)
    assert len(contrasts) == len(cells)
    key = lambda c: (c.run.split(":")[0], c.clients)  # noqa: E731
    for c, h in zip(sorted(cells, key=key), sorted(contrasts, key=key), strict=True):
        assert math.isclose(math.log(h.estimate), -math.log(c.estimate))
        assert math.isclose(h.se_log, c.se_log, rel_tol=1e-9)
        assert h.run == f"{c.run}:pair1"


def test_memory_offset_of_contrasts_is_unbiased() -> None:
    """Peak memory: a run's 3 twins as independent contrasts give the pair sd at 3 degrees of freedom a run."""
    rng = np.random.default_rng(4)
    sds = []
    for _ in range(400):
        logs = []
        for _run in range(5):
            u = rng.normal(0.0, 0.004, 4)
            twins = [u[j] - u[0] for j in range(1, 4)]
            base = [0.0, *twins]
            logs += [math.sqrt(2 * k / (k + 1)) * (sum(base[:k]) / k - base[k]) for k in range(1, 4)]
        sds.append(memory_offset(logs)[0] ** 2)
    assert math.isclose(float(np.mean(sds)), 2 * 0.004**2, rel_tol=0.08)
