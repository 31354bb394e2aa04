"""Memory at defined boundaries: GPU used memory through pynvml when a GPU is visible, else the servers' RSS.

Boundaries: ``before_start``, ``engine_ready``, ``after_warmup`` and the peak sampled while each cell runs.
"""

from __future__ import annotations

import contextlib
import os
import resource
import threading
from dataclasses import dataclass
from typing import Any

__all__ = ["DeviceMemory", "MemoryProbe", "PeakSampler"]

_MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class MemoryReading:
    gpu_used_mib: float | None
    rss_mib: float | None


@dataclass(frozen=True, slots=True)
class DeviceMemory:
    """One GPU's memory as NVML reports it when read."""

    name: str
    total_mib: float
    free_mib: float


class MemoryProbe:
    """Reads GPU used memory (all visible GPUs summed) and the RSS of given process trees."""

    def __init__(self) -> None:
        self._handles: list[Any] = []
        self._nvml: Any = None
        with contextlib.suppress(Exception):
            import pynvml

            pynvml.nvmlInit()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
            self._nvml = pynvml

    @property
    def gpu_observed(self) -> bool:
        return bool(self._handles)

    def gpu_names(self) -> list[str]:
        if not self._nvml:
            return []
        names = []
        for h in self._handles:
            name = self._nvml.nvmlDeviceGetName(h)
            names.append(name.decode() if isinstance(name, bytes) else str(name))
        return names

    def gpu_used_mib(self) -> float | None:
        if not self._handles:
            return None
        try:
            return sum(self._nvml.nvmlDeviceGetMemoryInfo(h).used for h in self._handles) / _MIB
        except Exception:
            return None

    def engine_device(self) -> DeviceMemory | None:
        """The GPU an engine started without device flags runs on (CUDA's device 0: the first index in
        ``CUDA_VISIBLE_DEVICES`` when it lists indices, else NVML's device 0), or None without an NVIDIA GPU."""
        if not self._handles:
            return None
        index = 0
        first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
        if first.isdigit() and int(first) < len(self._handles):
            index = int(first)
        try:
            info = self._nvml.nvmlDeviceGetMemoryInfo(self._handles[index])
            return DeviceMemory(name=self.gpu_names()[index], total_mib=info.total / _MIB, free_mib=info.free / _MIB)
        except Exception:
            return None

    @staticmethod
    def rss_mib(pids: list[int]) -> float | None:
        """Resident memory of the given processes (a server and its children), summed."""
        try:
            import psutil
        except ImportError:
            return None
        total = 0
        for pid in pids:
            with contextlib.suppress(Exception):
                total += psutil.Process(pid).memory_info().rss
        return total / _MIB if total else None

    def read(self, pids: list[int]) -> MemoryReading:
        return MemoryReading(gpu_used_mib=self.gpu_used_mib(), rss_mib=self.rss_mib(pids))

    def as_fields(self, prefix: str, pids: list[int]) -> dict[str, float]:
        reading = self.read(pids)
        out: dict[str, float] = {}
        if reading.gpu_used_mib is not None:
            out[f"{prefix}_gpu_used_mib"] = reading.gpu_used_mib
        if reading.rss_mib is not None:
            out[f"{prefix}_rss_mib"] = reading.rss_mib
        return out


class PeakSampler:
    """Samples memory on a thread every ``interval_s`` between ``start`` and ``stop``; keeps the peaks."""

    def __init__(self, probe: MemoryProbe, pids: list[int], interval_s: float = 0.25) -> None:
        self._probe, self._pids, self._interval = probe, pids, interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.peak_gpu_mib: float | None = None
        self.peak_rss_mib: float | None = None

    def _sample(self) -> None:
        reading = self._probe.read(self._pids)
        if reading.gpu_used_mib is not None:
            self.peak_gpu_mib = max(self.peak_gpu_mib or 0.0, reading.gpu_used_mib)
        if reading.rss_mib is not None:
            self.peak_rss_mib = max(self.peak_rss_mib or 0.0, reading.rss_mib)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self._interval)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="memory-peak", daemon=True)
        self._thread.start()

    def stop(self) -> dict[str, float]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._sample()
        out: dict[str, float] = {}
        if self.peak_gpu_mib is not None:
            out["peak_gpu_used_mib"] = self.peak_gpu_mib
        if self.peak_rss_mib is not None:
            out["peak_rss_mib"] = self.peak_rss_mib
        out["peak_harness_rss_mib"] = harness_max_rss_mib()
        return out


def harness_max_rss_mib() -> float:
    """The harness process's own high-water RSS since it started (Linux reports KiB); servers not included."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
