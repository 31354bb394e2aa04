"""Append-only JSONL journal (orjson): one line per record, flushed and fsynced per write.

A crash leaves every line written so far readable; a torn last line is reported and skipped on read. One writer
(:class:`Journal`) and one reader (:func:`read_journal`): records and events go in and come back as the dataclasses of
:mod:`specharness.records`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import orjson

from specharness._errors import JournalError
from specharness.experiment.telemetry import TextPolicy
from specharness.records import (
    EVENT_KINDS,
    READABLE_SCHEMAS,
    SCHEMA_VERSION,
    CellRecord,
    EngineRecord,
    JournalEvent,
    OtherEvent,
    RequestRecord,
)

__all__ = ["Journal", "JournalContents", "iter_journal_lines", "parse_journal", "read_journal"]

_RECORDS: dict[str, tuple[type, str]] = {
    "request": (RequestRecord, "requests"),
    "engine": (EngineRecord, "engines"),
    "cell": (CellRecord, "cells"),
}
_E = TypeVar("_E")


class Journal:
    """An open journal file; ``write`` appends a record and makes it durable before returning. A request record is
    written as ``policy`` (:mod:`specharness.experiment.telemetry`) allows."""

    def __init__(self, path: Path, *, fsync: bool = True, policy: TextPolicy | None = None) -> None:
        self.path = path
        self._fsync = fsync
        self._policy = policy or TextPolicy("full")  # what text of a request record reaches the disk
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "ab")  # noqa: SIM115 - closed in close()

    def write(self, record: RequestRecord | EngineRecord | CellRecord | JournalEvent) -> None:
        if isinstance(record, RequestRecord):
            record = self._policy.request(record)
        self._file.write(orjson.dumps(record.to_dict(), option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
        self._file.flush()
        if self._fsync:
            os.fsync(self._file.fileno())

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


@dataclasses.dataclass(slots=True)
class JournalContents:
    """Everything a journal holds, by kind, plus lines that could not be read."""

    def events_of(self, kind: type[_E]) -> list[_E]:
        """The events of one type, in journal order."""
        return [e for e in self.events if isinstance(e, kind)]

    requests: list[RequestRecord] = dataclasses.field(default_factory=list)
    engines: list[EngineRecord] = dataclasses.field(default_factory=list)
    cells: list[CellRecord] = dataclasses.field(default_factory=list)
    events: list[JournalEvent] = dataclasses.field(default_factory=list)
    torn_lines: list[int] = dataclasses.field(default_factory=list)


def iter_journal_lines(data: bytes) -> Iterator[tuple[int, dict[str, Any] | None]]:
    """Yield (line number, parsed object or None when the line is unreadable) of a journal's bytes."""
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw or raw.isspace():
            continue
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            yield number, None
            continue
        yield number, obj if isinstance(obj, dict) else None


@functools.cache
def _field_specs(cls: type) -> tuple[tuple[str, bool], ...]:
    """(name, defaults-to-NaN) for each field of a record class."""
    return tuple((f.name, isinstance(f.default, float) and math.isnan(f.default)) for f in dataclasses.fields(cls))


def _fields_for(cls: type, obj: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments for ``cls`` from a journal object; JSON null in a NaN-default float comes back as NaN."""
    kwargs: dict[str, Any] = {}
    for name, nan_default in _field_specs(cls):
        if name in obj:
            value = obj[name]
            kwargs[name] = math.nan if value is None and nan_default else value
    return kwargs


def read_journal(path: Path) -> JournalContents:
    """Read a journal file back into records; unknown schema versions raise, a torn last line is kept aside. A packed
    run folder (``journal.jsonl.xz``) is read through :func:`specharness.experiment.rundir.read_run_journal`."""
    if not path.is_file():
        raise JournalError(f"journal {path} not found: pass a run folder made by 'specharness run'")
    return parse_journal(path.read_bytes(), str(path))


def parse_journal(data: bytes, source: str) -> JournalContents:
    """A journal's bytes back into records and typed events; ``source`` names it in errors (``source:line``)."""
    contents = JournalContents()
    lines = list(iter_journal_lines(data))
    for index, (number, obj) in enumerate(lines):
        if obj is None:
            if index == len(lines) - 1:
                contents.torn_lines.append(number)
                continue
            raise JournalError(f"{source}:{number}: not a JSON object; the journal is damaged before its end")
        schema = obj.get("schema")
        if schema not in READABLE_SCHEMAS:
            readable = ", ".join(map(str, READABLE_SCHEMAS))
            raise JournalError(
                f"{source}:{number}: schema {schema!r}, this specharness reads {readable} (writes {SCHEMA_VERSION}); "
                "use a matching version"
            )
        kind = obj.get("kind")
        if kind in _RECORDS:
            cls, attr = _RECORDS[kind]
            getattr(contents, attr).append(_typed(cls, obj, source, number))
        elif kind in EVENT_KINDS:
            contents.events.append(_typed(EVENT_KINDS[kind], obj, source, number))
        else:
            fields = {k: v for k, v in obj.items() if k not in ("kind", "schema")}
            contents.events.append(OtherEvent(kind=str(kind), fields=fields))
    return contents


def _typed(cls: type, obj: dict[str, Any], source: str, number: int) -> Any:
    try:
        return cls(**_fields_for(cls, obj))
    except TypeError as exc:
        raise JournalError(f"{source}:{number}: {obj.get('kind')} record is missing a field ({exc})") from None
