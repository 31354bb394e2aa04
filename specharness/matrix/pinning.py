"""Where each job runs: slots on the Ray cluster's nodes, and what pins a job to its slot.

:func:`plan_slots` gives every node its slots (:class:`SlotPlan`): one per GPU on a GPU node, one per set of cores on
a CPU node. On the node, a slot's :class:`Pinning` is its cores (a CPU slot's share of the node's cores; a GPU
slot's share of the cores nearest its GPU, :func:`gpu_cores`), its GPU, the first port of its engines and its own
compile-cache folder; :func:`job_env` is the environment a job runs with there. Ray itself pins nothing: a task
that asks for no GPU sees ``CUDA_VISIBLE_DEVICES`` empty (ray#50180), and CPU resources are counts, not cores.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specharness._errors import ConfigError, PortInUse
from specharness.engines.pool import IDLE_ENV, OWNER_ENV, POOL_ENV
from specharness.engines.server.launch import choose_port

__all__ = [
    "BIND_ENV",
    "CACHE_VARIABLES",
    "PORT_BASE",
    "Pinning",
    "SlotPlan",
    "cpu_cores",
    "cpulist_text",
    "free_port_block",
    "gpu_cores",
    "gpu_cpulists",
    "host_caches",
    "job_env",
    "parse_cpulist",
    "plan_slots",
    "seed_caches",
]

BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"  # vLLM's CPU build: the cores its worker threads are bound to
CACHE_VARIABLES = {"VLLM_CACHE_ROOT": "vllm", "TORCHINDUCTOR_CACHE_DIR": "torchinductor", "TRITON_CACHE_DIR": "triton"}
PORT_BASE = 20000  # slot k's engines take ports from PORT_BASE + 100 k (the first free block of 10 in its 100)
_PORTS_PER_JOB = 10  # a release pair has 4 arms; room for more


@dataclass(frozen=True, slots=True)
class SlotPlan:
    """One slot: a place on one node where one job runs at a time."""

    node_id: str
    node_ip: str
    index: int  # the slot's number on its node: its cores, ports and cache folder follow it
    gpu: bool  # a GPU slot (one GPU, asked of Ray as num_gpus=1) or a CPU slot (a set of cores)
    cores_per_job: int  # a CPU slot's cores (0 on a GPU slot: its share of the cores nearest its GPU)

    @property
    def key(self) -> str:
        return f"{self.node_ip}#{self.index}"


@dataclass(frozen=True, slots=True)
class Pinning:
    """What pins a job to its slot on the node that runs it."""

    cores: tuple[int, ...]
    gpu: str  # CUDA_VISIBLE_DEVICES ("" on a CPU slot)
    first_port: int
    cache_dir: str  # the slot's compile caches ("" : the host's own)

    def text(self) -> str:
        """``GPU 3, cores 24-35, ports 20300-`` or ``cores 1, ports 20100-``."""
        where = f"GPU {self.gpu}, " if self.gpu else ""
        return f"{where}cores {cpulist_text(self.cores)}, ports {self.first_port}-"


def plan_slots(nodes: Sequence[Mapping[str, Any]], cores_per_job: int, jobs: int) -> list[SlotPlan]:
    """The slots of the live nodes (Ray's ``ray.nodes()``): one per GPU on a node that has GPUs, else one per
    ``cores_per_job`` of its CPUs (0: the node's CPUs shared evenly by the jobs it can run at once), at most
    ``jobs`` a node; in an order that spreads the first jobs over the nodes."""
    per_node: list[list[SlotPlan]] = []
    for node in sorted((n for n in nodes if n.get("Alive")), key=lambda n: str(n.get("NodeManagerAddress"))):
        res = node.get("Resources") or {}
        gpus, cpus = int(res.get("GPU", 0)), int(res.get("CPU", 0))
        node_id, ip = str(node["NodeID"]), str(node.get("NodeManagerAddress", ""))
        if gpus:
            per_node.append([SlotPlan(node_id, ip, i, True, 0) for i in range(min(gpus, jobs))])
            continue
        per_job = cores_per_job or max(1, cpus // max(1, min(jobs, cpus)))
        per_node.append([SlotPlan(node_id, ip, i, False, per_job) for i in range(min(cpus // per_job, jobs))])
    slots = [s for group in _rounds(per_node) for s in group]
    if not slots:
        sizes = ", ".join(str(int((n.get("Resources") or {}).get("CPU", 0))) for n in nodes if n.get("Alive"))
        raise ConfigError(
            f"no Ray node can hold a job: cores_per_job is {cores_per_job} and the nodes have {sizes or 'no'} CPUs; "
            "lower cores_per_job in the matrix file"
        )
    return slots


def _rounds(groups: list[list[SlotPlan]]) -> list[list[SlotPlan]]:
    """Round by round: every node's first slot, then every node's second, and so on."""
    rounds = max((len(g) for g in groups), default=0)
    return [[g[i] for g in groups if i < len(g)] for i in range(rounds)]


def parse_cpulist(text: str) -> tuple[int, ...]:
    """``0-3,8,10-11`` (Linux's cpulist format) -> (0, 1, 2, 3, 8, 10, 11)."""
    cores: list[int] = []
    for part in (p.strip() for p in text.strip().split(",") if p.strip()):
        low, _, high = part.partition("-")
        cores += range(int(low), int(high or low) + 1)
    return tuple(sorted(set(cores)))


def cpulist_text(cores: Sequence[int]) -> str:
    """(0, 1, 2, 3, 8) -> ``0-3,8``: runs of consecutive cores as ranges (vLLM's and taskset's format)."""
    out: list[str] = []
    ordered = sorted(set(cores))
    start = prev = ordered[0] if ordered else 0
    for core in [*ordered[1:], None]:
        if core is not None and core == prev + 1:
            prev = core
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if core is not None:
            start = prev = core
    return ",".join(out) if ordered else ""


def cpu_cores(allowed: Sequence[int], index: int, per_job: int) -> tuple[int, ...]:
    """A CPU slot's cores: the ``index``-th run of ``per_job`` cores among the ``allowed`` ones."""
    ordered = sorted(allowed)
    chunk = tuple(ordered[index * per_job : (index + 1) * per_job])
    if len(chunk) < per_job:
        raise ConfigError(f"slot {index} needs cores {index * per_job}-{(index + 1) * per_job - 1} of {len(ordered)}")
    return chunk


def gpu_cores(gpu: int, cpulists: Mapping[int, tuple[int, ...]], allowed: Sequence[int]) -> tuple[int, ...]:
    """A GPU's cores: those nearest it (its NUMA node's, ``cpulists`` by GPU index) that this process may use,
    shared evenly among the GPUs nearest the same cores (all of them when there are fewer cores than GPUs)."""
    near = tuple(c for c in cpulists.get(gpu, ()) if c in set(allowed)) or tuple(sorted(allowed))
    group = sorted(g for g, cores in cpulists.items() if cores == cpulists.get(gpu))
    share = len(near) // max(1, len(group))
    if share == 0 or gpu not in group:
        return near
    rank = group.index(gpu)
    return near[rank * share : (rank + 1) * share]


def gpu_cpulists() -> dict[int, tuple[int, ...]]:
    """Each GPU's nearest cores by its index (NVML's bus id, then the PCI device's ``local_cpulist``); empty
    without NVML."""
    out: dict[int, tuple[int, ...]] = {}
    with contextlib.suppress(Exception):
        import pynvml

        pynvml.nvmlInit()
        try:
            for i in range(pynvml.nvmlDeviceGetCount()):
                bus = pynvml.nvmlDeviceGetPciInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).busId
                bus = bus.decode() if isinstance(bus, bytes) else str(bus)
                domain, rest = bus.split(":", 1)
                path = Path("/sys/bus/pci/devices") / f"{domain[-4:]}:{rest}".lower() / "local_cpulist"
                with contextlib.suppress(OSError):
                    out[i] = parse_cpulist(path.read_text())
        finally:
            pynvml.nvmlShutdown()
    return out


def _ports_free(host: str, first: int, count: int) -> bool:
    try:
        for port in range(first, first + count):
            choose_port(host, port)
    except PortInUse:
        return False
    return True


def free_port_block(index: int, host: str = "127.0.0.1") -> int:
    """The first port of slot ``index``'s engines: the first block of 10 free ports in its hundred."""
    base = PORT_BASE + 100 * index
    for first in range(base, base + 100, _PORTS_PER_JOB):
        if _ports_free(host, first, _PORTS_PER_JOB):
            return first
    raise ConfigError(f"ports {base}-{base + 99} are all taken on this host; free some for slot {index}")


def host_caches(env: Mapping[str, str], specharness_cache: Path) -> dict[str, Path]:
    """Where this host's compile caches are (the variables of :data:`CACHE_VARIABLES`): the environment's, else
    vLLM's, the harness's (inductor on the CPU build) and Triton's defaults."""
    home = Path.home()
    defaults = {
        "VLLM_CACHE_ROOT": home / ".cache" / "vllm",
        "TORCHINDUCTOR_CACHE_DIR": specharness_cache / "torchinductor",
        "TRITON_CACHE_DIR": home / ".triton" / "cache",
    }
    return {var: Path(env[var]) if env.get(var) else path for var, path in defaults.items()}


def seed_caches(slot_dir: Path, sources: Mapping[str, Path]) -> None:
    """Give a slot its own cache folders, each a copy of the host's (``sources``) the first time (so a new slot
    starts warm), then its own: jobs on two slots never write one cache folder at once. A copy is made aside and
    renamed into place, so a slot never sees half of one."""
    for var, sub in CACHE_VARIABLES.items():
        target = slot_dir / sub
        if target.exists():
            continue
        partial = slot_dir / f".{sub}.partial-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        source = sources.get(var)
        if source is not None and source.is_dir():
            shutil.copytree(source, partial, symlinks=True)
        else:
            partial.mkdir(parents=True)
        with contextlib.suppress(OSError):  # another worker of this slot seeded it first
            partial.rename(target)
        shutil.rmtree(partial, ignore_errors=True)


def job_env(base: Mapping[str, str], pinning: Pinning) -> dict[str, str]:
    """The environment of a job on its slot: ``base`` without an engine pool (a job starts and stops its own
    engines), its GPU named explicitly, its cores as vLLM's CPU worker binding, its slot's compile caches."""
    env = {k: v for k, v in base.items() if k not in (POOL_ENV, OWNER_ENV, IDLE_ENV)}
    if pinning.gpu:  # by PCI bus order, NVML's: the index whose nearest cores the slot took
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        env["CUDA_VISIBLE_DEVICES"] = pinning.gpu
    elif pinning.cores:
        env[BIND_ENV] = cpulist_text(pinning.cores)
    if pinning.cache_dir:
        env.update({var: os.path.join(pinning.cache_dir, sub) for var, sub in CACHE_VARIABLES.items()})
    return env
