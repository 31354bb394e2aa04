"""Experiment design: profiles (the declared designs), their validation, the arms, and a profile's ordered plan.

A *cell* is (block, workload, load). Every block sends the same cases in the same order to every arm, so a block's
ratio compares the same work and case-to-case spread never reaches the block-to-block variance; blocks come in
mirrored pairs of arm orders (:mod:`specharness.experiment.plan`), so block counts are even.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from specharness._errors import ConfigError
from specharness.engines.server import ArmSpec, validate_speculative_config
from specharness.experiment.plan import CellPlan, Load, block_orders, order_plan_text, warm_round

__all__ = [
    "ARM_NAMES",
    "MAX_EXCLUDED_TIME",
    "MIN_PREFIX_TOKENS",
    "PREFIX_CACHING",
    "PRESETS",
    "PROFILES",
    "SLO_METRICS",
    "Profile",
    "build_arms",
    "comparison_pairs",
    "control_pairs",
    "get_profile",
    "plan_cells",
]

# The built-in arms, each a preset of :class:`ArmSpec` (a user's arm may start from one: ``--arm k8=ngram ...``).
PRESETS: dict[str, Callable[[Profile], ArmSpec]] = {
    "baseline": lambda p: ArmSpec("baseline"),
    "ngram": lambda p: ArmSpec("ngram", speculative_config=dict(p.speculative)),
    "baseline-sync": lambda p: ArmSpec("baseline-sync", async_scheduling=False),
    "baseline-b": lambda p: ArmSpec("baseline-b", twin_of="baseline"),
    "baseline-slow": lambda p: ArmSpec("baseline-slow", client_slowdown=p.known_slowdown, twin_of="baseline"),
}
ARM_NAMES = tuple(PRESETS)
PREFIX_CACHING = ("off", "on", "reset")
SLO_METRICS = ("ttft_ms", "tpot_ms", "e2e_ms")  # what --slo may bound, per request
MIN_PREFIX_TOKENS = 8  # --min-prefix-tokens: a shorter common prefix is left out of the common-prefix estimate
MAX_EXCLUDED_TIME = 0.10  # --max-excluded-time: baseline time share in failed pairs above which speed is inconclusive


@dataclass(frozen=True, slots=True)
class Profile:
    """A declared design. ``min_correct_fraction`` and ``quality_tolerance`` are the quality rubric's thresholds;
    ``equivalence_margin`` None takes the machine's band from its own A/A (:mod:`specharness.experiment.bands`);
    ``warmups_per_cell`` counts warmup *rounds*, each one request per client, on prompts never measured."""

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
    equivalence_margin: float | None = None
    band_source: str = ""
    min_same_work_fraction: float = 0.5
    min_prefix_tokens: int = MIN_PREFIX_TOKENS
    max_excluded_time: float = MAX_EXCLUDED_TIME
    prefix_caching: str = "off"
    order_seed: int = 0
    until_decided: bool = False
    max_blocks: int | None = None
    known_slowdown: float = 1.25
    # seconds every other engine has been quiet before an arm's cell starts (None: decided with the run from the
    # machine, ENGINE_SETTLE_S where the engines share CPU cores, 0 on a GPU): docs/method.md#what-a-run-does
    settle_s: float | None = None
    # closed-loop cells: the block's arms take turns round by round (one request per client each) instead of one
    # arm's whole cell after another's, so arms compared are seconds apart: docs/method.md#what-a-run-does
    interleave: bool = False
    # engine instances as replicates: every arm's engine is started afresh this many times over the run, each
    # instance serving blocks / instances consecutive blocks, so the engine-instance offset varies inside the run
    # and its interval measures it: docs/method.md#engine-instances-as-replicates
    instances: int = 1
    speculative: dict[str, Any] = field(
        default_factory=lambda: {
            "method": "ngram",
            "num_speculative_tokens": 4,
            "prompt_lookup_max": 4,
            "prompt_lookup_min": 2,
        }
    )
    # open loop (--rates): rates as text (rate_text), gamma gaps of shape `burstiness` (1 = Poisson), a seed per
    # block from `arrival_seed`, at most `max_concurrency` in flight; a cell is delivered when at least
    # `min_on_time_fraction` of its requests left within `late_tolerance_s` of their scheduled time
    rates: tuple[str, ...] = ()
    burstiness: float = 1.0
    arrival_seed: int = 0
    max_concurrency: int | None = None
    late_tolerance_s: float = 0.005
    min_on_time_fraction: float = 0.95
    # SLOs per request (ttft_ms, tpot_ms, e2e_ms; latency from the *scheduled* send) and the share of requests that
    # must be right and within them for a load to count as sustained
    slo: dict[str, float] = field(default_factory=dict)
    slo_fraction: float = 0.9
    # a saturation sweep: open-loop levels as fractions of the baseline's measured peak request rate, plus inf;
    # `workload_rates` holds the rates the peak probe resolved them to (journaled and saved, so --resume keeps them)
    sweep_levels: tuple[float, ...] = ()
    workload_rates: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # arms a user declared (--arm, --arms-file, --releases): every arm not a preset is here, and one here with a
    # preset's name replaces the preset; `comparisons` are the declared (reference, treatment) pairs (empty: the
    # default rule, comparison_pairs)
    arm_specs: tuple[ArmSpec, ...] = ()
    comparisons: tuple[tuple[str, str], ...] = ()

    def instance_of_block(self, block: int) -> int:
        """The engine instance (0 first) that a declared block runs on: consecutive blocks share one."""
        return min(block // max(self.blocks // max(self.instances, 1), 1), self.instances - 1)

    def instance_blocks(self) -> list[range]:
        """The declared blocks of each engine instance, in order."""
        per = self.blocks // self.instances
        return [range(i * per, (i + 1) * per) for i in range(self.instances)]

    def loads(self, workload: str) -> tuple[Load, ...]:
        """The load levels of one workload: closed loops first, then open-loop rates in the order given."""
        cap = self.max_concurrency or 0
        rates = self.workload_rates.get(workload, self.rates)
        return tuple(Load(c) for c in self.clients) + tuple(Load(cap, r) for r in rates)

    def _requests_per_load(self, warmup: bool) -> int:
        total = 0
        for w in self.workloads:
            loads = self.loads(w)
            if self.sweep_levels and w not in self.workload_rates:  # rates known once the peak is probed
                loads += (Load(0, "1"),) * (len(self.sweep_levels) + 1)
            for load in loads:
                total += self.warmups_per_cell * warm_round(load) if warmup else self.requests_per_cell
        return total

    def measured_requests(self) -> int:
        return self.blocks * self._requests_per_load(False) * len(self.arms)

    def warmup_requests(self) -> int:
        return self.blocks * self._requests_per_load(True) * len(self.arms)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "blocks": self.blocks,
            "workloads": list(self.workloads),
            "clients": list(self.clients),
            "requests_per_cell": self.requests_per_cell,
            "warmups_per_cell": self.warmups_per_cell,
            "arms": list(self.arms),
            "max_tokens_cap": self.max_tokens_cap,
            "min_correct_fraction": self.min_correct_fraction,
            "quality_tolerance": self.quality_tolerance,
            "equivalence_margin": self.equivalence_margin,
            "band_source": self.band_source,
            "min_same_work_fraction": self.min_same_work_fraction,
            "min_prefix_tokens": self.min_prefix_tokens,
            "max_excluded_time": self.max_excluded_time,
            "prefix_caching": self.prefix_caching,
            "order_seed": self.order_seed,
            "order_plan": order_plan_text(self.arms, self.interleave),
            **({"interleave": True} if self.interleave else {}),
            **({"instances": self.instances} if self.instances > 1 else {}),
            "until_decided": self.until_decided,
            "max_blocks": self.max_blocks,
            "known_slowdown": self.known_slowdown,
            **({"settle_s": self.settle_s} if self.settle_s is not None else {}),
            "speculative": dict(self.speculative),
            "rates": list(self.rates),
            "burstiness": self.burstiness,
            "arrival_seed": self.arrival_seed,
            "max_concurrency": self.max_concurrency,
            "late_tolerance_s": self.late_tolerance_s,
            "min_on_time_fraction": self.min_on_time_fraction,
            "slo": dict(self.slo),
            "slo_fraction": self.slo_fraction,
            "sweep_levels": list(self.sweep_levels),
            "workload_rates": {w: list(r) for w, r in self.workload_rates.items()},
            **({"arm_specs": [a.to_dict() for a in self.arm_specs]} if self.arm_specs else {}),
            **({"comparisons": [list(c) for c in self.comparisons]} if self.comparisons else {}),
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Profile:
        return cls(
            name=raw["name"],
            blocks=raw["blocks"],
            workloads=tuple(raw["workloads"]),
            clients=tuple(raw["clients"]),
            requests_per_cell=raw["requests_per_cell"],
            warmups_per_cell=raw["warmups_per_cell"],
            arms=tuple(raw["arms"]),
            max_tokens_cap=raw.get("max_tokens_cap"),
            min_correct_fraction=raw["min_correct_fraction"],
            quality_tolerance=raw["quality_tolerance"],
            equivalence_margin=raw.get("equivalence_margin", 0.10),
            band_source=raw.get("band_source", ""),
            min_same_work_fraction=raw.get("min_same_work_fraction", 0.5),
            min_prefix_tokens=raw.get("min_prefix_tokens", MIN_PREFIX_TOKENS),
            max_excluded_time=raw.get("max_excluded_time", MAX_EXCLUDED_TIME),
            prefix_caching=raw.get("prefix_caching", "on"),
            order_seed=raw.get("order_seed", 0),
            until_decided=raw.get("until_decided", False),
            max_blocks=raw.get("max_blocks"),
            known_slowdown=raw.get("known_slowdown", 1.25),
            settle_s=raw.get("settle_s"),
            interleave=bool(raw.get("interleave", False)),
            instances=int(raw.get("instances", 1)),
            speculative=dict(raw["speculative"]),
            rates=tuple(raw.get("rates", ())),
            burstiness=raw.get("burstiness", 1.0),
            arrival_seed=raw.get("arrival_seed", 0),
            max_concurrency=raw.get("max_concurrency"),
            late_tolerance_s=raw.get("late_tolerance_s", 0.005),
            min_on_time_fraction=raw.get("min_on_time_fraction", 0.95),
            slo=dict(raw.get("slo", {})),
            slo_fraction=raw.get("slo_fraction", 0.9),
            sweep_levels=tuple(raw.get("sweep_levels", ())),
            workload_rates={w: tuple(r) for w, r in raw.get("workload_rates", {}).items()},
            arm_specs=tuple(ArmSpec.from_dict(a) for a in raw.get("arm_specs", ())),
            comparisons=tuple((str(a), str(b)) for a, b in raw.get("comparisons", ())),
        )


PROFILES: dict[str, Profile] = {
    # The reference design: 4 blocks x 2 workloads x 2 client counts x 16 requests x 2 arms = 512 measured requests.
    "standard": Profile(
        "standard", blocks=4, workloads=("copy", "transform"), clients=(1, 8), requests_per_cell=16, warmups_per_cell=1
    ),
    # The default run: 4 blocks x 2 workloads x 2 client counts x 4 requests x 2 arms = 128 measured requests, 1 warmup round.
    "quick": Profile(
        "quick",
        blocks=4,
        workloads=("copy", "transform"),
        clients=(1, 4),
        requests_per_cell=4,
        warmups_per_cell=1,
        max_tokens_cap=96,
    ),
    # A/A control: two identical baseline engines through the same pipeline; the right verdict is "equivalent".
    "aa": Profile(
        "aa",
        blocks=4,
        workloads=("copy", "transform"),
        clients=(1, 4),
        requests_per_cell=6,
        warmups_per_cell=1,
        arms=("baseline", "baseline-b"),
        max_tokens_cap=48,
        min_correct_fraction=0.0,
    ),
    # Both controls in one run: the A/A twin, and baseline-slow, an identical engine whose every request's recorded
    # times the client multiplies by `known_slowdown` (a known true speedup of 1/1.25 = 0.80 at any concurrency).
    "control": Profile(
        "control",
        blocks=4,
        workloads=("copy", "transform"),
        clients=(1, 4),
        requests_per_cell=6,
        warmups_per_cell=1,
        arms=("baseline", "baseline-b", "baseline-slow"),
        max_tokens_cap=48,
        min_correct_fraction=0.0,
    ),
    # A release pair (specharness run --releases A,B; ASV's ReleasePair): baseline and ngram of two
    # releases side by side, 6 blocks of 4 requests, answers of at most 64 tokens, the arms taking turns round by
    # round within each cell, and every engine started afresh for each block: 6 engine instances per arm, so the
    # interval over instances (5 df) holds the engine-instance offset this run saw, with no machine record.
    "release": Profile(
        "release",
        blocks=6,
        workloads=("copy", "transform"),
        clients=(1, 4),
        requests_per_cell=4,
        warmups_per_cell=1,
        max_tokens_cap=64,
        interleave=True,
        instances=6,
    ),
    # A saturation sweep: each arm's peak request rate is probed (a cell's 16 requests at once), then open-loop
    # Poisson levels at 0.25, 0.5, 1, 1.5 and 2 times the baseline's peak (at 2x the queue grows by half the cell),
    # and all at once. SLOs: the first token within 1 s and 50 ms per output token after it (20 tokens/s, faster than
    # people read), from the scheduled send; the 2-core CPU baseline writes 30-33 ms per token at 1-4 clients.
    "sweep": Profile(
        "sweep",
        blocks=4,
        workloads=("copy", "transform"),
        clients=(),
        requests_per_cell=16,
        warmups_per_cell=1,
        max_tokens_cap=96,
        sweep_levels=(0.25, 0.5, 1.0, 1.5, 2.0),
        slo={"ttft_ms": 1000.0, "tpot_ms": 50.0},
    ),
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


def with_blocks(profile: Profile, blocks: int) -> Profile:
    """``profile`` with ``blocks`` blocks and its blocks per engine instance kept (one engine for the whole run where
    they do not divide the new count), validated."""
    per = profile.blocks // profile.instances
    instances = blocks // per if profile.instances > 1 and blocks % per == 0 else 1
    return override(profile, blocks=blocks, instances=instances)


def validate_profile(p: Profile) -> None:
    if p.blocks < 2 or p.blocks % 2:
        raise ConfigError(
            f"--blocks {p.blocks}: need an even number of blocks, at least 2 (arm orders come in "
            "mirrored pairs, AB then BA); 4 or more estimate the order effect"
        )
    if p.until_decided and (p.max_blocks is None or p.max_blocks < p.blocks or p.max_blocks % 2):
        raise ConfigError(
            f"--max-blocks {p.max_blocks}: --until-decided needs an even --max-blocks of at least --blocks ({p.blocks})"
        )
    if p.instances < 1 or p.blocks % p.instances:
        raise ConfigError(
            f"--instances {p.instances}: give a number of engine instances per arm that divides --blocks "
            f"({p.blocks}), e.g. {p.blocks} (a fresh engine every block) or 1 (one engine for the whole run)"
        )
    if p.instances > 1 and (p.until_decided or p.sweep_levels):
        raise ConfigError(
            f"--instances {p.instances}: renewing engines goes with a fixed design; leave out "
            + ("--until-decided" if p.until_decided else "the saturation sweep")
            + " or give --instances 1"
        )
    if p.settle_s is not None and not (math.isfinite(p.settle_s) and p.settle_s >= 0):
        raise ConfigError(f"--settle {p.settle_s}: give the seconds to wait, 0 or more, e.g. 1.2")
    if p.prefix_caching not in PREFIX_CACHING:
        raise ConfigError(
            f"--prefix-caching {p.prefix_caching!r}: use off (default), on, or reset (on, emptied before every cell)"
        )
    if not 0.0 <= p.min_same_work_fraction <= 1.0:
        raise ConfigError(f"--min-same-work {p.min_same_work_fraction}: must be a fraction from 0 to 1")
    if not p.min_prefix_tokens >= 0:
        raise ConfigError(f"--min-prefix-tokens {p.min_prefix_tokens}: give 0 or more tokens, e.g. 8 (the default)")
    if not 0.0 < p.max_excluded_time <= 1.0:
        raise ConfigError(f"--max-excluded-time {p.max_excluded_time}: give a share above 0, at most 1, e.g. 0.1")
    if not p.known_slowdown > 1.0:
        raise ConfigError(f"--known-slowdown {p.known_slowdown}: must be a factor above 1, e.g. 1.25")
    if any(c < 1 for c in p.clients):
        raise ConfigError(f"--clients {','.join(map(str, p.clients))}: each client count must be a positive integer")
    if not p.clients and not p.rates and not p.sweep_levels:
        raise ConfigError(
            "--clients/--rates: give client counts (closed loop, e.g. --clients 1,4), rates (open loop, "
            "e.g. --rates 0.5,2,inf) or both"
        )
    for level in p.sweep_levels:
        if not (math.isfinite(level) and level > 0):
            raise ConfigError(
                f"--levels {level!r}: each sweep level is a positive multiple of the baseline's peak rate"
            )
    for r in p.rates:
        if not (r == "inf" or (math.isfinite(float(r)) and float(r) > 0)):
            raise ConfigError(f"--rates {r!r}: a rate is requests per second, positive, or inf")
    if not (math.isfinite(p.burstiness) and p.burstiness > 0):
        raise ConfigError(f"--burstiness {p.burstiness}: must be a positive finite number (1 = Poisson arrivals)")
    if p.max_concurrency is not None and p.max_concurrency < 1:
        raise ConfigError(
            f"--max-concurrency {p.max_concurrency}: must be a positive integer (leave it out for no cap)"
        )
    unknown_slo = [k for k in p.slo if k not in SLO_METRICS]
    if unknown_slo:
        raise ConfigError(
            f"--slo {unknown_slo[0]}: unknown; bound any of {', '.join(SLO_METRICS)}, e.g. --slo ttft_ms=1000,tpot_ms=50"
        )
    bad_slo = [k for k, v in p.slo.items() if not (math.isfinite(v) and v > 0)]
    if bad_slo:
        raise ConfigError(f"--slo {bad_slo[0]}={p.slo[bad_slo[0]]}: must be a positive number of milliseconds")
    if not 0.0 < p.slo_fraction <= 1.0:
        raise ConfigError(f"--slo-fraction {p.slo_fraction}: must be a fraction above 0, at most 1")
    if p.requests_per_cell < 1:
        raise ConfigError(f"--requests {p.requests_per_cell}: need at least 1 request per cell")
    if p.warmups_per_cell < 0:
        raise ConfigError(f"--warmups {p.warmups_per_cell}: must be 0 or more")
    if not p.workloads:
        raise ConfigError("--workloads: name at least one workload")
    declared = {a.name for a in p.arm_specs}
    unknown = [a for a in p.arms if a not in ARM_NAMES and a not in declared]
    if unknown:
        raise ConfigError(
            f"--arms {unknown[0]!r} is unknown; use {', '.join(ARM_NAMES)} or declare it (--arm {unknown[0]}=baseline@...)"
        )
    if len(set(p.arms)) != len(p.arms) or len(p.arms) < 2:
        raise ConfigError("--arms: give at least two distinct arms, e.g. baseline,ngram")
    for spec in build_arms(p):
        if spec.twin_of and spec.twin_of not in p.arms:
            raise ConfigError(
                f"arm {spec.name}: twin_of {spec.twin_of!r} is not an arm of this run ({', '.join(p.arms)})"
            )
    for a, b in p.comparisons:
        missing = [x for x in (a, b) if x not in p.arms]
        if missing or a == b:
            raise ConfigError(
                f"--compare {a}:{b}: "
                + (f"{missing[0]} is not an arm of this run" if missing else "an arm with itself")
                + f"; the arms are {', '.join(p.arms)}"
            )
    if not 0.0 <= p.min_correct_fraction <= 1.0:
        raise ConfigError(f"--min-correct {p.min_correct_fraction}: must be a fraction from 0 to 1")
    if p.equivalence_margin is not None and not 0.0 <= p.equivalence_margin < 1.0:
        raise ConfigError(f"--equivalence-margin {p.equivalence_margin}: must be a fraction from 0 to below 1")
    if p.max_tokens_cap is not None and p.max_tokens_cap < 1:
        raise ConfigError(f"--max-tokens-cap {p.max_tokens_cap}: must be a positive integer")
    validate_speculative_config(p.speculative)


def build_arms(profile: Profile) -> list[ArmSpec]:
    """The run's arm specs in the profile's order: a declared arm (``profile.arm_specs``), else the preset of that
    name (:data:`PRESETS`: ngram, baseline, baseline-sync with async scheduling off, the A/A twin baseline-b, the
    known-slowdown control baseline-slow); prefix caching as the profile says, for every arm."""
    declared = {a.name: a for a in profile.arm_specs}
    caching = profile.prefix_caching != "off"
    return [replace(declared.get(a) or PRESETS[a](profile), prefix_caching=caching) for a in profile.arms]


def comparison_pairs(profile: Profile) -> list[tuple[str, str]]:
    """The (reference, treatment) pairs a run compares. Declared pairs (``profile.comparisons``) when given; else, when
    every arm is a preset, the built-in rule (speculation against each baseline, the scheduling effect, and the
    controls against the baseline); else the first arm against every other. Every control (an arm with ``twin_of``)
    is compared with the arm it copies, whatever was declared."""
    arms = build_arms(profile)
    names = [a.name for a in arms]
    if profile.comparisons:
        pairs = list(profile.comparisons)
    elif not profile.arm_specs:
        pairs = [(ref, "ngram") for ref in ("baseline", "baseline-sync") if "ngram" in names and ref in names]
        if "baseline" in names and "baseline-sync" in names:
            pairs.append(("baseline", "baseline-sync"))
    else:
        reference = next(a.name for a in arms if not a.twin_of)
        pairs = [(reference, a.name) for a in arms if a.name != reference and not a.twin_of]
    pairs += [(a.twin_of, a.name) for a in arms if a.twin_of and (a.twin_of, a.name) not in pairs]
    return pairs


def control_pairs(profile: Profile) -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """The run's A/A pairs (an identical twin against the arm it copies) and its known-effect pairs (a twin whose
    times the client multiplies by ``client_slowdown``)."""
    aa: set[tuple[str, str]] = set()
    effect: set[tuple[str, str]] = set()
    for a in build_arms(profile):
        if a.twin_of:
            (aa if a.client_slowdown == 1.0 else effect).add((a.twin_of, a.name))
    return aa, effect


def plan_cells(profile: Profile, blocks: range | None = None) -> list[CellPlan]:
    """Blocks in order; within a block every workload x load, arms in the block's mirrored order."""
    which = blocks if blocks is not None else range(profile.blocks)
    orders = block_orders(profile.arms, max(which.stop, 1), profile.order_seed)
    return [
        CellPlan(block, workload, load, orders[block])
        for block in which
        for workload in profile.workloads
        for load in profile.loads(workload)
    ]
