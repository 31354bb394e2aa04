"""What every step of a run receives: the plan's profile, the settings the steps read, the engines and the journal.

The driver builds one :class:`RunContext` per segment and passes it down; steps return records and never reach back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from specharness.engines.memory import MemoryProbe
from specharness.experiment.design import Profile
from specharness.experiment.engineset import EngineSet
from specharness.experiment.journal import Journal
from specharness.experiment.quiet import EngineQuiet
from specharness.traffic.client import Sampling
from specharness.traffic.workloads import Case

__all__ = ["ProgressFn", "RunContext", "UndecidedFn"]

ProgressFn = Callable[[int], None]
UndecidedFn = Callable[[Path], set[tuple[str, str]]]  # run folder -> (workload, load label) cells still undecided


@dataclass(frozen=True, slots=True)
class RunContext:
    """One run segment as its steps see it. ``profile`` is the run's one profile, planning by workload *name* (the
    declared profile may list a user workload by its file path); ``sequences`` holds each workload's cases in the
    order cells take them; ``out_dir``, ``sampling`` and ``request_timeout_s`` are the configuration's."""

    profile: Profile
    out_dir: Path
    sampling: Sampling
    request_timeout_s: float
    sequences: dict[str, tuple[Case, ...]]
    engines: EngineSet
    journal: Journal
    segment: int
    progress: ProgressFn | None = None
    instance: int = 0  # the engine instance now serving (the profile's instances renew the engines)
    probe: MemoryProbe = field(default_factory=MemoryProbe)
    quiet: EngineQuiet = field(default_factory=EngineQuiet)  # the arm that sent last (engines quiet before a cell)
