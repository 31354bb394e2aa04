"""One arm's vLLM OpenAI-compatible server as a child process: build its command, start, wait, inspect, stop.

- :mod:`~specharness.engines.server.arm`: :class:`ArmSpec` and the check of its speculative config
- :mod:`~specharness.engines.server.launch`: :class:`EngineSettings`, the server's command line and environment
- :mod:`~specharness.engines.server.reported`: the settings and log lines an engine reports about itself
- :mod:`~specharness.engines.server.group`: the server's process group: death signal, stop, what is left
- :mod:`~specharness.engines.server.process`: :class:`EngineServer`, the running server, and :func:`stop_all`
"""

from __future__ import annotations

from specharness.engines.server.arm import ArmSpec, validate_speculative_config
from specharness.engines.server.group import group_alive
from specharness.engines.server.launch import EngineSettings, build_command, server_environment, warm_start_env
from specharness.engines.server.process import EngineServer, stop_all
from specharness.engines.server.reported import settings_from_server_info

__all__ = [
    "ArmSpec",
    "EngineServer",
    "EngineSettings",
    "build_command",
    "group_alive",
    "server_environment",
    "settings_from_server_info",
    "stop_all",
    "validate_speculative_config",
    "warm_start_env",
]
