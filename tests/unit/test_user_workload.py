"""A team's own traffic as an ASV series (issue 13): SPECHARNESS_ASV_WORKLOAD names the file, its groups become the
benchmark's parameter, and the per-group values come from the report's group decisions."""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path

import orjson
import pytest

from specharness.history.asv.metrics import group_metrics
from specharness.history.asv.suite import user_groups

ROOT = Path(__file__).resolve().parents[2]


def _workload(path: Path) -> Path:
    lines = [{"id": f"q{i}", "prompt": f"Say {i}.", "max_tokens": 8, "group": g} for i, g in enumerate("abcab")]
    path.write_bytes(b"\n".join(orjson.dumps(x) for x in lines) + b"\n")
    return path


def test_groups_of_the_named_file_are_the_parameter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPECHARNESS_ASV_WORKLOAD", raising=False)
    assert user_groups() == []
    monkeypatch.setenv("SPECHARNESS_ASV_WORKLOAD", str(_workload(tmp_path / "mine.jsonl")))
    assert user_groups() == ["(all)", "a", "b", "c"]


def test_the_benchmark_exists_only_with_the_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.delenv("SPECHARNESS_ASV_WORKLOAD", raising=False)
    sys.modules.pop("benchmarks.bench_workload", None)
    assert not hasattr(importlib.import_module("benchmarks.bench_workload"), "UserWorkload")
    monkeypatch.setenv("SPECHARNESS_ASV_WORKLOAD", str(_workload(tmp_path / "mine.jsonl")))
    sys.modules.pop("benchmarks.bench_workload", None)
    module = importlib.import_module("benchmarks.bench_workload")
    assert module.UserWorkload.params == (["(all)", "a", "b", "c"],)
    cache = {"prefix": "mine/c4", "metrics": {"mine/c4/a/slowdown": 0.5}}
    assert module.UserWorkload().track_slowdown(cache, "a") == 0.5
    assert math.isnan(module.UserWorkload().track_slowdown(cache, "b"))
    sys.modules.pop("benchmarks.bench_workload", None)


def test_group_metrics_rise_when_a_group_gets_worse() -> None:
    report = {
        "group_decisions": [
            {
                "arm_a": "baseline",
                "arm_b": "ngram",
                "workload": "mine",
                "load": "c4",
                "group": "a",
                "speedup": {"estimate": 2.0},
                "acceptance_rate": 0.75,
                "correct_fraction_b": 0.9,
            },
            {
                "arm_a": "baseline",
                "arm_b": "baseline-b",
                "workload": "mine",
                "load": "c4",
                "group": "a",
                "speedup": {"estimate": 1.0},
                "acceptance_rate": None,
                "correct_fraction_b": 0.9,
            },
        ]
    }
    m = group_metrics(report)
    assert m == pytest.approx(
        {"mine/c4/a/slowdown": 0.5, "mine/c4/a/rejection_rate": 0.25, "mine/c4/a/incorrect_fraction": 0.1}
    )
