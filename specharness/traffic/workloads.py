"""Workload cases: the built-in suites (copy, transform, free, abstain, structured) and user JSONL files.

:func:`load_workloads` and :func:`load_workload` read workloads by name or path into :class:`Workload` objects of
:class:`Case`; :func:`parse_case` validates one case and :func:`case_to_dict` writes it back; :func:`turn_case_id`
and :func:`split_turn_id` name the turns of a replayed conversation. Fields: docs/workloads.md#a-case-field-by-field.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from specharness._errors import WorkloadError
from specharness.traffic import suites as _suites
from specharness.traffic.checks import Check, parse_check
from specharness.traffic.structured import bind_check, parse_response_format, parse_tool_choice, parse_tools

__all__ = [
    "BUILTIN_WORKLOADS",
    "MAX_TOKENS_LIMIT",
    "Case",
    "Workload",
    "case_to_dict",
    "interleave_by_group",
    "load_workload",
    "load_workloads",
    "parse_case",
    "split_turn_id",
    "turn_case_id",
    "warmup_cases",
]

BUILTIN_WORKLOADS = ("copy", "transform", "free", "abstain", "structured")
CASE_FIELDS = (
    "id",
    "messages",
    "prompt",
    "max_tokens",
    "group",
    "check",
    "response_format",
    "tools",
    "tool_choice",
    "turns",
)
STRUCTURED_FIELDS = ("response_format", "tools", "tool_choice")
MAX_TOKENS_LIMIT = 32768
_TURN_ID = re.compile(r"(.+)#t([1-9][0-9]*)")


@dataclass(frozen=True, slots=True)
class Case:
    """One request's content and rubric."""

    id: str
    max_tokens: int
    group: str
    messages: tuple[dict[str, str], ...] | None = None
    prompt: str | None = None
    check: Check | None = None
    response_format: dict[str, Any] | None = None  # chat only, like tools and tool_choice
    tools: tuple[dict[str, Any], ...] | None = None
    tool_choice: str | dict[str, Any] | None = None
    turns: tuple[str, ...] | None = None  # a replayed conversation: the user messages after the one in messages

    @property
    def endpoint(self) -> str:
        return "/v1/chat/completions" if self.messages is not None else "/v1/completions"

    @property
    def turn_count(self) -> int:
        """Requests the case sends: 1, or one per user turn of a replayed conversation."""
        return 1 + len(self.turns or ())


def turn_case_id(case_id: str, turn: int) -> str:
    """The one format of a replayed turn's case id: ``<case id>#t<turn>``, turns counted from 1."""
    if turn < 1:
        raise ValueError(f"turn {turn} must be 1 or more")
    return f"{case_id}#t{turn}"


def split_turn_id(case_id: str) -> tuple[str, int] | None:
    """``(conversation case id, turn)`` for a replayed turn's case id (:func:`turn_case_id`), else None."""
    match = _TURN_ID.fullmatch(case_id)
    return (match.group(1), int(match.group(2))) if match else None


@dataclass(frozen=True, slots=True)
class Workload:
    name: str
    cases: tuple[Case, ...]
    source: str  # "builtin" or the file path


def parse_case(obj: Any, where: str) -> Case:
    if not isinstance(obj, dict):
        raise WorkloadError(f"{where}: expected a JSON object with id, messages or prompt, max_tokens")
    case_id = obj.get("id")
    if not isinstance(case_id, str) or not case_id:
        raise WorkloadError(f"{where}: field 'id' must be a non-empty string")
    if split_turn_id(case_id) is not None:
        raise WorkloadError(
            f"{where}: field 'id' {case_id!r} ends in '#t<number>', which names the turns of a "
            "replayed conversation; choose another id"
        )
    unknown = set(obj) - set(CASE_FIELDS)
    if unknown:
        raise WorkloadError(f"{where}: unknown field {sorted(unknown)[0]!r}; allowed: {', '.join(CASE_FIELDS)}")
    messages, prompt = obj.get("messages"), obj.get("prompt")
    if (messages is None) == (prompt is None):
        raise WorkloadError(f"{where}: give exactly one of 'messages' (chat) or 'prompt' (raw completion)")
    if messages is not None:
        if not isinstance(messages, list) or not messages:
            raise WorkloadError(f"{where}: field 'messages' must be a non-empty list of {{role, content}} objects")
        for m in messages:
            if not (isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)):
                raise WorkloadError(f"{where}: each message needs string 'role' and 'content'")
            if m["role"] not in ("system", "user", "assistant"):
                raise WorkloadError(f"{where}: message role {m['role']!r} must be system, user or assistant")
    if prompt is not None and (not isinstance(prompt, str) or not prompt):
        raise WorkloadError(f"{where}: field 'prompt' must be a non-empty string")
    max_tokens = obj.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or not 1 <= max_tokens <= MAX_TOKENS_LIMIT:
        raise WorkloadError(f"{where}: field 'max_tokens' must be an integer from 1 to {MAX_TOKENS_LIMIT}")
    group = obj.get("group", "default")
    if not isinstance(group, str) or not group:
        raise WorkloadError(f"{where}: field 'group' must be a non-empty string")
    if prompt is not None:
        carried = next((name for name in STRUCTURED_FIELDS if obj.get(name) is not None), None)
        if carried is not None:
            raise WorkloadError(
                f"{where}: field {carried!r} needs a chat case ('messages'); a raw 'prompt' case cannot carry it"
            )
    response_format = (
        parse_response_format(obj["response_format"], where) if obj.get("response_format") is not None else None
    )
    tools = parse_tools(obj["tools"], where) if obj.get("tools") is not None else None
    tool_choice = parse_tool_choice(obj["tool_choice"], tools, where) if obj.get("tool_choice") is not None else None
    turns = _parse_turns(obj["turns"], messages, obj, where) if obj.get("turns") is not None else None
    check = parse_check(obj["check"], where) if obj.get("check") is not None else None
    if check is not None:
        check = bind_check(check, response_format=response_format, tools=tools, tool_choice=tool_choice, where=where)
    return Case(
        id=case_id,
        max_tokens=max_tokens,
        group=group,
        prompt=prompt,
        check=check,
        messages=tuple({"role": m["role"], "content": m["content"]} for m in messages) if messages else None,
        response_format=response_format,
        tools=tools,
        tool_choice=tool_choice,
        turns=turns,
    )


def _parse_turns(turns: Any, messages: Any, obj: dict[str, Any], where: str) -> tuple[str, ...]:
    """A replayed conversation's later user messages; ``messages`` was validated before."""
    if messages is None:
        raise WorkloadError(
            f"{where}: field 'turns' needs a chat case ('messages'); a raw 'prompt' case cannot be "
            "replayed turn by turn"
        )
    if not isinstance(turns, list) or not turns or not all(isinstance(t, str) and t.strip() for t in turns):
        raise WorkloadError(
            f"{where}: field 'turns' must be a non-empty list of non-blank strings (the later user messages)"
        )
    if messages[-1]["role"] != "user":
        raise WorkloadError(
            f"{where}: field 'turns' needs 'messages' to end with a user message (turn 1), not {messages[-1]['role']!r}"
        )
    if obj.get("tools") is not None or obj.get("tool_choice") is not None:
        raise WorkloadError(
            f"{where}: field 'turns' cannot go with 'tools' or 'tool_choice': a replayed tool call "
            "would need a tool result"
        )
    return tuple(turns)


def _read_file(path: Path) -> Workload:
    if not path.is_file():
        raise WorkloadError(
            f"workload file {path} not found; pass a JSONL file or one of {', '.join(BUILTIN_WORKLOADS)}"
        )
    cases: list[Case] = []
    seen: set[str] = set()
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None
    for number, line in enumerate(text.split("\n"), start=1):  # not splitlines(): U+2028 may sit inside a string
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise WorkloadError(f"{where}: not valid JSON ({exc}); one JSON object per line") from None
        case = parse_case(obj, where)
        if case.id in seen:
            raise WorkloadError(f"{where}: duplicate id {case.id!r}; ids must be unique within a workload")
        seen.add(case.id)
        cases.append(case)
    if not cases:
        raise WorkloadError(f"{path}: no cases; add one JSON object per line")
    return Workload(name=path.stem, cases=tuple(cases), source=str(path))


def warmup_cases() -> tuple[Case, ...]:
    """Neutral prompts for warmup rounds when a workload has no unmeasured case left (never measured)."""
    return tuple(parse_case(o, f"builtin:warmup:{o['id']}") for o in _suites.warmup_cases())


def load_workload(spec: str) -> Workload:
    """A built-in name or a path to a JSONL file."""
    if spec in BUILTIN_WORKLOADS:
        raw = _suites.builtin_cases(spec)
        return Workload(
            name=spec, cases=tuple(parse_case(o, f"builtin:{spec}:{o['id']}") for o in raw), source="builtin"
        )
    if spec.endswith(".jsonl") or "/" in spec:
        return _read_file(Path(spec))
    raise WorkloadError(
        f"unknown workload {spec!r}; use one of {', '.join(BUILTIN_WORKLOADS)} or a path to a .jsonl file"
    )


def load_workloads(specs: list[str]) -> list[Workload]:
    workloads = [load_workload(s) for s in specs]
    names = [w.name for w in workloads]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise WorkloadError(f"workload {dup!r} given twice; each workload name must be unique in a run")
    return workloads


def interleave_by_group(cases: tuple[Case, ...]) -> tuple[Case, ...]:
    """Round-robin over groups (first-seen order), so any prefix of the sequence covers every group."""
    by_group: dict[str, list[Case]] = {}
    for case in cases:
        by_group.setdefault(case.group, []).append(case)
    queues = list(by_group.values())
    out: list[Case] = []
    while any(queues):
        for queue in queues:
            if queue:
                out.append(queue.pop(0))
    return tuple(out)


def case_to_dict(case: Case) -> dict[str, Any]:
    out: dict[str, Any] = {"id": case.id, "max_tokens": case.max_tokens, "group": case.group}
    if case.messages is not None:
        out["messages"] = [dict(m) for m in case.messages]
    else:
        out["prompt"] = case.prompt
    if case.response_format is not None:
        out["response_format"] = copy.deepcopy(case.response_format)
    if case.tools is not None:
        out["tools"] = copy.deepcopy(list(case.tools))
    if case.tool_choice is not None:
        out["tool_choice"] = copy.deepcopy(case.tool_choice)
    if case.turns is not None:
        out["turns"] = list(case.turns)
    if case.check is not None:
        out["check"] = case.check.to_dict()
    return out
