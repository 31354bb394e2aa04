"""The sharegpt format: a ``conversations`` list of ``{from, value}`` turns, sent as its first user turn, as every
turn to the last user turn, or replayed user turn by user turn (``turns`` first, all, replay).
Fields: docs/workloads.md#fields-per-format.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specharness._errors import WorkloadError
from specharness.traffic.importers.fields import Tally, build_case, later_turns, short
from specharness.traffic.workloads import Case

if TYPE_CHECKING:  # options imports the format table, which imports this module: no import at run time
    from specharness.traffic.importers.options import ImportOptions

__all__ = ["convert"]

_SHAREGPT_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bard": "assistant",
    "bing": "assistant",
    "model": "assistant",
    "system": "system",
}


def convert(obj: dict[str, Any], where: str, default_id: str, opts: ImportOptions, tally: Tally) -> Case:
    """One ``conversations`` record as a case, its turns kept as ``opts.turns`` says."""
    turns = obj.get("conversations")
    shape = "field 'conversations' must be a list of {from, value} objects"
    if not isinstance(turns, list) or not turns:
        raise WorkloadError(f"{where}: {shape}")
    messages: list[dict[str, str]] = []
    for i, turn in enumerate(turns):
        if (
            not isinstance(turn, dict)
            or not isinstance(turn.get("from"), str)
            or not isinstance(turn.get("value"), str)
        ):
            raise WorkloadError(f"{where}: {shape} (item {i} is {short(turn)})")
        role = _SHAREGPT_ROLES.get(turn["from"].lower())
        if role is None:
            raise WorkloadError(
                f"{where}: field 'conversations[{i}].from' is {turn['from']!r}; use human, gpt or system"
            )
        messages.append({"role": role, "content": turn["value"]})
    users = [i for i, m in enumerate(messages) if m["role"] == "user" and m["content"].strip()]
    if not users:
        raise WorkloadError(f"{where}: field 'conversations' has no non-empty human/user turn")
    lead = [m for m in messages[: users[0]] if m["role"] == "system"]  # a replayed chat opens with system, then user
    if opts.turns == "replay":
        later = later_turns(messages, users[0], where, "conversations")
        return build_case(where, default_id, (obj,), opts, tally, messages=[*lead, messages[users[0]]], turns=later)
    if opts.turns == "first":
        kept = [*lead, messages[users[0]]]
    else:
        kept = [*lead, *(m for m in messages[users[0] : users[-1] + 1] if m["content"].strip())]
    return build_case(where, default_id, (obj,), opts, tally, messages=kept)
