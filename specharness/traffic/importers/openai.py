"""The openai format: chat-completions (or completions) request bodies, bare or in a batch line's ``body``.

Fields: docs/workloads.md#fields-per-format.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specharness._errors import WorkloadError
from specharness.traffic.importers.fields import (
    Tally,
    build_case,
    later_turns,
    parse_max_tokens,
    parse_text,
    short,
)
from specharness.traffic.workloads import Case

if TYPE_CHECKING:  # options imports the format table, which imports this module: no import at run time
    from specharness.traffic.importers.options import ImportOptions

__all__ = ["convert"]

_OPENAI_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


def convert(obj: dict[str, Any], where: str, default_id: str, opts: ImportOptions, tally: Tally) -> Case:
    """One request body (bare or in a batch line's ``body``) as a case; its max_tokens is the case's."""
    body = obj.get("body") if "body" in obj else obj
    if not isinstance(body, dict):
        raise WorkloadError(f"{where}: field 'body' must be a chat-completions request object")
    sources = (obj, body, body.get("metadata"))
    max_tokens = None
    if not opts.max_tokens_field:
        for name in ("max_completion_tokens", "max_tokens"):
            if body.get(name) is not None:
                max_tokens = parse_max_tokens(body[name], where, name)
                break
    if "messages" not in body and isinstance(body.get("prompt"), str):  # a /v1/completions body
        prompt = parse_text(body["prompt"], where, "prompt")
        return build_case(
            where, default_id, sources, opts, tally, prompt=prompt, max_tokens=max_tokens, has_max_tokens=True
        )
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise WorkloadError(f"{where}: field 'messages' must be a non-empty list of {{role, content}} objects")
    messages: list[dict[str, str]] = []
    for i, m in enumerate(raw):
        if not isinstance(m, dict):
            raise WorkloadError(f"{where}: field 'messages[{i}]' must be a {{role, content}} object")
        role = _OPENAI_ROLES.get(str(m.get("role")))
        if role is None:
            raise WorkloadError(
                f"{where}: field 'messages[{i}].role' is {short(m.get('role'))}; "
                "only system, developer, user and assistant turns can be replayed"
            )
        messages.append({"role": role, "content": _content(m.get("content"), where, i)})
    if not any(m["role"] == "user" for m in messages):
        raise WorkloadError(f"{where}: field 'messages' has no user turn")
    if opts.turns == "replay":
        first = next(i for i, m in enumerate(messages) if m["role"] == "user")
        later = later_turns(messages, first, where, "messages")
        return build_case(
            where,
            default_id,
            sources,
            opts,
            tally,
            messages=messages[: first + 1],
            max_tokens=max_tokens,
            has_max_tokens=True,
            turns=later,
        )
    return build_case(
        where, default_id, sources, opts, tally, messages=messages, max_tokens=max_tokens, has_max_tokens=True
    )


def _content(content: Any, where: str, i: int) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content:
        texts = []
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind != "text" or not isinstance(part.get("text"), str):
                raise WorkloadError(
                    f"{where}: field 'messages[{i}].content' has a part of type {short(kind)}; only text "
                    "parts can be imported"
                )
            texts.append(part["text"])
        return "\n".join(texts)
    raise WorkloadError(f"{where}: field 'messages[{i}].content' must be a string or a list of text parts")
