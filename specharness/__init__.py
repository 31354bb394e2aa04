"""specharness: paired baseline vs prompt-lookup (n-gram) speculative decoding experiments on real vLLM servers."""

from specharness._errors import (
    ConfigError,
    EngineDied,
    EngineError,
    EngineNotInstalled,
    EngineStartTimeout,
    JournalError,
    ModelError,
    PortInUse,
    RunDirError,
    SpecharnessError,
    WorkloadError,
)
from specharness.experiment.design import PROFILES, Profile, get_profile
from specharness.records import CellRecord, EngineRecord, RequestRecord

__all__ = [
    "PROFILES",
    "CellRecord",
    "ConfigError",
    "EngineDied",
    "EngineError",
    "EngineNotInstalled",
    "EngineRecord",
    "EngineStartTimeout",
    "JournalError",
    "ModelError",
    "PortInUse",
    "Profile",
    "RequestRecord",
    "RunDirError",
    "SpecharnessError",
    "WorkloadError",
    "get_profile",
]

__version__ = "0.1.0"
