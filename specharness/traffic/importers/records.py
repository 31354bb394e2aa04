"""Reading a dataset file's records (JSONL or one JSON array, CSV or TSV) and telling its format from suffix and keys.

Each record is (where, default id, parsed object); a line that is not JSON, or a CSV row of the wrong width, comes as
:class:`Unreadable`, for the import to reject and count.
"""

from __future__ import annotations

import csv
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from specharness._errors import WorkloadError
from specharness.traffic.importers.formats import FORMATS
from specharness.traffic.importers.options import ImportOptions

__all__ = ["Record", "Unreadable", "csv_records", "detect_and_read", "detect_format", "json_records"]

_DETECT_RECORDS = 100
_SPECHARNESS_KEYS = frozenset({"id", "messages", "prompt", "max_tokens", "group", "check", "turns"})


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A line that is not JSON, or a CSV row of the wrong width: rejected with this message."""

    error: str


Record = tuple[str, str, Any]  # where, default id, parsed object (or Unreadable)


def _first_char(path: Path) -> str:
    with path.open("rb") as f:
        head = f.read(4096).decode("utf-8-sig", errors="replace").lstrip()
    return head[:1]


def json_records(path: Path) -> Iterator[Record]:
    """(where, default id, parsed object or Unreadable) for every record of a JSONL file or a JSON array."""
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
                    obj = Unreadable(str(exc))
                yield f"{path}:{number}", f"{path.stem}-{number}", obj
    except UnicodeDecodeError as exc:
        raise WorkloadError(f"{path}: not UTF-8 text near line {number + 1} ({exc.reason}); save it as UTF-8") from None


def _unclosed_quote_line(path: Path, delimiter: str) -> int | None:
    """The line a quoted field opens on and never closes (the reader would fold every later row into it), or None.
    A strict reader finds it as "unexpected end of data"; its other complaints (a quote inside a field) are the
    lenient reader's to accept, so they end the search."""
    with path.open(encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f, delimiter=delimiter, strict=True)
        start = 1
        try:
            for _ in reader:
                start = reader.line_num + 1
        except csv.Error as exc:
            return start if "unexpected end of data" in str(exc) else None
    return None


def csv_records(path: Path, opts: ImportOptions) -> Iterator[Record]:
    column = opts.prompt_column or "prompt"
    csv.field_size_limit(max(csv.field_size_limit(), 64 * 1024 * 1024))  # long documents in one cell
    line = 0
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:
            delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
            opened = _unclosed_quote_line(path, delimiter)
            if opened is not None:
                raise WorkloadError(
                    f"{path}:{opened}: a quoted field opened on this line never closes (every later row would be part "
                    'of it); close the quote, or write a quote inside a field as ""'
                )
            reader = csv.reader(f, delimiter=delimiter)
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
                    raise WorkloadError(f"{path}:{line}: not readable as CSV ({exc})") from None
                if not row or not any(cell.strip() for cell in row):
                    continue
                if len(row) != len(header):
                    yield (
                        f"{path}:{line}",
                        f"{path.stem}-{line}",
                        Unreadable(f"row has {len(row)} fields, the header has {len(header)}"),
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
    return detect_and_read(Path(path), opts or ImportOptions())[0]


def detect_and_read(path: Path, opts: ImportOptions) -> tuple[str, Iterator[Record]]:
    """The format and the records, read once: the records looked at to decide are handed back with the rest."""
    if path.suffix.lower() in (".csv", ".tsv"):
        return "csv", csv_records(path, opts)
    records = json_records(path)
    looked: list[Record] = []
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
