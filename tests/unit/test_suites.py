"""The built-in suites are data files now (specharness/traffic/suites/*.jsonl): what they must keep is held here.
Fails if a case stops parsing, an id repeats, an abstain question repeats, a structured schema loosens, or a suite
changes its size unnoticed."""

from __future__ import annotations

import pytest

from specharness.traffic import suites
from specharness.traffic.workloads import BUILTIN_WORKLOADS, load_workload, warmup_cases

SIZES = {"copy": 16, "transform": 16, "free": 8, "abstain": 80, "structured": 16}


@pytest.mark.parametrize("name", sorted(SIZES))
def test_every_suite_parses_with_unique_ids_and_its_size(name: str) -> None:
    workload = load_workload(name)
    ids = [c.id for c in workload.cases]
    assert len(ids) == SIZES[name] and len(set(ids)) == len(ids), ids
    assert all(c.check is not None for c in workload.cases) or name == "free"


def test_the_suites_on_disk_are_the_built_in_workloads() -> None:
    assert set(SIZES) <= set(BUILTIN_WORKLOADS)
    with pytest.raises(KeyError):
        suites.builtin_cases("warmup")  # the warmup prompts are not a workload
    assert len(warmup_cases()) == 4


def test_the_abstain_questions_are_distinct() -> None:
    questions = [c["messages"][-1]["content"] for c in suites.builtin_cases("abstain")]
    assert len(set(questions)) == len(questions) == 80


def _strict(schema: object) -> list[str]:
    """Object schemas that allow extra properties or leave a property optional."""
    bad: list[str] = []
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            props = set(schema.get("properties", {}))
            if schema.get("additionalProperties") is not False or set(schema.get("required", [])) != props:
                bad.append(str(sorted(props)))
        for value in schema.values():
            bad += _strict(value)
    elif isinstance(schema, list):
        for value in schema:
            bad += _strict(value)
    return bad


def test_structured_schemas_are_strict() -> None:
    cases = suites.builtin_cases("structured")
    schemas = [c["response_format"]["json_schema"]["schema"] for c in cases if "response_format" in c]
    tools = [t["function"]["parameters"] for c in cases for t in c.get("tools", [])]
    assert schemas and tools
    assert [b for s in schemas + tools for b in _strict(s)] == []
