import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specharness import WorkloadError
from specharness.traffic.workloads import BUILTIN_WORKLOADS, load_workload, load_workloads


@pytest.mark.parametrize("name", BUILTIN_WORKLOADS)
def test_builtin_suites_load_with_a_rubric_for_every_case(name: str) -> None:
    workload = load_workload(name)
    assert len(workload.cases) >= 8
    assert all(case.check is not None for case in workload.cases)
    assert len({case.id for case in workload.cases}) == len(workload.cases)


def test_copy_rubrics_pass_on_the_reference_answer() -> None:
    # A copy case's rubric must accept the passage itself: the checker is grounded in the input.
    for case in load_workload("copy").cases:
        if case.group == "repeat":
            passage = case.messages[-1]["content"].split("\n\n", 1)[1]
            assert case.check.evaluate(passage).correct, case.id


def write(tmp_path: Path, lines: list[str]) -> str:
    path = tmp_path / "mine.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_user_workload_with_groups_prompt_and_unchecked_cases(tmp_path: Path) -> None:
    spec = write(
        tmp_path,
        [
            '{"id": "a", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "group": "g1",'
            ' "check": {"type": "contains", "values": ["x"]}}',
            "",
            '{"id": "b", "prompt": "Once upon", "max_tokens": 4}',
        ],
    )
    workload = load_workload(spec)
    assert workload.name == "mine"
    assert [c.id for c in workload.cases] == ["a", "b"]
    assert workload.cases[0].endpoint == "/v1/chat/completions"
    assert workload.cases[1].endpoint == "/v1/completions"
    assert workload.cases[1].check is None and workload.cases[1].group == "default"


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("{not json", "not valid JSON"),
        ('["a"]', "expected a JSON object"),
        ('{"messages": [], "max_tokens": 1}', "field 'id'"),
        ('{"id": "a", "max_tokens": 1}', "exactly one of 'messages'"),
        ('{"id": "a", "prompt": "p", "max_tokens": 0}', "field 'max_tokens'"),
        ('{"id": "a", "prompt": "p", "max_tokens": 1, "colour": 1}', "unknown field 'colour'"),
        ('{"id": "a", "messages": [{"role": "robot", "content": "x"}], "max_tokens": 1}', "role 'robot'"),
        ('{"id": "a", "prompt": "p", "max_tokens": 1, "check": {"type": "nope"}}', "check.type"),
    ],
)
def test_malformed_line_names_file_and_line(tmp_path: Path, line: str, fragment: str) -> None:
    spec = write(tmp_path, ['{"id": "ok", "prompt": "p", "max_tokens": 1}', line])
    with pytest.raises(WorkloadError) as info:
        load_workload(spec)
    assert f"{spec}:2:" in str(info.value) and fragment in str(info.value)


def test_duplicate_ids_and_unknown_names(tmp_path: Path) -> None:
    spec = write(tmp_path, ['{"id": "a", "prompt": "p", "max_tokens": 1}'] * 2)
    with pytest.raises(WorkloadError, match="duplicate id 'a'"):
        load_workload(spec)
    with pytest.raises(WorkloadError, match="unknown workload 'copyy'"):
        load_workload("copyy")
    with pytest.raises(WorkloadError, match="given twice"):
        load_workloads(["copy", "copy"])
    with pytest.raises(WorkloadError, match="not found"):
        load_workload(str(tmp_path / "absent.jsonl"))


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10,
)
_schemas = _json_values | st.just({"type": "object", "properties": {"n": {"type": "integer"}}})
_case_like = st.fixed_dictionaries(
    {},
    optional={
        "id": _json_values | st.text(min_size=1, max_size=5),
        "prompt": _json_values | st.just("p"),
        "messages": _json_values | st.just([{"role": "user", "content": "x"}]),
        "max_tokens": _json_values | st.integers(1, 10),
        "group": _json_values,
        "check": _json_values
        | st.just({"type": "contains", "values": ["x"]})
        | st.fixed_dictionaries(
            {"type": st.sampled_from(["json_schema", "tool_call"])},
            optional={"schema": _schemas, "values": _json_values, "name": _json_values},
        ),
        "response_format": _json_values
        | st.fixed_dictionaries(
            {
                "type": st.sampled_from(["json_schema", "json_object"]),
                "json_schema": st.fixed_dictionaries({"name": st.just("r"), "schema": _schemas}),
            }
        ),
        "tools": _json_values
        | st.lists(
            st.fixed_dictionaries(
                {
                    "type": st.just("function"),
                    "function": st.fixed_dictionaries(
                        {"name": st.sampled_from(["f", "g"])}, optional={"parameters": _schemas}
                    ),
                }
            ),
            max_size=2,
        ),
        "tool_choice": _json_values | st.sampled_from(["auto", {"type": "function", "function": {"name": "f"}}]),
    },
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_case_like.map(json.dumps) | st.text(max_size=30), min_size=1, max_size=4))
def test_any_file_loads_or_fails_with_a_located_workload_error(tmp_path: Path, lines: list[str]) -> None:
    spec = write(tmp_path, [line.replace("\n", " ").replace("\r", " ") for line in lines])
    try:
        load_workload(spec)
    except WorkloadError as exc:
        assert str(exc).startswith(spec) and "\n" not in str(exc)


def test_structured_fields_are_chat_only_and_round_trip(tmp_path: Path) -> None:
    from specharness.traffic.workloads import case_to_dict

    spec = write(
        tmp_path,
        [
            '{"id": "a", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, '
            '"tools": [{"type": "function", "function": {"name": "f"}}], '
            '"tool_choice": {"type": "function", "function": {"name": "f"}}, "check": {"type": "tool_call"}}',
            '{"id": "b", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, '
            '"response_format": {"type": "json_object"}}',
        ],
    )
    a, b = load_workload(spec).cases
    assert a.tools == ({"type": "function", "function": {"name": "f"}},) and a.response_format is None
    assert b.response_format == {"type": "json_object"} and b.tools is None and b.tool_choice is None
    assert case_to_dict(a)["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert set(case_to_dict(b)) == {"id", "max_tokens", "group", "messages", "response_format"}
    with pytest.raises(WorkloadError, match=r":1: field 'tool_choice' needs a chat case"):
        load_workload(write(tmp_path, ['{"id": "c", "prompt": "p", "max_tokens": 1, "tool_choice": "auto"}']))


def test_interleave_covers_every_group_in_any_prefix() -> None:
    from specharness.traffic.workloads import interleave_by_group

    cases = load_workload("copy").cases
    order = interleave_by_group(cases)
    assert sorted(c.id for c in order) == sorted(c.id for c in cases)
    assert {c.group for c in order[:3]} == {"repeat", "extract", "code-edit"}
