"""The pool's settings and engine keys: the environment names, the idle limit, GPU slots, the owner process, and
:func:`engine_key` / :func:`key_hash`, which name what makes two engines the same engine (a lease per key).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from specharness._errors import ConfigError
from specharness.engines.server import ArmSpec, EngineSettings

__all__ = [
    "DEFAULT_GPU_SLOTS",
    "DEFAULT_IDLE_S",
    "GPU_SLOTS_ENV",
    "IDLE_ENV",
    "OWNER_ENV",
    "POOL_ENV",
    "asv_owner_pid",
    "engine_key",
    "gpu_slots",
    "idle_limit_s",
    "key_hash",
    "pool_applies",
]

POOL_ENV = "SPECHARNESS_ENGINE_POOL"  # a folder: every run that starts engines takes them from this pool
OWNER_ENV = "SPECHARNESS_ENGINE_POOL_OWNER"  # a pid: keepers stop when it is gone (default: the asv run / parent)
IDLE_ENV = "SPECHARNESS_ENGINE_POOL_IDLE_S"  # seconds a lease may go unheld before its keeper stops the engine
GPU_SLOTS_ENV = "SPECHARNESS_ENGINE_POOL_GPU_SLOTS"  # on a GPU each pooled engine gets 1/slots of the device
DEFAULT_IDLE_S = 300.0
DEFAULT_GPU_SLOTS = 3  # an A/A pair and the ngram arm at once, as the control profile runs them
_POLL_S = 1.0
# what the engine sees from the environment and can change it; anything else (paths, terminal) does not
_ENGINE_ENV = re.compile(r"^(VLLM_|CUDA_|TORCH|OMP_|MKL_|KMP_|HF_|TRANSFORMERS_|PYTORCH_|LD_PRELOAD$|PYTHONPATH$)")
_KEY_ENV = "SPECHARNESS_ENGINE_POOL_API_KEY"


def idle_limit_s() -> float:
    """The idle limit from SPECHARNESS_ENGINE_POOL_IDLE_S (default 300 s); ConfigError on a bad value."""
    raw = os.environ.get(IDLE_ENV, "").strip()
    if not raw:
        return DEFAULT_IDLE_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ConfigError(f"{IDLE_ENV}={raw!r}: give a positive number of seconds, e.g. 300")
    return value


def gpu_slots() -> int:
    """How many pooled engines share one GPU (SPECHARNESS_ENGINE_POOL_GPU_SLOTS, default 3); ConfigError when bad."""
    raw = os.environ.get(GPU_SLOTS_ENV, "").strip()
    if not raw:
        return DEFAULT_GPU_SLOTS
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"{GPU_SLOTS_ENV}={raw!r}: give a whole number of engines, 1 or more, e.g. 3")
    return int(raw)


def engine_key(settings: EngineSettings, arm: ArmSpec, env: Mapping[str, str], instance: int = 0) -> dict[str, Any]:
    """Everything that makes an engine what it is: the settings less the port and timeout (the API key as a hash),
    the arm's engine options (not its name, nor its client-side slowdown: ``baseline-slow`` runs a plain baseline
    engine), the environment variables an engine reads, and ``instance``: the n-th engine of that kind in one run,
    so that two arms of one run with the same engine options (an A/A pair) never share one engine."""
    s = asdict(settings)
    s.pop("port")
    s.pop("start_timeout_s")
    key = s.pop("api_key")
    s["api_key_sha256"] = hashlib.sha256(key.encode()).hexdigest() if key else None
    a = arm.to_dict()
    for unrelated in ("name", "client_slowdown", "twin_of"):  # the client's business, not the engine's
        a.pop(unrelated)
    engine_env = {k: v for k, v in sorted(env.items()) if _ENGINE_ENV.match(k)}
    return {"settings": s, "arm": a, "env": engine_env, "instance": instance}


def key_hash(key: Mapping[str, Any]) -> str:
    """A short stable name for an engine key (the lease's file name)."""
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]


def pool_applies(settings: EngineSettings) -> bool:
    """Whether an engine with ``settings`` can come from a pool: a port picked freely (the CPU build or a GPU)."""
    return settings.port == 0


def asv_owner_pid() -> int:
    """The ``asv run`` (or ``asv continuous``) process this one runs under, else the parent; SPECHARNESS_ENGINE_POOL_
    OWNER wins."""
    raw = os.environ.get(OWNER_ENV, "").strip()
    if raw.isdigit():
        return int(raw)
    import psutil

    with contextlib.suppress(psutil.Error):
        for proc in psutil.Process().parents():
            argv = proc.cmdline()
            for i, word in enumerate(argv[:-1]):
                if Path(word).name == "asv" and argv[i + 1] in ("run", "continuous", "dev"):
                    return int(proc.pid)
    return os.getppid()
