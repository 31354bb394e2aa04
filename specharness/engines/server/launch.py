"""What starts one arm's server: the engine settings shared by every arm (:class:`EngineSettings`), the exact
``vllm`` server command line, the environment the harness gives it, and what the chosen interpreter's vLLM offers."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from specharness._errors import PortInUse
from specharness.engines.model import cache_dir
from specharness.engines.server.arm import ArmSpec

__all__ = [
    "ENTRYPOINT",
    "EngineSettings",
    "build_command",
    "choose_port",
    "server_environment",
    "supports_per_request_spec_metrics",
    "vllm_available",
    "warm_start_env",
    "with_site",
]

ENTRYPOINT = "vllm.entrypoints.openai.api_server"


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
        ENTRYPOINT,
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
        env = with_site(settings.site, env)
    keys = (*ours, "VLLM_SERVER_DEV_MODE", "PYTHONUNBUFFERED", *(("PYTHONPATH",) if settings.site else ()))
    recorded = {k: env[k] for k in keys if k in env}
    return env, recorded


def choose_port(host: str, port: int) -> int:
    """``port`` when it is free on ``host`` (:class:`PortInUse` when not); when ``port`` is 0, a free one."""
    if port:
        if not _port_free(host, port):
            raise PortInUse(f"--port {port} is in use on {host}; free it or pass --port 0 to pick one")
        return port
    return _pick_port(host)


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


def with_site(site: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
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
        env=with_site(site),
    )
    return probe.returncode == 0


def supports_per_request_spec_metrics(python: str, site: str = "") -> bool:
    """Whether this vLLM has --per-request-spec-decode-metrics (read from its source, no import of vLLM)."""
    code = (
        "import importlib.util,pathlib,sys;s=importlib.util.find_spec('vllm');"
        "p=pathlib.Path(s.origin).parent/'config'/'observability.py';"
        "sys.exit(0 if p.is_file() and 'per_request_spec_decode_metrics' in p.read_text() else 1)"
    )
    return subprocess.run([python, "-c", code], capture_output=True, check=False, env=with_site(site)).returncode == 0
