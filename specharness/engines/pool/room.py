"""Whether one more engine fits now (the machine's memory on the CPU build, the engine's share of a GPU), and the
signal :meth:`~specharness.engines.pool.enginepool.EnginePool.acquire` uses to queue when it does not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from specharness.engines.fleet import fits
from specharness.engines.memory import DeviceMemory
from specharness.engines.pool.lease import Lease
from specharness.engines.server import EngineSettings

__all__ = ["ENGINE_OVERHEAD_GIB"]

ENGINE_OVERHEAD_GIB = 2.0  # a CPU engine's memory beyond its KV cache space (weights, compiled graphs, processes)


def _holders_phrase(held: Sequence[Lease]) -> str:
    """The engines other runs hold, in words, in the order of their runs and arms (the leases' own order follows
    their key hashes, which differ with the environment)."""
    names = [f"{lease.arm} ({lease.started_by})" for lease in sorted(held, key=lambda x: (x.started_by, x.arm))]
    return f"held by other runs: {', '.join(names)}" if names else "none held by other runs"


class _NoRoomYet(Exception):  # control flow inside acquire (it never leaves the pool), not an error
    """A new engine's share is not free and other runs hold pooled engines:
    :meth:`~specharness.engines.pool.enginepool.EnginePool.acquire` waits."""

    def __init__(self, arm: str, share: float | None, room: Callable[[], bool], holders: Sequence[Lease]) -> None:
        super().__init__(arm)
        self.arm, self.share, self.room, self.holders = arm, share, room, list(holders)
        self.phrase = _holders_phrase(holders)


def _room(settings: EngineSettings, probe: Callable[[], DeviceMemory | None] | None) -> Callable[[], bool]:
    """Whether one more engine with ``settings`` fits now: with ``probe`` (a GPU), its share of the device is free;
    without, the machine's available memory covers its KV cache space plus :data:`ENGINE_OVERHEAD_GIB`."""
    if probe is not None:
        share = settings.gpu_memory_utilization

        def gpu_room() -> bool:
            device = probe()
            return device is None or share is None or fits(device, share)

        return gpu_room

    def cpu_room() -> bool:
        import psutil

        return bool(psutil.virtual_memory().available >= ((settings.kv_cache_gib or 0) + ENGINE_OVERHEAD_GIB) * 2**30)

    return cpu_room
