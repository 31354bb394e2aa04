"""The ASV glue: a fixed parameter grid, a one-line error for a profile outside it, NaN for cells not run."""

from __future__ import annotations

import importlib
import math

import pytest

from specharness._errors import ConfigError
from specharness.experiment.design import get_profile, override
from specharness.history import asvsuite


def test_grid_does_not_depend_on_the_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    grids = []
    for name in ("quick", "standard", "smoke"):
        monkeypatch.setenv("SPECHARNESS_ASV_PROFILE", name)
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
    from specharness.history.metrics import lookup

    cache = {"metrics": {"copy/c1/slowdown": 0.5, "copy/c1/rejection_rate": 0.2}}
    assert lookup(cache, "copy/c1/slowdown") == 0.5
    assert lookup(cache, "copy/c1/rejection_rate") == pytest.approx(0.2)
    assert math.isnan(lookup(cache, "copy/c8/slowdown"))
