"""Engine instances as replicates (issue 49, item 1): the interval over instances, simulated against what breaks an
interval over blocks (an engine-instance offset that every block of one engine shares, offsets that differ by cell,
heavy-tailed block noise, drift, an order effect, few instances), and read through the analysis from a SYNTHETIC
run folder (made-up records, never measurements)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from specharness._errors import ConfigError
from specharness.analysis.analyse import analyse
from specharness.analysis.changes import CHANGE_CONFIDENCE, over_cells_logs
from specharness.analysis.stats import block_ratio_interval, instance_ratio_interval
from specharness.experiment.design import get_profile, override
from specharness.experiment.rundir import read_manifest
from specharness.experiment.synthetic import write_synthetic_run

CELLS = 4


def _run(
    rng: np.random.Generator,
    effect: float,
    instances: int,
    per_instance: int,
    run_sd: float,
    cell_sd: float,
    block_sd: float,
) -> tuple[list[list[float]], list[int]]:
    """One run's block log ratios (B over A) for 4 cells, and each block's engine instance. Each instance's engine
    pair has an offset shared by every cell (``run_sd``) plus one of each cell's own (``cell_sd``); blocks add
    heavy-tailed noise (Student t, 3 df, scaled to ``block_sd``), a slow drift and an order effect of alternate
    blocks."""
    blocks = instances * per_instance
    which = [b // per_instance for b in range(blocks)]
    shared = rng.normal(0.0, run_sd, instances)
    own = rng.normal(0.0, cell_sd, (CELLS, instances))
    drift = np.linspace(-0.004, 0.004, blocks)
    order = np.array([0.003 if b % 2 == 0 else -0.003 for b in range(blocks)])
    noise = rng.standard_t(3, (CELLS, blocks)) * block_sd / math.sqrt(3.0)
    logs = [
        [
            math.log(effect) + shared[which[b]] + own[c, which[b]] + drift[b] + order[b] + noise[c, b]
            for b in range(blocks)
        ]
        for c in range(CELLS)
    ]
    return logs, which


def _study(
    effect: float,
    instances: int,
    per_instance: int,
    run_sd: float,
    cell_sd: float,
    block_sd: float,
    runs: int = 600,
) -> dict[str, float]:
    """Coverage of the true change and the share of runs calling a change (the 99% interval excluding 1), per cell
    and over all cells, for the interval over instances and for the blocks-only interval of the same records."""
    rng = np.random.default_rng(11)
    truth = math.log(effect)
    tally = dict.fromkeys(("cell_cover", "cell_call", "all_cover", "all_call", "blocks_cover"), 0)
    for _ in range(runs):
        logs, which = _run(rng, effect, instances, per_instance, run_sd, cell_sd, block_sd)
        for cell in logs:
            r = instance_ratio_interval(cell, which, CHANGE_CONFIDENCE)
            tally["cell_cover"] += r.low <= effect <= r.high
            tally["cell_call"] += r.low > 1.0
            naive = block_ratio_interval(cell, None, CHANGE_CONFIDENCE)
            tally["blocks_cover"] += naive.low <= effect <= naive.high
        pooled = over_cells_logs([dict(enumerate(cell)) for cell in logs])
        r = instance_ratio_interval(list(pooled.values()), [which[b] for b in pooled], CHANGE_CONFIDENCE)
        tally["all_cover"] += r.low <= math.exp(truth) <= r.high
        tally["all_call"] += r.low > 1.0
    cells = runs * CELLS
    return {
        "cell_coverage": tally["cell_cover"] / cells,
        "cell_called": tally["cell_call"] / cells,
        "all_coverage": tally["all_cover"] / runs,
        "all_called": tally["all_call"] / runs,
        "blocks_coverage": tally["blocks_cover"] / cells,
    }


def test_interval_over_instances_is_the_t_interval_of_the_instance_means() -> None:
    r = instance_ratio_interval([0.1, 0.3, 0.0, 0.2, math.nan, 0.5], [0, 0, 1, 1, 2, 2], 0.99)
    means = np.array([0.2, 0.1, 0.5])
    assert r.estimate == pytest.approx(math.exp(means.mean()))
    assert (r.df, r.blocks, r.t_df) == (2, 5, 2.0)
    assert r.se_log == pytest.approx(means.std(ddof=1) / math.sqrt(3))
    assert r.offset_var == 0.0 and "3 instances, 5 blocks" in r.method
    one = instance_ratio_interval([0.1, 0.2], [4, 4])
    assert math.isnan(one.low) and one.estimate == pytest.approx(math.exp(0.15))


def test_release_design_holds_the_offset_that_one_engine_per_arm_hides() -> None:
    """The CPU's measured engine-instance offset (sd 0.014 a cell, most of it shared by the run's cells) over
    block noise of sd 0.005: six instances of one block keep the 99% interval's coverage, per cell and over all
    cells; the blocks of one engine pair alone (what one engine per arm gives without a record's allowance) do not."""
    found = _study(1.0, instances=6, per_instance=1, run_sd=0.012, cell_sd=0.007, block_sd=0.005)
    assert found["cell_coverage"] >= 0.975
    assert found["all_coverage"] >= 0.975
    assert found["cell_called"] <= 0.02 and found["all_called"] <= 0.02
    one_engine = _study(1.0, instances=1, per_instance=6, run_sd=0.012, cell_sd=0.007, block_sd=0.005)
    assert one_engine["blocks_coverage"] <= 0.6


def test_few_instances_and_heavy_tails_keep_coverage() -> None:
    """Two instances of three blocks with t(3) block noise as large as the offset: wide, but still honest."""
    found = _study(1.05, instances=2, per_instance=3, run_sd=0.01, cell_sd=0.01, block_sd=0.02)
    assert found["cell_coverage"] >= 0.975 and found["all_coverage"] >= 0.975


def test_power_at_three_percent_on_a_quiet_engine() -> None:
    """An 8B-shaped model on the H100 (block sd 0.006-0.03, offset assumed 0.005): twelve blocks on six instances
    call a ×1.03 slowdown over all cells in most runs; a ×1.05 in nearly all."""
    three = _study(1.03, instances=6, per_instance=2, run_sd=0.005, cell_sd=0.003, block_sd=0.015, runs=300)
    five = _study(1.05, instances=6, per_instance=2, run_sd=0.005, cell_sd=0.003, block_sd=0.015, runs=300)
    assert three["all_called"] >= 0.8
    assert five["all_called"] >= 0.95 and five["cell_called"] >= 0.8


def test_analysis_of_a_run_with_instances_uses_them(tmp_path: Path) -> None:
    """A SYNTHETIC release-shaped run whose engines were renewed every block: every comparison's interval is over
    its 6 instances with no recorded allowance; the same records read as one engine per arm get the record's."""
    profile = override(get_profile("release"), arms=("baseline", "ngram"))
    run = write_synthetic_run(tmp_path / "six", 96, profile=profile, instance_sd=0.05)
    a = analyse(run, read_manifest(run))
    assert a.comparisons
    for c in a.comparisons:
        assert "engine instances as replicates (6 instances" in c.speedup.method
        assert c.speedup.offset_var == 0.0 and c.speedup.t_df <= 5.0
        assert c.instance_of == {b: b for b in range(6)}
        assert c.work is not None and c.work.offset_sd == 0.0
    text = write_markdown_text(run)
    assert "Every interval is over the run's 6 engine instances: none added" in text
    assert "by Student t over the instances' mean log ratios (6 − 1 degrees of freedom)" in text
    single = write_synthetic_run(tmp_path / "one", 96, profile=override(profile, instances=1), instance_sd=0.05)
    for c in analyse(single, read_manifest(single)).comparisons:
        assert "blocks as replicates" in c.speedup.method and c.speedup.offset_var > 0
        assert c.instance_of == {}


def write_markdown_text(run: Path) -> str:
    from specharness.reporting.report import write_report

    write_report(run, plots=False)
    return (run / "report.md").read_text()


def test_instances_must_divide_the_blocks_and_go_with_a_fixed_design() -> None:
    release = get_profile("release")
    assert [list(r) for r in override(release, blocks=8, instances=4).instance_blocks()] == [
        [0, 1],
        [2, 3],
        [4, 5],
        [6, 7],
    ]
    with pytest.raises(ConfigError, match="--instances 4: give a number of engine instances per arm that divides"):
        override(release, instances=4)
    with pytest.raises(ConfigError, match="leave out --until-decided"):
        override(release, until_decided=True, max_blocks=8)
