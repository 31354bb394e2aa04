"""scripts/diag/config_visits.py counts module visits right, on stand-in packages written to tmp_path.

The stand-ins are tiny ``specharness`` trees (``experiment/driver.py:run_experiment(config)`` plus a few modules in
the rooms) that stand in for the real package; the script is loaded from its path, as scripts/ is no package.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "diag" / "config_visits.py"


@pytest.fixture(scope="module")
def cv() -> ModuleType:
    spec = importlib.util.spec_from_file_location("config_visits", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def standin(root: Path, files: dict[str, str]) -> Path:
    """Write a stand-in package: ``files`` maps paths under specharness/ to their source."""
    for rel, src in {"__init__.py": "", "experiment/__init__.py": "", **files}.items():
        path = root / "specharness" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / "__init__.py").touch()
        path.write_text(textwrap.dedent(src))
    return root


def modules(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [e.module.removeprefix("specharness.") for e in result.sequence]


def test_a_chain_of_three_modules_is_three_visits(cv: ModuleType, tmp_path: Path) -> None:
    root = standin(
        tmp_path,
        {
            "experiment/driver.py": """
                from specharness.experiment.b import f
                def run_experiment(config):
                    f(config)
            """,
            "experiment/b.py": """
                from specharness.experiment import c
                def f(cfg):
                    c.g(cfg.profile)
            """,
            "experiment/c.py": "def g(profile):\n    return profile\n",
        },
    )
    result = cv.measure(root)
    assert modules(result) == ["experiment.driver", "experiment.b", "experiment.c"]
    assert (result.totals.visits, result.totals.files, result.totals.returns) == (3, 3, 0)


def test_a_call_back_into_a_module_left_is_a_return(cv: ModuleType, tmp_path: Path) -> None:
    root = standin(
        tmp_path,
        {
            "experiment/driver.py": """
                from specharness.experiment.b import f
                from specharness.experiment.c import h
                def run_experiment(config):
                    f(config)
                    h(config)
            """,
            "experiment/b.py": """
                from specharness.experiment.c import g
                def f(config):
                    g(config)
                    f2(config)
                def f2(config):
                    pass
            """,
            "experiment/c.py": "def g(config):\n    pass\ndef h(config):\n    pass\n",
        },
    )
    result = cv.measure(root)
    # b made another call after g returned, and the driver after f returned: both go back
    assert modules(result) == [
        "experiment.driver",
        "experiment.b",
        "experiment.c",
        "experiment.b",
        "experiment.driver",
        "experiment.c",
    ]
    assert (result.totals.visits, result.totals.files, result.totals.returns) == (6, 3, 3)


def test_a_return_with_no_call_after_it_is_not_counted(cv: ModuleType, tmp_path: Path) -> None:
    root = standin(
        tmp_path,
        {
            "experiment/driver.py": """
                from specharness.experiment.b import f
                def run_experiment(config):
                    f(config)
                    return config
            """,
            "experiment/b.py": "def f(config):\n    pass\n",
        },
    )
    assert cv.measure(root).totals.visits == 2
    assert cv.measure(root, cv.Variant(return_always=True)).totals.visits == 3


def test_a_call_without_the_tracked_value_is_not_followed(cv: ModuleType, tmp_path: Path) -> None:
    root = standin(
        tmp_path,
        {
            "experiment/driver.py": """
                from specharness.experiment.b import f
                def run_experiment(config):
                    other = 1
                    f(other)
                    f(x=len("config"))
            """,
            "experiment/b.py": "def f(x):\n    pass\n",
        },
    )
    result = cv.measure(root)
    assert modules(result) == ["experiment.driver"]
    assert result.entered == 1


def test_a_derived_local_is_tracked_and_mapped_by_keyword(cv: ModuleType, tmp_path: Path) -> None:
    root = standin(
        tmp_path,
        {
            "experiment/driver.py": """
                import specharness.experiment.b as b
                def run_experiment(config):
                    p = config.profile
                    b.f(1, prof=p)
            """,
            "experiment/b.py": """
                from specharness.experiment.c import g, h
                def f(n, prof=None):
                    h(n)        # n is not a part of the config
                    g(prof)
            """,
            "experiment/c.py": "def g(x):\n    pass\ndef h(x):\n    pass\n",
        },
    )
    result = cv.measure(root)
    assert [e.function for e in result.sequence] == ["run_experiment", "f", "g"]


def test_a_cycle_terminates_and_each_function_is_entered_once(cv: ModuleType, tmp_path: Path) -> None:
    root = standin(
        tmp_path,
        {
            "experiment/driver.py": """
                from specharness.experiment.b import f
                def run_experiment(config):
                    f(config)
                    f(config)
            """,
            "experiment/b.py": """
                from specharness.experiment import c
                def f(config):
                    c.g(config)
            """,
            "experiment/c.py": """
                from specharness.experiment import b
                def g(config):
                    b.f(config)
            """,
        },
    )
    for variant in (cv.Variant(), cv.Variant(repeats=True)):
        result = cv.measure(root, variant)
        assert result.entered == 3
    assert modules(cv.measure(root)) == ["experiment.driver", "experiment.b", "experiment.c"]


def test_a_climb_to_an_earlier_room_is_counted_and_the_base_apart(cv: ModuleType, tmp_path: Path) -> None:
    root = standin(
        tmp_path,
        {
            "experiment/driver.py": """
                from specharness.analysis.report import summarise
                def run_experiment(config):
                    summarise(config)
            """,
            "analysis/report.py": """
                from specharness.records import to_dict
                from specharness.traffic.load import load
                def summarise(config):
                    to_dict(config)
                    load(config)
            """,
            "records.py": "def to_dict(x):\n    pass\n",
            "traffic/load.py": "def load(x):\n    pass\n",
        },
    )
    result = cv.measure(root)
    assert modules(result) == ["experiment.driver", "analysis.report", "records", "analysis.report", "traffic.load"]
    # analysis -> traffic climbs; analysis -> records is into the base; records -> analysis descends
    assert (result.totals.climbs, result.totals.into_base, result.totals.returns) == (1, 1, 1)
    assert [cv.room(m) for m in ("specharness.records", "specharness.engines.pool.keys", "specharness.history.x")] == [
        -1,
        0,
        4,
    ]


def test_a_tracked_receiver_tracks_self_and_a_class_call_enters_init(cv: ModuleType, tmp_path: Path) -> None:
    root = standin(
        tmp_path,
        {
            "experiment/driver.py": """
                from specharness.experiment.ctx import Context
                def run_experiment(config):
                    ctx = Context(config)
                    ctx.go()
            """,
            "experiment/ctx.py": """
                from specharness.traffic.send import send
                class Context:
                    def __init__(self, config):
                        self.config = config
                    def go(self):
                        self.step()
                    def step(self):
                        send(self.config)
            """,
            "traffic/send.py": "def send(x):\n    pass\n",
        },
    )

    def entered(variant):  # type: ignore[no-untyped-def]
        return [e.function for e in cv.measure(root, variant).entries if e.kind == "enter"]

    # by default ctx's class is unknown, so ctx.go() is skipped; --typed knows it from the constructor call
    assert entered(cv.Variant()) == ["run_experiment", "Context.__init__"]
    assert entered(cv.Variant(typed=True)) == [
        "run_experiment",
        "Context.__init__",
        "Context.go",
        "Context.step",
        "send",
    ]
    assert entered(cv.Variant(ignore_classes=True)) == ["run_experiment"]


def test_the_real_package_is_walked_from_run_experiment(cv: ModuleType) -> None:
    result = cv.measure(SCRIPT.parents[2])
    assert result.sequence[0].function == "run_experiment"
    assert result.totals.visits > 10
    assert result.totals.files <= result.totals.visits
