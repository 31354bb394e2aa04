"""The order term where the arms took turns within a cell (issue 49, item 3.3): a cell whose arms each led half of its
rounds has no block order to model, so the interval leaves the term out and keeps the degree of freedom it cost;
a cell of one round keeps it. Simulated, and read through the analysis from a SYNTHETIC run (made-up records)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from specharness.analysis.analyse import analyse
from specharness.analysis.changes import CHANGE_CONFIDENCE
from specharness.analysis.stats import block_ratio_interval
from specharness.experiment.design import get_profile, override
from specharness.experiment.rundir import read_manifest
from specharness.experiment.synthetic import write_synthetic_run

SIGNS = [1, -1, -1, 1, 1, -1]  # the release profile's six mirrored blocks


def test_without_the_term_a_balanced_cell_keeps_coverage_and_narrows() -> None:
    """No order effect (the rounds balance it within each block), block sd 0.1 as on the H100: with the order term
    the 99% interval over 6 blocks is wider on average by the t quantile of 4 df against 5 (×1.69 against ×1.56 in
    the issue's H100 cells); both keep their coverage, so the term buys nothing."""
    rng = np.random.default_rng(5)
    widths = {"with": [], "without": []}
    covered = {"with": 0, "without": 0}
    runs = 2000
    for _ in range(runs):
        logs = list(rng.normal(0.0, 0.1, len(SIGNS)))
        for name, signs in (("with", SIGNS), ("without", None)):
            r = block_ratio_interval(logs, signs, CHANGE_CONFIDENCE)
            widths[name].append(r.high / r.low)
            covered[name] += r.low <= 1.0 <= r.high
    assert covered["without"] / runs >= 0.985 and covered["with"] / runs >= 0.985
    assert float(np.median(widths["with"])) / float(np.median(widths["without"])) > 1.04


def test_analysis_leaves_the_term_out_only_where_the_rounds_balance_it(tmp_path: Path) -> None:
    """Release profile, one engine per arm: at 1 client each cell is 4 rounds (each arm leads 2), at 4 clients one
    round (the block's order is the cell's)."""
    profile = override(get_profile("release"), arms=("baseline", "ngram"), instances=1)
    run = write_synthetic_run(tmp_path / "run", 96, profile=profile)
    analysis = analyse(run, read_manifest(run))
    by_clients = {c.clients: c for c in analysis.comparisons if c.workload == "copy"}
    assert by_clients[1].ordered_blocks == [] and "order term" not in by_clients[1].speedup.method
    assert by_clients[1].speedup.df == 5
    assert len(by_clients[4].ordered_blocks) == 6 and "order term" in by_clients[4].speedup.method
    assert math.isfinite(by_clients[4].speedup.order_effect)
