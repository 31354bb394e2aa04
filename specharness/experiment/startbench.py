"""How long an engine takes to start, phase by phase: ``specharness starts``.

:func:`measure_starts` starts each arm's engine alone, with the settings a run gives it, in rounds; times two short
requests once ``/health`` answers; stops it; and appends each :class:`StartMeasurement` to :data:`STARTS_FILE`.
:func:`read_starts` reads them back; :data:`CACHES` names what the compile caches held.
Rules: docs/development.md#timing-engine-starts.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from specharness._errors import ConfigError, EngineError
from specharness.engines.fleet import plan_launch
from specharness.engines.memory import MemoryProbe
from specharness.engines.model import resolve_model
from specharness.engines.server import EngineServer
from specharness.experiment.config import RunConfig
from specharness.experiment.design import ARM_NAMES, build_arms, get_profile
from specharness.experiment.engineset import engine_settings
from specharness.experiment.rundir import hardware_info

__all__ = ["CACHES", "STARTS_FILE", "StartMeasurement", "measure_starts", "read_starts"]

STARTS_FILE = "starts.jsonl"
_CACHE_VARIABLES = ("VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
# what a start found in its compile caches
CACHES = {
    "empty": "empty (new folders)",
    "warmed": "left by the starts before it in new folders",
    "as-found": "as found on the machine",
}
_FLOATS = ("to_health_s", "first_request_s", "second_request_s")


@dataclass(frozen=True, slots=True)
class StartMeasurement:
    """One engine start: which arm, the round (1 = every arm's first), what it found in its compile caches (a key of
    :data:`CACHES`), the phases from the engine log (seconds, whole-second stamps), the harness's own wall time from
    spawn to ``/health`` answering, and the first and second request after it (seconds; NaN when not measured).
    ``error``: the cause when the start or its requests failed."""

    arm: str
    index: int
    caches: str
    vllm_version: str
    machine: str
    phases_s: dict[str, float]
    to_health_s: float
    first_request_s: float
    second_request_s: float
    log_path: str
    gpu_memory_utilization: float | None = None
    engine_env: dict[str, str] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)  # the server's command line (dtype, extra vLLM arguments)
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> StartMeasurement:
        """From ``starts.jsonl``: JSON null (a NaN written out) reads back as NaN, in the phases too."""
        values = {k: raw[k] for k in cls.__dataclass_fields__ if k in raw}
        for key in _FLOATS:
            values[key] = math.nan if values.get(key) is None else float(values[key])
        values["phases_s"] = {k: math.nan if v is None else float(v) for k, v in (raw.get("phases_s") or {}).items()}
        return cls(**values)


def _machine_label(hardware: dict[str, Any]) -> str:
    gpus = hardware.get("gpus") or []
    return f"{gpus[0]}" if gpus else f"{hardware.get('cpu', 'CPU')}, {hardware.get('cpu_count', '?')} cores"


@contextlib.contextmanager
def _compile_caches(folder: Path | None) -> Iterator[dict[str, str]]:
    """Point the compile caches at ``folder`` for the engines spawned inside; None: leave them."""
    if folder is None:
        yield {}
        return
    saved = {k: os.environ.get(k) for k in _CACHE_VARIABLES}
    paths = {k: str(folder / k.lower()) for k in _CACHE_VARIABLES}
    os.environ.update(paths)
    try:
        yield paths
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _append(path: Path, record: StartMeasurement) -> None:
    with open(path, "ab") as out:
        out.write(orjson.dumps(record.to_dict()) + b"\n")
        out.flush()
        os.fsync(out.fileno())


def _check(arms: Sequence[str], repeat: int, out: Path) -> list[str]:
    if repeat < 1:
        raise ConfigError(f"--repeat {repeat}: give 1 or more starts per arm")
    unknown = [a for a in arms if a not in ARM_NAMES]
    if unknown or not arms:
        raise ConfigError(f"--arms {','.join(unknown) or '(none)'}: use one or more of {', '.join(ARM_NAMES)}")
    if (out / STARTS_FILE).exists():
        raise ConfigError(f"--out {out} already holds {STARTS_FILE}; give a new folder")
    return list(dict.fromkeys(arms))


def measure_starts(
    config: RunConfig,
    arms: Sequence[str],
    *,
    repeat: int,
    fresh_caches: bool,
    say: Callable[[str], None] = lambda _m: None,
) -> list[StartMeasurement]:
    """Start each arm's engine alone, ``repeat`` rounds; return (and append to ``<out_dir>/starts.jsonl``) one
    :class:`StartMeasurement` per start. A start that fails is recorded with its cause and ends the measurement (the
    engine's error is raised); nothing measured before it is lost, and no server is left running."""
    out = config.out_dir
    names = _check(arms, repeat, out)
    specs = {a.name: a for a in build_arms(replace(get_profile("quick"), arms=tuple(names)))}
    model = resolve_model(config.model)
    settings = engine_settings(config, model)
    probe = MemoryProbe()
    device = probe.engine_device()
    shares = plan_launch(names, device, user_share=settings.gpu_memory_utilization, side_by_side=False).shares
    machine = _machine_label(hardware_info(probe))
    out.mkdir(parents=True, exist_ok=True)
    path = out / STARTS_FILE
    caches = out / "caches" if fresh_caches else None
    if caches is not None:
        shutil.rmtree(caches, ignore_errors=True)
        caches.mkdir(parents=True)
    found: list[StartMeasurement] = []
    with _compile_caches(caches):
        for index in range(1, repeat + 1):
            for name in names:
                arm_settings = replace(settings, gpu_memory_utilization=shares.get(name))
                server = EngineServer(arm_settings, specs[name], out / "logs" / f"{name}.start{index}.log")
                say(f"round {index} of {repeat}: {name}")
                error = ""
                first = second = math.nan
                try:
                    server.start()
                    first = server.time_request(settings.served_model_name)
                    second = server.time_request(settings.served_model_name)
                    if math.isnan(first) or math.isnan(second):
                        error = f"{name}: a request after the start got no answer (log: {server.log_path})"
                except EngineError as exc:
                    error = str(exc)
                finally:
                    server.stop()
                    server.wait_gone()
                state = "as-found" if caches is None else ("empty" if not found else "warmed")
                record = StartMeasurement(
                    arm=name,
                    index=index,
                    caches=state,
                    vllm_version=server.version or "unknown",
                    machine=machine,
                    phases_s=server.start_phases().as_dict(),
                    to_health_s=round(server.start_s, 2),
                    first_request_s=first,
                    second_request_s=second,
                    log_path=str(server.log_path.relative_to(out)),
                    gpu_memory_utilization=arm_settings.gpu_memory_utilization,
                    engine_env=dict(server.engine_env),
                    command=list(server.command),
                    error=error,
                )
                _append(path, record)
                found.append(record)
                if error:
                    raise EngineError(f"{error} (starts so far: {path})")
    return found


def read_starts(out_dir: Path) -> list[StartMeasurement]:
    """The starts measured into ``out_dir`` (``starts.jsonl``), in order; a torn last line is skipped."""
    path = out_dir / STARTS_FILE
    if not path.is_file():
        raise ConfigError(f"{out_dir} has no {STARTS_FILE}; pass a folder made by 'specharness starts'")
    found: list[StartMeasurement] = []
    for line in path.read_bytes().splitlines():
        with contextlib.suppress(orjson.JSONDecodeError):
            found.append(StartMeasurement.from_dict(orjson.loads(line)))
    return found
