"""Engines quiet before a cell (experiment/quiet.py, cells.py, decisions.py): an arm sends once the engine that sent
before it has been quiet for the run's settle time, across blocks and looks; cells of one arm in a row do not wait.
``run_cell`` is a stand-in that only records which arm it measured (no engine), and the clock is a stand-in that the
cells and the waits advance."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from specharness._errors import ConfigError
from specharness.experiment import cells, quiet
from specharness.experiment.config import RunConfig
from specharness.experiment.decisions import _with_settle
from specharness.experiment.design import Profile, get_profile, plan_cells, validate_profile
from specharness.experiment.quiet import ENGINE_SETTLE_S, EngineQuiet
from specharness.records import Manifest


class _Clock:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.now, self.waited = 100.0, 0.0
        monkeypatch.setattr(quiet.time, "sleep", self.sleep)
        monkeypatch.setattr(quiet.time, "monotonic", lambda: self.now)

    def sleep(self, s: float) -> None:
        self.waited += s
        self.now += s


def _walk(monkeypatch: pytest.MonkeyPatch, settle_s: float, looks_of: int = 0) -> list[tuple[str, float]]:
    """Each cell: the arm measured, and the wait before it; ``looks_of`` > 0 runs the plan with --until-decided
    looks that keep every cell open."""
    clock = _Clock(monkeypatch)
    steps: list[tuple[str, float]] = []

    def stand_in_cell(ctx: object, plan: object, arm: str) -> SimpleNamespace:
        steps.append((arm, clock.waited))
        clock.waited = 0.0
        clock.now += 0.5  # the cell takes half a second
        return SimpleNamespace(valid=True, arm=arm)

    monkeypatch.setattr(cells, "run_cell", stand_in_cell)
    profile = replace(get_profile("quick"), workloads=("copy",), clients=(1,), settle_s=settle_s)
    if looks_of:
        profile = replace(profile, blocks=2, until_decided=True, max_blocks=2 + 2 * looks_of)
    journal = SimpleNamespace(write=lambda event: None)
    ctx = SimpleNamespace(
        profile=profile,
        engines=SimpleNamespace(failed={}),
        out_dir=Path("."),
        journal=journal,
        quiet=EngineQuiet(settle_s),
    )
    if looks_of:
        cells.run_plan(ctx, set(), lambda _run: {("copy", "c1")})  # type: ignore[arg-type]
    else:
        cells.run_cells(ctx, plan_cells(profile)[:3], set())  # type: ignore[arg-type]
    return steps


def _waits(steps: list[tuple[str, float]]) -> tuple[list[float], list[float]]:
    switched = [steps[i][1] for i in range(1, len(steps)) if steps[i][0] != steps[i - 1][0]]
    same = [steps[i][1] for i in range(1, len(steps)) if steps[i][0] == steps[i - 1][0]]
    return switched, same


def test_an_arm_waits_for_the_engine_before_it_to_be_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    steps = _walk(monkeypatch, 1.2)
    assert [a for a, _ in steps] == ["baseline", "ngram", "ngram", "baseline", "ngram", "baseline"]  # AB BA BA
    switched, same = _waits(steps)
    assert steps[0][1] == 0.0  # nothing sent before the first cell
    assert switched == pytest.approx([1.2, 1.2, 1.2, 1.2]) and same == [0.0]


def test_the_wait_holds_across_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    """--until-decided: each look is its own walk of the cells; the arm that opens a look still waits for the one
    that closed the look before."""
    steps = _walk(monkeypatch, 1.2, looks_of=2)
    assert len(steps) == 12
    switched, same = _waits(steps)
    assert len(switched) >= 8 and switched == pytest.approx([1.2] * len(switched)) and set(same) == {0.0}


def test_only_the_rest_of_the_settle_time_is_waited(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock(monkeypatch)
    q = EngineQuiet(1.2)
    q.ended("baseline")
    clock.now += 0.5  # half a second of other work since
    assert q.wait_for("ngram") == pytest.approx(0.7) and clock.waited == pytest.approx(0.7)
    q.ended("ngram")
    assert q.wait_for("ngram") == 0.0  # the same arm again


def test_no_wait_without_a_settle_time(monkeypatch: pytest.MonkeyPatch) -> None:
    assert all(waited == 0.0 for _, waited in _walk(monkeypatch, 0.0))


def test_the_run_decides_the_settle_time_once_from_the_machine() -> None:
    config = RunConfig(profile=get_profile("quick"), out_dir=Path("run"))
    cpu, gpu = {"gpus": []}, {"gpus": ["NVIDIA H100 80GB HBM3"]}
    assert _with_settle(config, cpu).profile.settle_s == ENGINE_SETTLE_S
    assert _with_settle(config, gpu).profile.settle_s == 0.0
    attached = replace(config, attach={"baseline": "http://h:1", "ngram": "http://h:2"})
    assert _with_settle(attached, cpu).profile.settle_s == 0.0
    declared = replace(config, profile=replace(config.profile, settle_s=0.5))
    assert _with_settle(declared, gpu).profile.settle_s == 0.5
    old = Manifest(config={"profile": get_profile("quick").to_dict()})  # a run measured before the rule: resumed
    assert _with_settle(config, cpu, old).profile.settle_s == 0.0
    assert Profile.from_dict(_with_settle(config, cpu).profile.to_dict()).settle_s == ENGINE_SETTLE_S
    assert Profile.from_dict(get_profile("quick").to_dict()).settle_s is None


def test_a_negative_settle_time_is_refused() -> None:
    with pytest.raises(ConfigError, match="--settle -1"):
        validate_profile(replace(get_profile("quick"), settle_s=-1.0))
