"""Structured cases: response_format / tools / tool_choice in workloads, and the json_schema and tool_call checks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from specharness import WorkloadError
from specharness.traffic.checks import parse_check
from specharness.traffic.client import Sampling, build_body
from specharness.traffic.structured import (
    JsonSchemaCheck,
    ToolCallCheck,
    format_path,
    parse_json_answer,
    parse_value_path,
)
from specharness.traffic.workloads import Case, case_to_dict, load_workload, parse_case

# The right answer to every built-in structured case, written by hand from its prompt: JSON text for json_schema
# cases, (function, arguments text) for tool_call cases.
REFERENCES: dict[str, Any] = {
    "order-bakery": {
        "customer": {"name": "Mara Quill", "email": "mara.quill@example.org"},
        "items": [{"sku": "TB-118", "quantity": 3}, {"sku": "PL-007", "quantity": 12}],
        "delivery_date": "2026-03-14",
        "address": {"street": "14 Harbour Lane", "city": "Karrow", "postcode": "KR2 9PX"},
        "shipping": "express",
    },
    "order-chestnut": {
        "customer": {"name": "Tomas Reyes", "email": "tomas.reyes@example.net"},
        "items": [{"sku": "CH-450", "quantity": 5}],
        "delivery_date": "2026-11-02",
        "address": {"street": "7 Market Square", "city": "Hollin", "postcode": "HL4 1AB"},
        "shipping": "standard",
    },
    "order-beads": {
        "customer": {"name": "Ana Lund", "email": "ana.lund@example.com"},
        "items": [{"sku": "BG-031", "quantity": 2}, {"sku": "SS-210", "quantity": 4}],
        "delivery_date": "2026-07-19",
        "address": {"street": "3 Wren Road", "city": "Elsby", "postcode": "EL9 6QT"},
        "shipping": "pickup",
    },
    "order-lemon": {
        "customer": {"name": "Ruth Okafor", "email": "ruth.okafor@example.org"},
        "items": [{"sku": "LT-900", "quantity": 1}, {"sku": "CP-115", "quantity": 6}],
        "delivery_date": "2026-04-30",
        "address": {"street": "22 Ferry Street", "city": "Elsby", "postcode": "EL2 3RS"},
        "shipping": "express",
    },
    "record-ferry": {
        "vessel": "Gull Wing",
        "destination": "Elsby",
        "departs": "07:15",
        "bicycles_free": True,
        "capacity": 240,
        "day": "saturday",
    },
    "record-book": {"title": "Tide Clocks", "author": "Ines Faro", "year": 2011, "format": "paperback", "pages": 312},
    "record-flight": {"flight": "KL 1402", "origin": "AMS", "destination": "OSL", "seats": 2, "cabin": "business"},
    "record-room": {
        "guest": "Ines Faro",
        "arrival": "2026-08-21",
        "nights": 3,
        "room_type": "double",
        "breakfast": False,
    },
    "meeting-budget": (
        "book_meeting",
        {
            "topic": "Q3 budget review",
            "attendees": ["Ana Lund", "Ruth Okafor"],
            "date": "2026-05-06",
            "start_time": "09:30",
            "duration_minutes": 45,
            "room": "Linden",
        },
    ),
    "meeting-launch": (
        "book_meeting",
        {
            "topic": "Ferry app launch",
            "attendees": ["Tomas Reyes", "Mara Quill", "Ines Faro"],
            "date": "2026-06-11",
            "start_time": "14:00",
            "duration_minutes": 60,
            "room": "Sorrel",
        },
    ),
    "meeting-interview": (
        "book_meeting",
        {
            "topic": "Night market survey interview",
            "attendees": ["Bruno Vale"],
            "date": "2026-09-02",
            "start_time": "11:15",
            "duration_minutes": 30,
            "room": "Amber",
        },
    ),
    "meeting-retro": (
        "book_meeting",
        {
            "topic": "Sprint 12 retro",
            "attendees": ["Ana Lund", "Bruno Vale"],
            "date": "2026-10-20",
            "start_time": "16:45",
            "duration_minutes": 90,
            "room": "Vale",
        },
    ),
    "pair-timetable": (
        "send_email",
        {
            "to": ["mara.quill@example.org", "tomas.reyes@example.net"],
            "subject": "Ferry timetable for June",
            "body": "The 07:15 ferry to Elsby runs every Saturday in June.",
        },
    ),
    "pair-invoice": (
        "send_email",
        {
            "to": ["ruth.okafor@example.org"],
            "subject": "Invoice 2026-0412",
            "body": "Invoice 2026-0412 for 6 copper pots is attached.",
        },
    ),
    "pair-bolts": (
        "create_reminder",
        {"text": "check the footbridge bolts", "date": "2026-12-01", "time": "08:00", "priority": "high"},
    ),
    "pair-lemon": (
        "create_reminder",
        {"text": "water the lemon tree", "date": "2026-07-04", "time": "05:00", "priority": "low"},
    ),
}

STRUCTURED = {case.id: case for case in load_workload("structured").cases}


def judge(case: Case, answer: Any) -> tuple[bool, str]:
    """Run a case's check on an answer written as REFERENCES writes it."""
    assert case.check is not None
    if isinstance(answer, tuple):
        name, arguments = answer
        result = case.check.evaluate_response("", [{"name": name, "arguments": json.dumps(arguments)}])
    else:
        result = case.check.evaluate_response(json.dumps(answer, indent=2))
    return result.correct, result.detail


def _corrupt(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    return value + "x"


def _set(obj: Any, path: str, value: Any) -> None:
    tokens = parse_value_path(path)
    assert tokens
    for token in tokens[:-1]:
        obj = obj[token]
    obj[tokens[-1]] = value


# ------------------------------------------------------------------------------------------------ built-in suite


def test_structured_suite_shape() -> None:
    assert set(REFERENCES) == set(STRUCTURED)
    assert 12 <= len(STRUCTURED) <= 16
    groups = {case.group for case in STRUCTURED.values()}
    assert groups == {"json-extract", "json-record", "tool-call", "tool-pair"}
    for case in STRUCTURED.values():
        if case.group.startswith("json"):
            assert isinstance(case.check, JsonSchemaCheck) and case.response_format is not None and case.tools is None
            assert case.response_format["json_schema"]["strict"] is True
        else:
            assert isinstance(case.check, ToolCallCheck) and case.tools is not None and case.response_format is None
            assert isinstance(case.tool_choice, dict) and case.check.function == case.tool_choice["function"]["name"]
        assert 128 <= case.max_tokens <= 192


@pytest.mark.parametrize("case_id", sorted(REFERENCES))
def test_reference_answer_passes_and_corrupted_answers_fail(case_id: str) -> None:
    case = STRUCTURED[case_id]
    answer = REFERENCES[case_id]
    ok, detail = judge(case, answer)
    assert ok, detail
    assert isinstance(case.check, JsonSchemaCheck | ToolCallCheck) and case.check.expected
    arguments = answer[1] if isinstance(answer, tuple) else answer

    # A wrong copied value: the first expected value changed, same JSON type.
    path, want = case.check.expected[0]
    wrong = json.loads(json.dumps(arguments))
    _set(wrong, path, _corrupt(want))
    ok, detail = judge(case, (answer[0], wrong) if isinstance(answer, tuple) else wrong)
    assert not ok and f"value at {path} is " in detail and "expected" in detail, detail

    # A missing required field fails the schema.
    missing = dict(arguments)
    missing.pop(next(iter(missing)))
    ok, detail = judge(case, (answer[0], missing) if isinstance(answer, tuple) else missing)
    assert not ok and "schema: (root): " in detail and "is a required property" in detail, detail


@pytest.mark.parametrize("case_id", sorted(REFERENCES))
def test_expected_values_are_written_in_the_prompt(case_id: str) -> None:
    # The point of the suite: the answer is copied from the prompt, so prompt lookup has something to draft from.
    case = STRUCTURED[case_id]
    assert case.messages is not None and isinstance(case.check, JsonSchemaCheck | ToolCallCheck)
    prompt = case.messages[-1]["content"].lower()
    for path, value in case.check.expected:
        if isinstance(value, str | int) and not isinstance(value, bool):
            assert str(value).lower() in prompt, (path, value)


def test_builtin_bodies_carry_the_structured_fields() -> None:
    order, meeting = STRUCTURED["order-bakery"], STRUCTURED["meeting-budget"]
    body = build_body(order, "m", Sampling())
    assert body["response_format"] == order.response_format and "tools" not in body and body["stream"] is True
    body = build_body(meeting, "m", Sampling())
    assert body["tools"] == list(meeting.tools or ()) and "response_format" not in body
    assert body["tool_choice"] == {"type": "function", "function": {"name": "book_meeting"}}
    body["tools"][0]["function"]["name"] = "changed"  # the body is a copy: the case stays as loaded
    assert meeting.tools is not None and meeting.tools[0]["function"]["name"] == "book_meeting"


def test_case_to_dict_round_trips_structured_cases(tmp_path: Path) -> None:
    own = {
        "id": "own",
        "messages": [{"role": "user", "content": "x"}],
        "max_tokens": 8,
        "response_format": {"type": "json_object"},
        "check": {
            "type": "json_schema",
            "schema": {"type": "object", "properties": {"n": {"type": "integer"}}},
            "values": {"n": 1},
        },
    }
    named = {
        "id": "named",
        "messages": [{"role": "user", "content": "x"}],
        "max_tokens": 8,
        "tool_choice": "auto",
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "check": {"type": "tool_call", "name": "f"},
    }
    cases = [*STRUCTURED.values(), parse_case(own, "t:1"), parse_case(named, "t:2")]
    path = tmp_path / "again.jsonl"
    path.write_text("".join(json.dumps(case_to_dict(c)) + "\n" for c in cases))
    again = load_workload(str(path)).cases
    assert [case_to_dict(c) for c in again] == [case_to_dict(c) for c in cases]
    assert case_to_dict(again[-2])["check"]["schema"] == own["check"]["schema"]  # type: ignore[index]
    assert "name" not in case_to_dict(STRUCTURED["meeting-budget"])["check"]  # taken from tool_choice, not written
    for before, after in zip(cases, again, strict=True):
        answer = REFERENCES.get(before.id, {"n": 1})
        assert judge(before, answer) == judge(after, answer)


def test_plain_workloads_load_without_importing_jsonschema() -> None:
    code = (
        "import sys; from specharness.traffic.workloads import load_workload; "
        "[load_workload(n) for n in ('copy', 'transform', 'free', 'abstain')]; "
        "print('jsonschema' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------------------------------------------ checkers

ORDER = STRUCTURED["order-bakery"]
GOOD_ORDER = REFERENCES["order-bakery"]


def order_with(changes: dict[str, Any] | None = None) -> str:
    obj = json.loads(json.dumps(GOOD_ORDER))
    for path, value in (changes or {}).items():
        _set(obj, path, value)
    return json.dumps(obj)


def order_result(text: str) -> tuple[bool, str]:
    assert ORDER.check is not None
    result = ORDER.check.evaluate(text)
    return result.correct, result.detail


def test_json_schema_whitespace_around_is_allowed_other_text_is_not() -> None:
    text = json.dumps(GOOD_ORDER)
    assert order_result(text) == (True, "valid JSON, 9 values match")
    assert order_result(f" \n\t{text}\r\n ")[0]
    for wrapped in (f"```json\n{text}\n```", f"Here is the order: {text}", f"{text} Done.", f"{text}\n{text}"):
        ok, detail = order_result(wrapped)
        assert not ok and detail.startswith("not JSON ("), detail
    assert order_result("") == (False, "not JSON (Expecting value at char 0)")


def test_json_schema_failures_say_which_part_failed() -> None:
    cases = {
        order_with({"items[0].quantity": "3"}): "schema: items[0].quantity: '3' is not of type 'integer'",
        order_with({"shipping": "fast"}): "schema: shipping: 'fast' is not one of ['standard', 'express', 'pickup']",
        order_with({"customer.name": "Mara Q"}): 'value at customer.name is "Mara Q", expected "Mara Quill"',
        order_with(
            {"items": [{"sku": "TB-118", "quantity": 3}]}
        ): 'value at items[1].sku is missing, expected "PL-007"',
        order_with({"extra": 1}): "schema: (root): Additional properties are not allowed ('extra' was unexpected)",
        json.dumps([GOOD_ORDER]): "schema: (root): ",
    }
    for text, detail in cases.items():
        ok, got = order_result(text)
        assert not ok and got.startswith(detail), (got, detail)
    no_email = json.loads(order_with())
    del no_email["customer"]["email"]
    assert order_result(json.dumps(no_email)) == (False, "schema: customer: 'email' is a required property")


def test_json_values_compare_as_json() -> None:
    check = parse_check(
        {"type": "json_schema", "schema": {}, "values": {"n": 3, "b": True, "s": "A", "l": [1, "x"], "z": None}}, "t"
    )

    def ok(**obj: Any) -> bool:
        return check.evaluate(json.dumps({"n": 3, "b": True, "s": "A", "l": [1, "x"], "z": None} | obj)).correct

    assert ok() and ok(n=3.0)
    assert not ok(n=4) and not ok(n="3") and not ok(b=1) and not ok(s="a") and not ok(s="A ") and not ok(z=0)
    assert not ok(l=[1]) and not ok(l=[True, "x"])
    assert not check.evaluate('{"n": NaN}').correct and "NaN is not JSON" in check.evaluate('{"n": NaN}').detail


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "book_meeting",
            "parameters": {
                "type": "object",
                "properties": {"room": {"type": "string"}, "minutes": {"type": "integer"}},
                "required": ["room", "minutes"],
                "additionalProperties": False,
            },
        },
    },
    {"type": "function", "function": {"name": "cancel"}},
]


def tool_case(check: dict[str, Any], tool_choice: Any = None) -> Case:
    obj: dict[str, Any] = {
        "id": "t",
        "messages": [{"role": "user", "content": "book"}],
        "max_tokens": 8,
        "tools": TOOLS,
        "check": check,
    }
    if tool_choice is not None:
        obj["tool_choice"] = tool_choice
    return parse_case(obj, "f.jsonl:1")


FORCED = {"type": "function", "function": {"name": "book_meeting"}}


def test_tool_call_check_outcomes() -> None:
    case = tool_case({"type": "tool_call", "values": {"room": "Linden"}}, FORCED)
    assert case.check is not None

    def run(*calls: tuple[str, str], text: str = "") -> tuple[bool, str]:
        assert case.check is not None
        result = case.check.evaluate_response(text, [{"name": n, "arguments": a} for n, a in calls])
        return result.correct, result.detail

    good = '{"room": "Linden", "minutes": 45}'
    assert run(("book_meeting", good)) == (True, "arguments valid JSON, 1 value match")
    assert run(("cancel", "{}"), ("book_meeting", good))[0]  # the first call to the named function is checked
    assert run(("book_meeting", '{"room": "Amber", "minutes": 45}'), ("book_meeting", good)) == (
        False,
        'arguments value at room is "Amber", expected "Linden"',
    )
    assert run(text=good) == (False, "no tool call")  # JSON in the content is not a tool call
    assert run(("cancel", "{}")) == (False, "wrong function 'cancel', expected 'book_meeting'")
    assert run(("book_meeting", '{"room": "Linden"'))[1].startswith("arguments not JSON (")
    assert run(("book_meeting", '{"room": "Linden", "minutes": "45"}')) == (
        False,
        "arguments schema: minutes: '45' is not of type 'integer'",
    )
    assert case.check.evaluate(good) == case.check.evaluate_response(good, ())  # text alone: no tool call

    named = tool_case({"type": "tool_call", "name": "cancel"}, "auto")
    assert (
        named.check is not None and named.check.evaluate_response("", [{"name": "cancel", "arguments": "{}"}]).correct
    )
    # A function without parameters takes any JSON object... as jsonschema's {"type": "object"} says.
    assert not named.check.evaluate_response("", [{"name": "cancel", "arguments": "[]"}]).correct


def test_value_paths() -> None:
    assert parse_value_path("items[0].quantity") == ("items", 0, "quantity")
    assert parse_value_path("[2]") == (2,) and parse_value_path("a b.c") == ("a b", "c")
    for bad in ("", "a..b", ".a", "a.", "a[x]", "a[-1]", "a[0", 3):
        assert parse_value_path(bad) is None, bad  # type: ignore[arg-type]
    assert format_path(["items", 0, "quantity"]) == "items[0].quantity" and format_path([]) == "(root)"
    assert parse_json_answer(" [1] ") == ([1], None)


# ------------------------------------------------------------------------------------------------------ parsing

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "additionalProperties": False}
TOOL = [{"type": "function", "function": {"name": "f", "parameters": SCHEMA}}]


def rf(schema: Any) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "r", "schema": schema, "strict": True}}


def chat(**fields: Any) -> str:
    """A chat case line with these extra fields."""
    return json.dumps({"id": "a", "messages": [{"role": "user", "content": "x"}], "max_tokens": 8, **fields})


def raw(**fields: Any) -> str:
    """A raw-prompt case line with these extra fields."""
    return json.dumps({"id": "a", "prompt": "p", "max_tokens": 8, **fields})


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        (raw(response_format={"type": "json_object"}), "field 'response_format' needs a chat case"),
        (raw(tools=TOOL), "field 'tools' needs a chat case"),
        (chat(response_format={"type": "text"}), "field 'response_format' must be an object"),
        (chat(response_format={"type": "json_object", "schema": {}}), "field 'response_format.schema' is not allowed"),
        (chat(response_format={"type": "json_schema"}), "field 'response_format.json_schema'"),
        (
            chat(response_format={"type": "json_schema", "json_schema": {"schema": {}}}),
            "field 'response_format.json_schema.name'",
        ),
        (
            chat(response_format={"type": "json_schema", "json_schema": {"name": "r"}}),
            "field 'response_format.json_schema.schema' is missing",
        ),
        (
            chat(response_format=rf({"type": "strin"})),
            "field 'response_format.json_schema.schema' is not a valid JSON schema (at type: ",
        ),
        (chat(response_format=rf({"$ref": "https://example.org/s.json"})), "only references inside the schema"),
        (
            chat(response_format=rf({"$schema": "https://example.org/mine"})),
            "field 'response_format.json_schema.schema.$schema'",
        ),
        (chat(response_format=rf([])), "must be a JSON schema object"),
        (
            chat(response_format={"type": "json_schema", "json_schema": {"name": "r", "schema": {}, "strict": "yes"}}),
            "field 'response_format.json_schema.strict'",
        ),
        (chat(tools={}), "field 'tools' must be a non-empty list"),
        (chat(tools=[{"function": {"name": "f"}}]), "field 'tools[0]' must be"),
        (chat(tools=[{"type": "function", "function": {"name": "book meeting"}}]), "field 'tools[0].function.name'"),
        (
            chat(tools=[{"type": "function", "function": {"name": "f"}}] * 2),
            "field 'tools[1].function.name' repeats 'f'",
        ),
        (
            chat(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": 3}}}]),
            "field 'tools[0].function.parameters' is not a valid JSON schema",
        ),
        (
            chat(tools=[{"type": "function", "function": {"name": "f", "args": {}}}]),
            "field 'tools[0].function.args' is not allowed",
        ),
        (chat(tool_choice="auto"), "field 'tool_choice' needs the case to carry 'tools'"),
        (chat(tools=TOOL, tool_choice="sometimes"), "must be none, auto, required"),
        (
            chat(tools=TOOL, tool_choice={"type": "function", "function": {"name": "g"}}),
            "field 'tool_choice.function.name' \"g\" is not one of the case's tools (f)",
        ),
        (chat(check={"type": "json_schema"}), "needs check.schema or a response_format"),
        (
            chat(response_format={"type": "json_object"}, check={"type": "json_schema"}),
            "needs check.schema or a response_format of type json_schema",
        ),
        (chat(check={"type": "tool_call", "name": "f"}), "a tool_call check needs the case to carry 'tools'"),
        (
            chat(tools=TOOL, tool_choice="auto", check={"type": "tool_call"}),
            "needs check.name, or a tool_choice that names a function",
        ),
        (
            chat(tools=TOOL, check={"type": "tool_call", "name": "g"}),
            "check.name 'g' is not one of the case's tools (f)",
        ),
        (
            chat(tools=TOOL, check={"type": "tool_call", "name": "f", "values": {"a[x]": 1}}),
            'check.values path "a[x]" is malformed',
        ),
        (
            chat(tools=TOOL, check={"type": "tool_call", "name": "f", "values": {"m": 1}}),
            'check.values path "m" cannot occur: the schema allows no key "m" there',
        ),
        (
            chat(response_format=rf(SCHEMA), check={"type": "json_schema", "values": {"n": "3"}}),
            'check.values["n"] = "3" does not fit the schema there (\'3\' is not of type',
        ),
        (
            chat(response_format=rf(SCHEMA), check={"type": "json_schema", "values": ["n"]}),
            "check.values must be an object",
        ),
        (
            chat(response_format=rf(SCHEMA), check={"type": "json_schema", "name": "f"}),
            "check.name is not a field of a json_schema check",
        ),
        (
            chat(check={"type": "json_schema", "schema": {"type": "nope"}}),
            "field 'check.schema' is not a valid JSON schema",
        ),
    ],
)
def test_malformed_structured_fields_name_file_line_and_field(tmp_path: Path, line: str, fragment: str) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text('{"id": "ok", "prompt": "p", "max_tokens": 1}\n' + line + "\n")
    with pytest.raises(WorkloadError) as info:
        load_workload(str(path))
    message = str(info.value)
    assert message.startswith(f"{path}:2: ") and "\n" not in message and fragment in message, message


def test_user_file_with_structured_fields_loads(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    forced = {"type": "function", "function": {"name": "f"}}
    path.write_text(
        json.dumps(
            {
                "id": "j",
                "messages": [{"role": "user", "content": "x"}],
                "max_tokens": 8,
                "response_format": rf(SCHEMA),
                "check": {"type": "json_schema", "values": {"n": 2}},
            }
        )
        + "\n"
        + chat(id="t", tools=TOOL, tool_choice=forced, check={"type": "tool_call", "values": {"n": 2}})
        + "\n"
    )
    j, t = load_workload(str(path)).cases
    assert j.check is not None and j.check.evaluate('{"n": 2}').correct and not j.check.evaluate('{"n": 2.5}').correct
    assert t.check is not None and t.check.evaluate_response("", [{"name": "f", "arguments": '{"n": 2}'}]).correct
    assert build_body(t, "m", Sampling())["tool_choice"] == {"type": "function", "function": {"name": "f"}}
