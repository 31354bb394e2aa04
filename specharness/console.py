"""The console: status lines through the standard library's ``logging`` (logger ``specharness``), written to stderr
as ``specharness: <message>``. :func:`say` is the one call the harness uses for a status line."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

__all__ = ["LOG", "configure", "say", "warn"]

LOG = logging.getLogger("specharness")
FORMAT = "specharness: %(message)s"


class _Console(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to ``sys.stderr`` as it is when a line is written (a test's capture, a redirected stream), flushed."""

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__(stream)
        self.follow = stream is None

    def emit(self, record: logging.LogRecord) -> None:
        if self.follow:
            self.stream = sys.stderr
        super().emit(record)


def configure(stream: TextIO | None = None) -> None:
    """Give the logger its console handler once (the current stderr unless ``stream``); later calls change nothing."""
    if any(isinstance(h, _Console) for h in LOG.handlers):
        return
    handler = _Console(stream)
    handler.setFormatter(logging.Formatter(FORMAT))
    LOG.addHandler(handler)
    LOG.setLevel(logging.INFO)
    LOG.propagate = False


def say(message: str) -> None:
    """A status line (``INFO``)."""
    configure()
    LOG.info(message)


def warn(message: str) -> None:
    """A line about something that went wrong but did not stop the run (``WARNING``)."""
    configure()
    LOG.warning(message)
