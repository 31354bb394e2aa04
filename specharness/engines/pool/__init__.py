"""Engines kept running across experiments: one start serves every experiment that asks for the same engine.

An :class:`EnginePool` is a folder of leases, one per :func:`engine_key`; :meth:`EnginePool.acquire` finds a running
engine or starts one under a keeper process and returns a :class:`PooledEngine`. Leases, holds, lifetimes and GPU
shares: docs/development.md#the-engine-pool. Submodules:

- :mod:`~specharness.engines.pool.keys`: environment names, idle limit, GPU slots, owner pid, engine keys
- :mod:`~specharness.engines.pool.lease`: the lease file and its hold and touch files
- :mod:`~specharness.engines.pool.room`: whether one more engine fits now, and the queue signal when not
- :mod:`~specharness.engines.pool.pooled`: :class:`PooledEngine`, the engine a run holds
- :mod:`~specharness.engines.pool.enginepool`: :class:`EnginePool` and :func:`pool_from_env`
- :mod:`~specharness.engines.pool.keeper`: the keeper process (``python -m specharness.engines.pool keep SPEC``)
"""

from __future__ import annotations

from specharness.engines.pool.enginepool import EnginePool, pool_from_env
from specharness.engines.pool.keys import (
    GPU_SLOTS_ENV,
    IDLE_ENV,
    OWNER_ENV,
    POOL_ENV,
    asv_owner_pid,
    engine_key,
    gpu_slots,
    idle_limit_s,
    key_hash,
    pool_applies,
)
from specharness.engines.pool.lease import Lease
from specharness.engines.pool.pooled import PooledEngine

__all__ = [
    "GPU_SLOTS_ENV",
    "IDLE_ENV",
    "OWNER_ENV",
    "POOL_ENV",
    "EnginePool",
    "Lease",
    "PooledEngine",
    "asv_owner_pid",
    "engine_key",
    "gpu_slots",
    "idle_limit_s",
    "key_hash",
    "pool_applies",
    "pool_from_env",
]
