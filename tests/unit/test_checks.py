import pytest

from specharness import WorkloadError
from specharness.traffic.checks import parse_check


def check(raw: dict, text: str) -> bool:
    return parse_check(raw, "t").evaluate(text).correct


def test_exact_normalises_whitespace_and_case() -> None:
    assert check({"type": "exact", "value": "Hello  World"}, " hello world\n")
    assert not check({"type": "exact", "value": "Hello", "case_sensitive": True}, "hello")


def test_contains_needs_every_value() -> None:
    raw = {"type": "contains", "values": ["alpha", "beta"]}
    assert check(raw, "Alpha and BETA")
    result = parse_check(raw, "t").evaluate("alpha only")
    assert not result.correct and "beta" in result.detail


def test_regex() -> None:
    assert check({"type": "regex", "pattern": r"d\W*c\W*b"}, "d, c, b, a")
    assert not check({"type": "regex", "pattern": r"^x$"}, "y")


def test_json_keys_accepts_fenced_json_and_rejects_missing_keys() -> None:
    raw = {"type": "json_keys", "keys": ["name", "age"]}
    assert check(raw, 'Sure:\n```json\n{"name": "A", "age": 3}\n```')
    assert not check(raw, '{"name": "A"}')
    assert not check(raw, "{not json}")
    assert not check(raw, "no object here")


def test_abstains() -> None:
    assert check({"type": "abstains"}, "I’m sorry, I don't know that.")
    assert not check({"type": "abstains"}, "You had eggs.")
    assert check({"type": "abstains", "phrases": ["no idea"]}, "No idea!")


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("x", "check must be an object"),
        ({"type": "fuzzy"}, "check.type 'fuzzy' is unknown"),
        ({"type": "exact"}, "check.value"),
        ({"type": "contains", "values": []}, "check.values"),
        ({"type": "regex", "pattern": "("}, "not a valid regular expression"),
        ({"type": "json_keys", "keys": "name"}, "check.keys"),
        ({"type": "exact", "value": "a", "case_sensitive": "yes"}, "case_sensitive"),
        ({"type": "json_schema", "schema": {"type": "strin"}}, "field 'check.schema' is not a valid JSON schema"),
        ({"type": "json_schema", "schema": {}, "values": {"a..b": 1}}, 'check.values path "a..b" is malformed'),
        ({"type": "json_schema", "schema": {}, "keys": ["a"]}, "check.keys is not a field of a json_schema check"),
        ({"type": "tool_call", "name": 3}, "check.name must be the name of one of the case's tools"),
        ({"type": "tool_call", "values": "room"}, "check.values must be an object"),
    ],
)
def test_bad_checks_name_the_field(raw: object, fragment: str) -> None:
    with pytest.raises(WorkloadError, match=r"^f\.jsonl:3: ") as info:
        parse_check(raw, "f.jsonl:3")
    assert fragment in str(info.value)


def test_text_checks_judge_the_text_of_a_response_with_tool_calls() -> None:
    check = parse_check({"type": "contains", "values": ["done"]}, "t")
    calls = [{"name": "f", "arguments": "{}"}]
    assert check.evaluate_response("done", calls) == check.evaluate("done")
    assert not check.evaluate_response("", calls).correct


def test_json_schema_check_with_its_own_schema() -> None:
    check = parse_check(
        {"type": "json_schema", "schema": {"type": "object", "required": ["n"]}, "values": {"n": 2}}, "t"
    )
    assert check.evaluate(' {"n": 2}\n').correct
    assert check.evaluate('{"m": 2}').detail == "schema: (root): 'n' is a required property"
    assert check.evaluate('```json\n{"n": 2}\n```').detail.startswith("not JSON")
    assert check.to_dict() == {
        "type": "json_schema",
        "schema": {"type": "object", "required": ["n"]},
        "values": {"n": 2},
    }
