"""Structured answers: request fields (``response_format``, ``tools``, ``tool_choice``) and their two rubrics.

:func:`parse_response_format`, :func:`parse_tools` and :func:`parse_tool_choice` validate a case's fields at load;
:func:`parse_structured_check` builds the ``json_schema`` (:class:`JsonSchemaCheck`) and ``tool_call``
(:class:`ToolCallCheck`) checks, and :func:`bind_check` ties a check to its case's schemas.
Fields, checks, value paths and result details: docs/workloads.md#structured-answers.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from specharness._errors import WorkloadError
from specharness.traffic.basic_checks import Check, CheckResult

__all__ = [
    "JsonSchemaCheck",
    "ToolCallCheck",
    "bind_check",
    "format_path",
    "parse_json_answer",
    "parse_response_format",
    "parse_structured_check",
    "parse_tool_choice",
    "parse_tools",
    "parse_value_path",
]

TOOL_CHOICE_MODES = ("none", "auto", "required")

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_PATH = re.compile(r"(?:[^.\[\]]+|\[\d+\])(?:\.[^.\[\]]+|\[\d+\])*")
_PATH_TOKEN = re.compile(r"\[(\d+)\]|([^.\[\]]+)")
_SHOW_CHARS = 60

PathToken = str | int


# ---------------------------------------------------------------------------------------------------------- schemas


def _one_line(text: str, limit: int = 160) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _refs_outside(node: Any) -> str | None:
    """The first ``$ref`` that does not point inside the schema, if any."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            return ref
        return next((r for r in map(_refs_outside, node.values()) if r is not None), None)
    if isinstance(node, list):
        return next((r for r in map(_refs_outside, node) if r is not None), None)
    return None


def _validator(schema: Any, where: str, name: str) -> Any:
    """A ``jsonschema`` validator for ``schema``, or a WorkloadError naming field ``name``."""
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import Draft202012Validator, validator_for

    if not isinstance(schema, dict):
        raise WorkloadError(f"{where}: field '{name}' must be a JSON schema object")
    cls: Any = Draft202012Validator
    if "$schema" in schema:
        dialect = schema["$schema"]
        found = validator_for(schema, default=None) if isinstance(dialect, str) else None  # type: ignore[arg-type]
        if found is None:
            raise WorkloadError(
                f"{where}: field '{name}.$schema' {_show(dialect)} is not a JSON Schema draft "
                "that jsonschema knows; leave it out for draft 2020-12"
            )
        cls = found
    outside = _refs_outside(schema)
    if outside is not None:
        raise WorkloadError(
            f"{where}: field '{name}' has $ref {_show(outside)}; only references inside the schema "
            "('#/...') are supported"
        )
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        at = format_path(exc.absolute_path)
        raise WorkloadError(
            f"{where}: field '{name}' is not a valid JSON schema (at {at}: {_one_line(exc.message)})"
        ) from None
    return cls(schema)


def _schema_error(validator: Any, instance: Any) -> tuple[str, str] | None:
    """(path, message) of the most relevant violation, or None when ``instance`` is valid."""
    from jsonschema.exceptions import best_match
    from referencing.exceptions import Unresolvable

    try:
        error = best_match(validator.iter_errors(instance))
    except Unresolvable as exc:  # a dangling local $ref: the rubric cannot be applied, so the answer is not passed
        return "(schema)", f"cannot resolve a $ref ({_one_line(str(exc), 80)})"
    if error is None:
        return None
    return format_path(error.absolute_path), _one_line(error.message)


# ------------------------------------------------------------------------------------------------------ value paths


def parse_value_path(path: str) -> tuple[PathToken, ...] | None:
    """``"items[0].quantity"`` -> ``("items", 0, "quantity")``; None when the path is malformed."""
    if not isinstance(path, str) or _PATH.fullmatch(path) is None:
        return None
    return tuple(int(index) if index else key for index, key in _PATH_TOKEN.findall(path))


def format_path(tokens: Sequence[PathToken] | Any) -> str:
    """The path syntax of ``values`` (``items[0].quantity``); ``(root)`` for the whole value."""
    out = ""
    for token in tokens:
        out += f"[{token}]" if isinstance(token, int) else (f".{token}" if out else str(token))
    return out or "(root)"


def _lookup(value: Any, tokens: tuple[PathToken, ...]) -> tuple[bool, Any]:
    for token in tokens:
        if isinstance(token, int):
            if not isinstance(value, list) or token >= len(value):
                return False, None
            value = value[token]
        else:
            if not isinstance(value, dict) or token not in value:
                return False, None
            value = value[token]
    return True, value


def _same(actual: Any, expected: Any) -> bool:
    """JSON equality: booleans only equal booleans, numbers by value, containers element by element."""
    if isinstance(actual, bool) or isinstance(expected, bool):
        return isinstance(actual, bool) and isinstance(expected, bool) and actual == expected
    if isinstance(actual, int | float) and isinstance(expected, int | float):
        return actual == expected
    if isinstance(actual, list) and isinstance(expected, list):
        return len(actual) == len(expected) and all(_same(a, e) for a, e in zip(actual, expected, strict=True))
    if isinstance(actual, dict) and isinstance(expected, dict):
        return actual.keys() == expected.keys() and all(_same(actual[k], expected[k]) for k in expected)
    if actual is None or expected is None:
        return actual is None and expected is None
    return isinstance(actual, str) and isinstance(expected, str) and actual == expected


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _SHOW_CHARS else text[: _SHOW_CHARS - 3] + "..."


def _parse_values(raw: Any, where: str) -> tuple[tuple[str, Any], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise WorkloadError(
            f'{where}: check.values must be an object mapping a path like "items[0].quantity" to '
            "the value expected there"
        )
    for path in raw:
        if parse_value_path(path) is None:
            raise WorkloadError(
                f"{where}: check.values path {_show(path)} is malformed; use keys separated by '.' "
                'and list positions as [n], e.g. "items[0].quantity"'
            )
    return tuple((path, copy.deepcopy(value)) for path, value in raw.items())


def _subschema(schema: Any, tokens: tuple[PathToken, ...]) -> tuple[Any, str | None]:
    """(the schema that applies at ``tokens``, or None where it cannot be followed simply; the key it rules out)."""
    node = schema
    for token in tokens:
        if not isinstance(node, dict) or any(
            k in node
            for k in ("$ref", "$dynamicRef", "anyOf", "oneOf", "allOf", "if", "not", "patternProperties", "prefixItems")
        ):
            return None, None
        if isinstance(token, int):
            node = node.get("items")
            continue
        properties = node.get("properties")
        if isinstance(properties, dict) and token in properties:
            node = properties[token]
        elif node.get("additionalProperties") is False:
            return None, token
        else:
            node = node.get("additionalProperties")
    return node, None


def _check_values_fit(values: tuple[tuple[str, Any], ...], validator: Any, where: str) -> None:
    """A path the schema rules out, or an expected value it rules out there, is a rubric error."""
    for path, expected in values:
        tokens = parse_value_path(path)
        assert tokens is not None  # checked when the values were parsed
        node, ruled_out = _subschema(validator.schema, tokens)
        if ruled_out is not None:
            raise WorkloadError(
                f"{where}: check.values path {_show(path)} cannot occur: the schema allows no key "
                f"{_show(ruled_out)} there"
            )
        if isinstance(node, dict | bool) and _refs_inside(node) is False:
            problem = _schema_error(type(validator)(node), expected)
            if problem is not None:
                raise WorkloadError(
                    f"{where}: check.values[{_show(path)}] = {_show(expected)} does not fit the schema "
                    f"there ({problem[1]})"
                )


def _refs_inside(node: Any) -> bool:
    if isinstance(node, dict):
        return "$ref" in node or "$dynamicRef" in node or any(_refs_inside(v) for v in node.values())
    if isinstance(node, list):
        return any(_refs_inside(v) for v in node)
    return False


# ----------------------------------------------------------------------------------------------------------- answers


def parse_json_answer(text: str) -> tuple[Any, str | None]:
    """(value, None) when ``text`` is one JSON value with at most JSON whitespace around it, else (None, reason)."""

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    try:
        return json.loads(text, parse_constant=no_constant), None
    except json.JSONDecodeError as exc:
        return None, f"not JSON ({exc.msg} at char {exc.pos})"
    except (ValueError, RecursionError) as exc:
        return None, f"not JSON ({_one_line(str(exc), 80)})"


def _match_values(value: Any, expected: tuple[tuple[str, Any], ...]) -> str | None:
    for path, want in expected:
        tokens = parse_value_path(path)
        assert tokens is not None
        found, got = _lookup(value, tokens)
        if not found:
            return f"value at {path} is missing, expected {_show(want)}"
        if not _same(got, want):
            return f"value at {path} is {_show(got)}, expected {_show(want)}"
    return None


def _judge(text: str, validator: Any, expected: tuple[tuple[str, Any], ...], what: str) -> CheckResult:
    value, problem = parse_json_answer(text)
    if problem is not None:
        return CheckResult(False, f"{what}{problem}")
    violation = _schema_error(validator, value)
    if violation is not None:
        return CheckResult(False, f"{what}schema: {violation[0]}: {violation[1]}")
    problem = _match_values(value, expected)
    if problem is not None:
        return CheckResult(False, f"{what}{problem}")
    return CheckResult(True, f"{what}valid JSON, {len(expected)} value{'s' if len(expected) != 1 else ''} match")


@dataclass(frozen=True, slots=True)
class JsonSchemaCheck(Check):
    """The answer text is JSON, valid under a schema, with expected values; ``type`` is ``"json_schema"``."""

    expected: tuple[tuple[str, Any], ...] = ()
    schema: dict[str, Any] | None = None  # the check's own schema (written back by to_dict)
    validator: Any = field(default=None, compare=False, repr=False)  # for the schema in force, set at load

    def evaluate(self, text: str) -> CheckResult:
        if self.validator is None:
            return CheckResult(False, "no schema to check against (check not bound to its case)")
        return _judge(text, self.validator, self.expected, "")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "json_schema"}
        if self.schema is not None:
            out["schema"] = copy.deepcopy(self.schema)
        if self.expected:
            out["values"] = {path: copy.deepcopy(value) for path, value in self.expected}
        return out


@dataclass(frozen=True, slots=True)
class ToolCallCheck(Check):
    """The response called a function with valid arguments and expected values; ``type`` is ``"tool_call"``."""

    expected: tuple[tuple[str, Any], ...] = ()
    name: str | None = None  # as written in the check (written back by to_dict)
    function: str | None = None  # the function expected: ``name``, else the one tool_choice forces; set at load
    validator: Any = field(default=None, compare=False, repr=False)  # for that function's parameters, set at load

    def evaluate(self, text: str) -> CheckResult:
        return self.evaluate_response(text, ())

    def evaluate_response(self, text: str, tool_calls: Sequence[Mapping[str, Any]] = ()) -> CheckResult:
        if self.function is None or self.validator is None:
            return CheckResult(False, "no function to expect (check not bound to its case)")
        if not tool_calls:
            return CheckResult(False, "no tool call")
        call = next((c for c in tool_calls if c.get("name") == self.function), None)
        if call is None:
            return CheckResult(False, f"wrong function {tool_calls[0].get('name')!r}, expected {self.function!r}")
        arguments = call.get("arguments")
        return _judge(arguments if isinstance(arguments, str) else "", self.validator, self.expected, "arguments ")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "tool_call"}
        if self.name is not None:
            out["name"] = self.name
        if self.expected:
            out["values"] = {path: copy.deepcopy(value) for path, value in self.expected}
        return out


def parse_structured_check(raw: dict[str, Any], where: str) -> Check:
    """Validate a json_schema or tool_call check dict; :func:`bind_check` later ties it to its case's schemas."""
    kind = raw.get("type")
    allowed = {"type", "values", "schema"} if kind == "json_schema" else {"type", "values", "name"}
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise WorkloadError(
            f"{where}: check.{unknown[0]} is not a field of a {kind} check; allowed: "
            f"{', '.join(sorted(allowed - {'type'}))}"
        )
    values = _parse_values(raw.get("values"), where)
    if kind == "json_schema":
        schema = raw.get("schema")
        validator = None if schema is None else _validator(schema, where, "check.schema")
        own = None if schema is None else copy.deepcopy(schema)
        if validator is not None:
            _check_values_fit(values, validator, where)
        return JsonSchemaCheck(type="json_schema", expected=values, schema=own, validator=validator)
    name = raw.get("name")
    if name is not None and (not isinstance(name, str) or not name):
        raise WorkloadError(f"{where}: check.name must be the name of one of the case's tools")
    return ToolCallCheck(type="tool_call", expected=values, name=name)


# ------------------------------------------------------------------------------------------------------ case fields


def _only_keys(obj: dict[str, Any], allowed: set[str], where: str, name: str) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise WorkloadError(
            f"{where}: field '{name}.{unknown[0]}' is not allowed; allowed: {', '.join(sorted(allowed))}"
        )


def parse_response_format(raw: Any, where: str) -> dict[str, Any]:
    """Validate a case's ``response_format`` (json_schema with a valid schema, or json_object); return a copy."""
    if not isinstance(raw, dict) or raw.get("type") not in ("json_schema", "json_object"):
        raise WorkloadError(
            f"{where}: field 'response_format' must be an object with type \"json_schema\" "
            '(and a json_schema object) or "json_object"'
        )
    if raw["type"] == "json_object":
        _only_keys(raw, {"type"}, where, "response_format")
        return {"type": "json_object"}
    _only_keys(raw, {"type", "json_schema"}, where, "response_format")
    spec = raw.get("json_schema")
    if not isinstance(spec, dict):
        raise WorkloadError(f"{where}: field 'response_format.json_schema' must be an object with name and schema")
    _only_keys(spec, {"name", "schema", "strict", "description"}, where, "response_format.json_schema")
    if not isinstance(spec.get("name"), str) or not _NAME.fullmatch(spec["name"]):
        raise WorkloadError(
            f"{where}: field 'response_format.json_schema.name' must be 1 to 64 letters, digits, _ or -"
        )
    if "schema" not in spec:
        raise WorkloadError(f"{where}: field 'response_format.json_schema.schema' is missing")
    _validator(spec["schema"], where, "response_format.json_schema.schema")
    if "strict" in spec and not isinstance(spec["strict"], bool):
        raise WorkloadError(f"{where}: field 'response_format.json_schema.strict' must be true or false")
    if "description" in spec and not isinstance(spec["description"], str):
        raise WorkloadError(f"{where}: field 'response_format.json_schema.description' must be a string")
    return copy.deepcopy(raw)


def parse_tools(raw: Any, where: str) -> tuple[dict[str, Any], ...]:
    """Validate a case's ``tools`` (functions with unique names and valid parameter schemas); return copies."""
    if not isinstance(raw, list) or not raw:
        raise WorkloadError(f"{where}: field 'tools' must be a non-empty list of {{type: function, function}} objects")
    seen: set[str] = set()
    for i, tool in enumerate(raw):
        name = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("function"), dict):
            raise WorkloadError(f'{where}: field \'{name}\' must be {{"type": "function", "function": {{...}}}}')
        _only_keys(tool, {"type", "function"}, where, name)
        function = tool["function"]
        _only_keys(function, {"name", "description", "parameters", "strict"}, where, f"{name}.function")
        fname = function.get("name")
        if not isinstance(fname, str) or not _NAME.fullmatch(fname):
            raise WorkloadError(f"{where}: field '{name}.function.name' must be 1 to 64 letters, digits, _ or -")
        if fname in seen:
            raise WorkloadError(f"{where}: field '{name}.function.name' repeats {fname!r}; tool names must be unique")
        seen.add(fname)
        if "parameters" in function:
            _validator(function["parameters"], where, f"{name}.function.parameters")
        if "description" in function and not isinstance(function["description"], str):
            raise WorkloadError(f"{where}: field '{name}.function.description' must be a string")
        if "strict" in function and not isinstance(function["strict"], bool):
            raise WorkloadError(f"{where}: field '{name}.function.strict' must be true or false")
    return tuple(copy.deepcopy(tool) for tool in raw)


def parse_tool_choice(raw: Any, tools: tuple[dict[str, Any], ...] | None, where: str) -> str | dict[str, Any]:
    """Validate a case's ``tool_choice`` against its tools; return a copy."""
    if tools is None:
        raise WorkloadError(f"{where}: field 'tool_choice' needs the case to carry 'tools'")
    if isinstance(raw, str):
        if raw not in TOOL_CHOICE_MODES:
            raise WorkloadError(
                f"{where}: field 'tool_choice' {raw!r} must be none, auto, required or a function object"
            )
        return raw
    function = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(raw, dict) or raw.get("type") != "function" or not isinstance(function, dict):
        raise WorkloadError(
            f"{where}: field 'tool_choice' must be none, auto, required or "
            '{"type": "function", "function": {"name": ...}}'
        )
    _only_keys(raw, {"type", "function"}, where, "tool_choice")
    _only_keys(function, {"name"}, where, "tool_choice.function")
    names = [t["function"]["name"] for t in tools]
    if function.get("name") not in names:
        raise WorkloadError(
            f"{where}: field 'tool_choice.function.name' {_show(function.get('name'))} is not one of "
            f"the case's tools ({', '.join(names)})"
        )
    return copy.deepcopy(raw)


def bind_check(
    check: Check,
    *,
    response_format: dict[str, Any] | None,
    tools: tuple[dict[str, Any], ...] | None,
    tool_choice: str | dict[str, Any] | None,
    where: str,
) -> Check:
    """Tie a json_schema or tool_call check to the schema it judges by; other checks are returned unchanged."""
    if isinstance(check, JsonSchemaCheck):
        if check.schema is not None:
            return check
        spec = (response_format or {}).get("json_schema")
        if not isinstance(spec, dict) or "schema" not in spec:
            raise WorkloadError(
                f"{where}: a json_schema check needs check.schema or a response_format of type "
                "json_schema to take the schema from"
            )
        validator = _validator(spec["schema"], where, "response_format.json_schema.schema")
        _check_values_fit(check.expected, validator, where)
        return replace(check, validator=validator)
    if isinstance(check, ToolCallCheck):
        if tools is None:
            raise WorkloadError(f"{where}: a tool_call check needs the case to carry 'tools'")
        forced = tool_choice.get("function", {}).get("name") if isinstance(tool_choice, dict) else None
        name = check.name if check.name is not None else forced
        if name is None:
            raise WorkloadError(f"{where}: a tool_call check needs check.name, or a tool_choice that names a function")
        by_name = {t["function"]["name"]: t["function"] for t in tools}
        if name not in by_name:
            raise WorkloadError(f"{where}: check.name {name!r} is not one of the case's tools ({', '.join(by_name)})")
        parameters = by_name[name].get("parameters", {"type": "object"})
        validator = _validator(parameters, where, "parameters")
        _check_values_fit(check.expected, validator, where)
        return replace(check, function=name, validator=validator)
    return check
