"""The one error hierarchy of specharness: a harness failure raises one of these; a failed *request* is journaled.

:class:`SpecharnessError` is the root, with :class:`ConfigError`, :class:`WorkloadError`, :class:`ModelError`,
:class:`EngineError` (:class:`EngineNotInstalled`, :class:`PortInUse`, :class:`EngineStartTimeout`,
:class:`EngineUnreachable`, :class:`EngineDied`, :class:`ReleaseUnavailable`), :class:`JournalError` and
:class:`RunDirError`. The tree: docs/development.md#the-error-hierarchy.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "EngineDied",
    "EngineError",
    "EngineNotInstalled",
    "EngineStartTimeout",
    "EngineUnreachable",
    "JournalError",
    "ModelError",
    "PortInUse",
    "ReleaseUnavailable",
    "RunDirError",
    "SpecharnessError",
    "WorkloadError",
]


class SpecharnessError(Exception):
    """Base of every error the harness raises; its message is one line meant for the user."""


class ConfigError(SpecharnessError):
    """An option, profile, speculative config or sampling value is invalid."""


class WorkloadError(SpecharnessError):
    """A workload name is unknown or a workload file is malformed."""


class ModelError(SpecharnessError):
    """The model path is missing or cannot be prepared for vLLM."""


class EngineError(SpecharnessError):
    """A vLLM server could not be started or kept alive."""


class EngineNotInstalled(EngineError):
    """vLLM cannot be imported by the Python that would run the server."""


class PortInUse(EngineError):
    """The requested port is already bound."""


class EngineStartTimeout(EngineError):
    """The server did not answer /health within the start timeout."""


class EngineUnreachable(EngineError):
    """An attached engine's URL refuses connections or answers as something other than a vLLM server."""


class EngineDied(EngineError):
    """The server process exited."""


class ReleaseUnavailable(EngineError):
    """An arm's vLLM release has no environment here and none could be built."""


class JournalError(SpecharnessError):
    """A journal cannot be read or has an unknown schema version."""


class RunDirError(SpecharnessError):
    """A run folder is missing, incomplete or cannot be resumed."""
