"""Append-only JSONL journal (orjson): one line per record, flushed and fsynced per write.

A crash leaves every line written so far readable; a torn last line is reported and skipped on read.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson

from specharness._errors import JournalError
from specharness.experiment.telemetry import TextPolicy
from specharness.records import READABLE_SCHEMAS, SCHEMA_VERSION, CellRecord, EngineRecord, RequestRecord

__all__ = ["Journal", "JournalContents", "iter_journal_lines", "read_journal"]

_KINDS: dict[str, type] = {"request": RequestRecord, "engine": EngineRecord, "cell": CellRecord}


class Journal:
    """An open journal file; ``write`` appends a record and makes it durable before returning. A request record is
    written as ``policy`` (:mod:`specharness.experiment.telemetry`) allows."""

    def __init__(self, path: Path, *, fsync: bool = True, policy: TextPolicy | None = None) -> None:
        self.path = path
        self._fsync = fsync
        self._policy = policy or TextPolicy("full")  # what text of a request record reaches the disk
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "ab")  # noqa: SIM115 - closed in close()

    def write(self, record: RequestRecord | EngineRecord | CellRecord | dict[str, Any]) -> None:
        if isinstance(record, RequestRecord):
            record = self._policy.request(record)
        payload = record if isinstance(record, dict) else record.to_dict()
        self._file.write(orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY) + b"\n")
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

    requests: list[RequestRecord] = dataclasses.field(default_factory=list)
    engines: list[EngineRecord] = dataclasses.field(default_factory=list)
    cells: list[CellRecord] = dataclasses.field(default_factory=list)
    events: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    torn_lines: list[int] = dataclasses.field(default_factory=list)


def iter_journal_lines(path: Path) -> Iterator[tuple[int, dict[str, Any] | None]]:
    """Yield (line number, parsed object or None when the line is unreadable)."""
    data = path.read_bytes()
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
    """Read a journal back into records; unknown schema versions raise, a torn line is kept aside."""
    if not path.is_file():
        raise JournalError(f"journal {path} not found: pass a run folder made by 'specharness run'")
    contents = JournalContents()
    lines = list(iter_journal_lines(path))
    for index, (number, obj) in enumerate(lines):
        if obj is None:
            if index == len(lines) - 1:
                contents.torn_lines.append(number)
                continue
            raise JournalError(f"{path}:{number}: not a JSON object; the journal is damaged before its end")
        schema = obj.get("schema")
        if schema not in READABLE_SCHEMAS:
            raise JournalError(
                f"{path}:{number}: schema {schema!r}, this specharness reads {', '.join(map(str, READABLE_SCHEMAS))} (writes {SCHEMA_VERSION}); use a matching version"
            )
        kind = obj.get("kind")
        if kind in _KINDS:
            cls = _KINDS[kind]
            try:
                record = cls(**_fields_for(cls, obj))
            except TypeError as exc:
                raise JournalError(f"{path}:{number}: {kind} record is missing a field ({exc})") from None
            getattr(contents, {"request": "requests", "engine": "engines", "cell": "cells"}[kind]).append(record)
        else:
            contents.events.append(obj)
    return contents
