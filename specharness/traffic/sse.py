"""Incremental Server-Sent Events parser (no I/O).

Feed it text in chunks of any size; it returns the ``data`` payload of every event completed so far. Comments
(lines starting with ``:``), ``event:``/``id:``/``retry:`` fields and CR/LF/CRLF line endings are handled as the
SSE spec says; multi-line ``data`` is joined with ``\\n``.
"""

from __future__ import annotations

__all__ = ["DONE", "SSEParser"]

DONE = "[DONE]"


class SSEParser:
    """Turn a stream of text chunks into complete event payloads."""

    def __init__(self) -> None:
        self._buffer = ""
        self._data_lines: list[str] = []
        self._pending_cr = False

    def feed(self, text: str) -> list[str]:
        """Consume ``text`` and return the payloads of the events it completed, in order."""
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]
        self._pending_cr = False
        self._buffer += text
        events: list[str] = []
        while True:
            cut = _first_line_end(self._buffer)
            if cut is None:
                break
            end, width = cut
            line = self._buffer[:end]
            if width == 1 and self._buffer[end] == "\r" and end + 1 == len(self._buffer):
                # A CR at the very end may be the first half of a CRLF split across chunks.
                self._pending_cr = True
            self._buffer = self._buffer[end + width :]
            payload = self._take_line(line)
            if payload is not None:
                events.append(payload)
        return events

    def close(self) -> list[str]:
        """End of stream: return an event left without its blank line, if any (lenient on truncation)."""
        events: list[str] = []
        if self._buffer:
            payload = self._take_line(self._buffer)
            self._buffer = ""
            if payload is not None:
                events.append(payload)
        if self._data_lines:
            events.append("\n".join(self._data_lines))
            self._data_lines = []
        return events

    def _take_line(self, line: str) -> str | None:
        if line == "":
            if not self._data_lines:
                return None
            payload = "\n".join(self._data_lines)
            self._data_lines = []
            return payload
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data_lines.append(value)
        return None


def _first_line_end(buffer: str) -> tuple[int, int] | None:
    """Index and width of the first line terminator (CRLF counts as one)."""
    cr = buffer.find("\r")
    lf = buffer.find("\n")
    if cr == -1 and lf == -1:
        return None
    if cr == -1 or (lf != -1 and lf < cr):
        return lf, 1
    if cr + 1 < len(buffer) and buffer[cr + 1] == "\n":
        return cr, 2
    return cr, 1
