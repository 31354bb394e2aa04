"""The console: status lines through the standard library's ``logging`` (logger ``specharness``), written to stderr
as ``specharness: <message>``. :func:`say` is the one call the harness uses for a status line; the helper processes
beside it (an engine's keeper, the preloader) log through :func:`helper_log` into their own log files."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

__all__ = ["LOG", "configure", "helper_log", "say", "warn"]

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


def helper_log(name: str) -> logging.Logger:
    """The logger of a helper process (``specharness.<name>``): its lines to stdout as they are written, unprefixed
    (stdout is the helper's log file, whose lines name the process themselves)."""
    log = logging.getLogger(f"specharness.{name}")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    return log
