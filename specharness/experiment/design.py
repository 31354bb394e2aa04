"""Experiment design: profiles, arms, and the ordered plan of paired cells.

A *cell* is (block, workload, client count); within a cell every arm serves the same cases in the same order,
arm order alternating between blocks (AB, BA, AB, ...) so drift over time does not favour one arm.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from specharness._errors import ConfigError
from specharness.engines.server import ArmSpec, validate_speculative_config
from specharness.records import cell_key

__all__ = ["ARM_NAMES", "PROFILES", "CellPlan", "Profile", "build_arms", "get_profile", "plan_cells"]

ARM_NAMES = ("baseline", "ngram", "baseline-sync", "baseline-b")


@dataclass(frozen=True, slots=True)
class Profile:
    """A declared design; ``min_correct_fraction`` and ``quality_tolerance`` are the quality rubric's thresholds."""

    name: str
    blocks: int
    workloads: tuple[str, ...]
    clients: tuple[int, ...]
    requests_per_cell: int
    warmups_per_cell: int
    arms: tuple[str, ...] = ("baseline", "ngram")
    max_tokens_cap: int | None = None
    min_correct_fraction: float = 0.5
    quality_tolerance: float = 0.0
    # Speedups within +/- this margin are "no practical difference": two identical engines on the 2-core CPU gave
    # 0.96-1.16 over 40 A/A cells (reports/cpu-aa), an engine-instance effect that request resampling cannot see.
    equivalence_margin: float = 0.10
    speculative: dict[str, Any] = field(
        default_factory=lambda: {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    )

    def measured_requests(self) -> int:
        return self.blocks * len(self.workloads) * len(self.clients) * self.requests_per_cell * len(self.arms)

    def warmup_requests(self) -> int:
        return self.blocks * len(self.workloads) * len(self.clients) * self.warmups_per_cell * len(self.arms)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "blocks": self.blocks, "workloads": list(self.workloads), "clients": list(self.clients),
            "requests_per_cell": self.requests_per_cell, "warmups_per_cell": self.warmups_per_cell,
            "arms": list(self.arms), "max_tokens_cap": self.max_tokens_cap,
            "min_correct_fraction": self.min_correct_fraction, "quality_tolerance": self.quality_tolerance,
            "equivalence_margin": self.equivalence_margin, "speculative": dict(self.speculative),
        }  # fmt: skip

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Profile:
        return cls(
            name=raw["name"], blocks=raw["blocks"], workloads=tuple(raw["workloads"]), clients=tuple(raw["clients"]),
            requests_per_cell=raw["requests_per_cell"], warmups_per_cell=raw["warmups_per_cell"],
            arms=tuple(raw["arms"]), max_tokens_cap=raw.get("max_tokens_cap"),
            min_correct_fraction=raw["min_correct_fraction"], quality_tolerance=raw["quality_tolerance"],
            equivalence_margin=raw.get("equivalence_margin", 0.10), speculative=dict(raw["speculative"]),
        )  # fmt: skip


PROFILES: dict[str, Profile] = {
    # The published reference design: 3 x 2 x 2 x 16 x 2 = 384 measured requests, plus 96 warmups.
    "standard": Profile("standard", blocks=3, workloads=("copy", "transform"), clients=(1, 8), requests_per_cell=16,
                        warmups_per_cell=4),
    # Fits a 2-core CPU in minutes: 2 x 2 x 2 x 4 x 2 = 64 measured requests, plus 16 warmups.
    "quick": Profile("quick", blocks=2, workloads=("copy", "transform"), clients=(1, 4), requests_per_cell=4,
                     warmups_per_cell=1, max_tokens_cap=96),
    # A/A control: two identical baseline engines through the same pipeline; the verdict must be "no difference".
    "aa": Profile("aa", blocks=3, workloads=("copy", "transform"), clients=(1, 4), requests_per_cell=6,
                  warmups_per_cell=1, arms=("baseline", "baseline-b"), max_tokens_cap=48, min_correct_fraction=0.0),
}


def get_profile(name: str) -> Profile:
    if name not in PROFILES:
        raise ConfigError(f"--profile {name!r} is unknown; use one of {', '.join(PROFILES)}")
    return PROFILES[name]


def override(profile: Profile, **changes: Any) -> Profile:
    """A copy of ``profile`` with the given fields replaced (None means keep), validated."""
    kept = {k: v for k, v in changes.items() if v is not None}
    result = replace(profile, **kept)
    validate_profile(result)
    return result


def validate_profile(p: Profile) -> None:
    if p.blocks < 1:
        raise ConfigError(f"--blocks {p.blocks}: need at least 1 block (2 or more for a paired order AB/BA)")
    if not p.clients or any(c < 1 for c in p.clients):
        raise ConfigError(f"--clients {','.join(map(str, p.clients))}: each client count must be a positive integer")
    if p.requests_per_cell < 1:
        raise ConfigError(f"--requests {p.requests_per_cell}: need at least 1 request per cell")
    if p.warmups_per_cell < 0:
        raise ConfigError(f"--warmups {p.warmups_per_cell}: must be 0 or more")
    if not p.workloads:
        raise ConfigError("--workloads: name at least one workload")
    unknown = [a for a in p.arms if a not in ARM_NAMES]
    if unknown:
        raise ConfigError(f"--arms {unknown[0]!r} is unknown; use {', '.join(ARM_NAMES)}")
    if len(set(p.arms)) != len(p.arms) or len(p.arms) < 2:
        raise ConfigError("--arms: give at least two distinct arms, e.g. baseline,ngram")
    if not 0.0 <= p.min_correct_fraction <= 1.0:
        raise ConfigError(f"--min-correct {p.min_correct_fraction}: must be a fraction from 0 to 1")
    if not 0.0 <= p.equivalence_margin < 1.0:
        raise ConfigError(f"--equivalence-margin {p.equivalence_margin}: must be a fraction from 0 to below 1")
    if p.max_tokens_cap is not None and p.max_tokens_cap < 1:
        raise ConfigError(f"--max-tokens-cap {p.max_tokens_cap}: must be a positive integer")
    validate_speculative_config(p.speculative)


def build_arms(profile: Profile) -> list[ArmSpec]:
    """Arm specs: ngram (speculation, vLLM turns async scheduling off), baseline (vLLM default scheduling),
    baseline-sync (async scheduling off, to separate the scheduling effect), baseline-b (A/A twin)."""
    specs = {
        "baseline": ArmSpec("baseline"),
        "baseline-b": ArmSpec("baseline-b"),
        "baseline-sync": ArmSpec("baseline-sync", async_scheduling=False),
        "ngram": ArmSpec("ngram", speculative_config=dict(profile.speculative)),
    }
    return [specs[a] for a in profile.arms]


@dataclass(frozen=True, slots=True)
class CellPlan:
    block: int
    workload: str
    clients: int
    arm_order: tuple[str, ...]

    def key(self, arm: str) -> str:
        return cell_key(self.block, self.workload, self.clients, arm)


def plan_cells(profile: Profile) -> list[CellPlan]:
    """Blocks in order; within a block every workload x client count; arm order reversed on odd blocks."""
    plans = []
    for block in range(profile.blocks):
        order = profile.arms if block % 2 == 0 else tuple(reversed(profile.arms))
        for workload in profile.workloads:
            for clients in profile.clients:
                plans.append(CellPlan(block, workload, clients, order))
    return plans
