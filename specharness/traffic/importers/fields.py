"""The fields every format shares: a record's id, group, max_tokens and reference check, by :func:`build_case`.

:func:`build_case` counts the defaults it used in a :class:`Tally`; the small readers here (a text field, a max_tokens
field, a conversation's later user turns) serve every format converter. Fields per format:
docs/workloads.md#fields-per-format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from specharness._errors import WorkloadError
from specharness.traffic.reference import THRESHOLD_MODES, parse_reference_check
from specharness.traffic.workloads import MAX_TOKENS_LIMIT, Case, case_to_dict, parse_case

if TYPE_CHECKING:  # options imports the format table, whose converters import this module: no import at run time
    from specharness.traffic.importers.options import ImportOptions

__all__ = [
    "DEFAULT_MODE",
    "ID_FIELDS",
    "Tally",
    "build_case",
    "is_int",
    "later_turns",
    "parse_max_tokens",
    "parse_text",
    "short",
]

DEFAULT_MODE = "normalised-contains"  # a reference's mode when neither the user nor the category gives one
ID_FIELDS = ("id", "custom_id", "question_id")


@dataclass(slots=True)
class Tally:
    """What building one case defaulted or judged by; the import sums them into its ImportResult."""

    group_defaulted: int = 0
    max_tokens_defaulted: int = 0
    unchecked: int = 0
    mode: str = ""  # the reference check's mode, when the case has one


def is_int(value: Any) -> bool:
    """An integer, not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def _lookup(name: str, *sources: Any) -> Any:
    for source in sources:
        if isinstance(source, dict) and source.get(name) is not None:
            return source[name]
    return None


def short(value: Any) -> str:
    """``value``'s repr, cut to 60 characters, for an error message."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def build_case(
    where: str,
    default_id: str,
    sources: tuple[Any, ...],
    opts: ImportOptions,
    tally: Tally,
    *,
    messages: list[dict[str, str]] | None = None,
    prompt: str | None = None,
    max_tokens: int | None = None,
    has_max_tokens: bool = False,
    turns: list[str] | None = None,
) -> Case:
    """The fields every format shares: id, group, max_tokens, reference check; the case is then read back through
    :func:`~specharness.traffic.workloads.parse_case`, the owner of what a workload file may hold, so what is
    imported is what a run will read.

    A default max_tokens is counted when the record was expected to carry one: ``max_tokens_field`` is set, or the
    format has its own field (``has_max_tokens``, an OpenAI request body).
    """
    case_id = default_id
    id_names = (opts.id_field,) if opts.id_field else ID_FIELDS
    for name in id_names:
        value = _lookup(name, *sources)
        if value is None:
            continue
        if is_int(value):
            value = str(value)
        if not isinstance(value, str) or not value.strip():
            raise WorkloadError(f"{where}: field {name!r} must be a non-empty string or an integer, not {short(value)}")
        case_id = value
        break
    group = "default"
    if opts.group_field:
        value = _lookup(opts.group_field, *sources)
        if value is None or (isinstance(value, str) and not value.strip()):
            tally.group_defaulted += 1
        elif isinstance(value, str) or is_int(value):
            group = str(value)
        else:
            raise WorkloadError(f"{where}: field {opts.group_field!r} must be a string, not {short(value)}")
    if opts.max_tokens_field:
        max_tokens = None
        value = _lookup(opts.max_tokens_field, *sources)
        if value is not None:
            max_tokens = parse_max_tokens(value, where, opts.max_tokens_field)
    if max_tokens is None:
        tally.max_tokens_defaulted += bool(opts.max_tokens_field or has_max_tokens)
        max_tokens = opts.max_tokens
    check = None
    if opts.reference_field:
        value = _lookup(opts.reference_field, *sources)
        refs = value if isinstance(value, list) else [value]
        if value is None or all(isinstance(r, str) and not r.strip() for r in refs):  # none, "" or [""]: unchecked
            tally.unchecked += 1
        else:
            if not all(isinstance(r, str) and r.strip() for r in refs):
                raise WorkloadError(
                    f"{where}: field {opts.reference_field!r} must be a non-blank string or a list of "
                    f"them, not {short(value)}"
                )
            mode = opts.reference_mode or DEFAULT_MODE
            raw: dict[str, Any] = {"type": "reference", "references": refs, "mode": mode}
            if mode in THRESHOLD_MODES:
                raw["threshold"] = opts.reference_threshold
            tally.mode = mode
            try:
                check = parse_reference_check(raw, where)
            except WorkloadError as exc:  # name the dataset's field, not the check's
                raise WorkloadError(str(exc).replace("check.references", f"field {opts.reference_field!r}")) from None
    case = Case(
        id=case_id,
        max_tokens=max_tokens,
        group=group,
        check=check,
        prompt=prompt,
        messages=tuple(messages) if messages is not None else None,
        turns=tuple(turns) if turns else None,
    )
    return parse_case(case_to_dict(case), where)


def later_turns(messages: list[dict[str, str]], first: int, where: str, field_name: str) -> list[str]:
    """``turns="replay"``: the non-blank user messages after the first user message (``messages[first]``); the
    assistant messages between them are dropped (each arm answers for itself)."""
    later = []
    for i in range(first + 1, len(messages)):
        role, content = messages[i]["role"], messages[i]["content"]
        if role == "system":
            raise WorkloadError(
                f"{where}: field '{field_name}[{i}]' is a system turn after the first user turn; "
                "turns=replay replays user turns only"
            )
        if role == "user" and content.strip():
            later.append(content)
    return later


def parse_max_tokens(value: Any, where: str, name: str) -> int:
    """A record's max_tokens field (an integer, or digits in a string) within the workload limit."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if not is_int(value) or not 1 <= value <= MAX_TOKENS_LIMIT:
        raise WorkloadError(
            f"{where}: field {name!r} must be an integer from 1 to {MAX_TOKENS_LIMIT}, not {short(value)}"
        )
    return int(value)


def parse_text(value: Any, where: str, name: str) -> str:
    """A record's non-blank text field."""
    if not isinstance(value, str) or not value.strip():
        raise WorkloadError(f"{where}: field {name!r} must be a non-empty string, not {short(value)}")
    return value
