"""Frozen records the harness writes and reads: one per request, one per cell, one per engine.

:class:`RequestRecord`, :class:`CellRecord` and :class:`EngineRecord`, the typed journal events (:data:`EVENT_KINDS`;
an unknown kind reads back as :class:`OtherEvent`) and the run folder's :class:`Manifest`. ``SCHEMA_VERSION`` is
written on every journal line; every duration carries its unit in its name.
Fields per schema version: docs/development.md#the-journal-record-format.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = [
    "EVENT_KINDS",
    "READABLE_SCHEMAS",
    "SCHEMA_VERSION",
    "AttachWarningEvent",
    "CellRecord",
    "EngineFailedEvent",
    "EngineLaunchEvent",
    "EngineRecord",
    "EngineSpawnedEvent",
    "JournalEvent",
    "LookEvent",
    "Manifest",
    "MismatchEvent",
    "OtherEvent",
    "PeakProbeEvent",
    "RequestRecord",
    "SegmentEndEvent",
    "SegmentEvent",
    "SweepPlanEvent",
    "base_key",
    "cell_id",
    "cell_key",
    "completeness",
    "load_label",
    "rate_text",
]

SCHEMA_VERSION = 5
READABLE_SCHEMAS = (1, 2, 3, 4, 5)

COMPLETE = "complete"
TRUNCATED = "truncated"
INCOMPLETE = "incomplete"
FAILED = "failed"


def completeness(*, error_kind: str | None, saw_done: bool, finish_reason: str | None) -> str:
    """Verdict on a response: failed, incomplete (no [DONE] or no finish_reason), truncated (length) or complete."""
    if error_kind == "no_done":
        return INCOMPLETE
    if error_kind is not None:
        return FAILED
    if not saw_done or finish_reason is None:
        return INCOMPLETE
    if finish_reason == "length":
        return TRUNCATED
    return COMPLETE


def rate_text(rate_rps: float) -> str:
    """The one text form of an open-loop rate (requests per second): ``"0.5"``, ``"2"``, ``"inf"`` (all at once).
    Journals and JSON carry the text, since JSON has no infinity; ``float(rate_text(r))`` gives the rate back."""
    return "inf" if math.isinf(rate_rps) else f"{rate_rps:g}"


def load_label(clients: int, rate: str = "") -> str:
    """The one name of a cell's load: ``c<clients>`` for a closed loop of that many clients, ``r<rate>`` for an
    open loop at that rate (:func:`rate_text`)."""
    return f"r{rate}" if rate else f"c{clients}"


def cell_key(block: int, workload: str, load: str, arm: str) -> str:
    """The one format of a cell's key, ``b<block>/<workload>/<load>/<arm>`` with ``load`` from :func:`load_label`
    (``c4``, ``r2``); journaled cell ids add ``#s<segment>``."""
    return f"b{block}/{workload}/{load}/{arm}"


def cell_id(key: str, segment: int) -> str:
    """A journaled cell id: the cell key and the run segment that measured it (``#s<segment>``)."""
    return f"{key}#s{segment}"


def base_key(cell_id: str) -> str:
    """A journaled cell id without its segment suffix."""
    return cell_id.split("#", 1)[0]


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One request as the client saw it; failures are records too (``error_kind`` set)."""

    arm: str
    block: int
    workload: str
    group: str
    case_id: str
    clients: int
    warmup: bool
    cell: str
    seq: int
    started_unix_s: float
    send_s: float
    chunk_arrival_s: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    ttft_s: float = math.nan
    e2e_s: float = math.nan
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    finish_reason: str | None = None
    text: str = ""
    http_status: int | None = None
    error_kind: str | None = None
    error: str | None = None
    saw_done: bool = False
    verdict: str = FAILED
    correct: bool | None = None
    check_detail: str = ""
    spec_draft_tokens: int | None = None
    spec_accepted_tokens: int | None = None
    resumed: bool = False
    output_digest: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    rate: str = ""
    scheduled_s: float = math.nan
    send_lateness_s: float = math.nan
    first_token_id: int | None = None
    prefix_chain: str = ""

    @property
    def load(self) -> str:
        """The cell's load, ``c<clients>`` or ``r<rate>`` (:func:`load_label`)."""
        return load_label(self.clients, self.rate)

    @property
    def output_identity(self) -> str:
        """What two arms' outputs are compared by: the token-id digest, else (schema 1) the text."""
        return self.output_digest if self.output_digest is not None else "text:" + self.text

    @property
    def output_tokens(self) -> int:
        """Tokens generated: the server's usage figure, else the sum counted per chunk."""
        if self.completion_tokens is not None:
            return self.completion_tokens
        return sum(self.chunk_tokens)

    @property
    def tpot_s(self) -> float:
        """Time per output token after the first: (e2e - ttft) / (tokens - 1), NaN for one token or less."""
        n = self.output_tokens
        if self.error_kind is not None or n <= 1 or math.isnan(self.ttft_s):
            return math.nan
        return (self.e2e_s - self.ttft_s) / (n - 1)

    @property
    def inter_chunk_s(self) -> list[float]:
        """Gaps between successive content chunks (understates speculation: one chunk may carry many tokens)."""
        t = self.chunk_arrival_s
        return [b - a for a, b in itertools.pairwise(t)]

    @property
    def checked(self) -> bool:
        """The case had a rubric (an unchecked case is never counted correct or wrong)."""
        return self.check_detail != "unchecked"

    @property
    def counts_correct(self) -> bool:
        """The one rule for a right answer: the rubric passed on a response that finished by itself. A truncated
        answer (cut at max_tokens: often a loop) is never right, whatever its text contains."""
        return self.correct is True and self.verdict == COMPLETE

    @property
    def useful(self) -> bool:
        """Counts toward goodput: a right answer (the same rule as :attr:`counts_correct`)."""
        return self.counts_correct

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "request", "schema": SCHEMA_VERSION, **dataclasses.asdict(self)}


@dataclass(frozen=True, slots=True)
class EngineRecord:
    """An engine (one arm's vLLM server) as started: command, versions, effective settings, start time."""

    arm: str
    command: list[str]
    log_path: str
    port: int
    vllm_version: str
    start_s: float
    pid: int
    async_scheduling: bool | None
    speculative_config: dict[str, Any] | None
    effective_settings: dict[str, Any] = field(default_factory=dict)
    memory: dict[str, float] = field(default_factory=dict)
    engine_env: dict[str, str] = field(default_factory=dict)
    start_phases_s: dict[str, float] = field(default_factory=dict)
    first_request_s: float = math.nan  # one short request right after the start (NaN: not sent, or no answer)
    reused: dict[str, Any] | None = None  # from an engine pool: who started it, when, requests served before, pids
    instance: int = 0  # which of the run's engine instances of this arm (0 unless the profile renews engines)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "engine", "schema": SCHEMA_VERSION, **dataclasses.asdict(self)}


@dataclass(frozen=True, slots=True)
class CellRecord:
    """One measured cell (arm x block x workload x clients): wall time, counter deltas, memory, validity."""

    arm: str
    block: int
    workload: str
    clients: int
    cell: str
    wall_s: float
    requests: int
    harness_cpu_s: float = float("nan")
    counters: dict[str, float] = field(default_factory=dict)
    accepted_per_position: list[float] = field(default_factory=list)
    memory: dict[str, float] = field(default_factory=dict)
    valid: bool = True
    invalid_reason: str = ""
    resumed: bool = False
    order_index: int = -1  # the arm's place in its block's arm order (0 = first); -1: not recorded (schema 1)
    rate: str = ""
    delivery: dict[str, Any] = field(default_factory=dict)
    instance: int = 0  # the engine instance that served it, within its segment (0 unless the profile renews engines)

    @property
    def load(self) -> str:
        """The cell's load, ``c<clients>`` or ``r<rate>`` (:func:`load_label`)."""
        return load_label(self.clients, self.rate)

    @property
    def engine_instance(self) -> tuple[int, int]:
        """Which engine served the cell, over the whole run: (segment, instance). Every resume starts fresh
        engines, so a segment is an instance of its own too."""
        return int(self.cell.rsplit("#s", 1)[1]) if "#s" in self.cell else 0, self.instance

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "cell", "schema": SCHEMA_VERSION, **dataclasses.asdict(self)}


def _event_dict(kind: str, event: Any) -> dict[str, Any]:
    return {"kind": kind, "schema": SCHEMA_VERSION, **dataclasses.asdict(event)}


@dataclass(frozen=True, slots=True)
class SegmentEvent:
    """A run segment began (the first run is segment 0, each resume the next); ``skipped_cells``: keys already done."""

    KIND: ClassVar[str] = "segment"
    segment: int
    resume: bool
    started_unix_s: float
    skipped_cells: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return _event_dict(self.KIND, self)


@dataclass(frozen=True, slots=True)
class SegmentEndEvent:
    """A run segment ended: ``status`` complete, interrupted, engine-died or failed; ``error`` empty when none."""

    KIND: ClassVar[str] = "segment_end"
    segment: int
    status: str
    ended_unix_s: float
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return _event_dict(self.KIND, self)


@dataclass(frozen=True, slots=True)
class EngineSpawnedEvent:
    """An engine process was spawned (before it is ready): its pid, so a crashed run's engines can be found."""

    KIND: ClassVar[str] = "engine_spawned"
    arm: str
    pid: int
    segment: int
    instance: int = 0

    def to_dict(self) -> dict[str, Any]:
        return _event_dict(self.KIND, self)


@dataclass(frozen=True, slots=True)
class AttachWarningEvent:
    """An attached engine's speculation does not match its arm (the run refuses to measure)."""

    KIND: ClassVar[str] = "attach_warning"
    arm: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return _event_dict(self.KIND, self)


@dataclass(frozen=True, slots=True)
class MismatchEvent:
    """The engine's generation-token counter and the journal's completion tokens disagree for a cell."""

    KIND: ClassVar[str] = "mismatch"
    cell: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return _event_dict(self.KIND, self)


@dataclass(frozen=True, slots=True)
class LookEvent:
    """A look of ``--until-decided`` after ``blocks`` blocks: the ``<workload>/<load>`` cells still undecided."""

    KIND: ClassVar[str] = "look"
    blocks: int
    undecided: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return _event_dict(self.KIND, self)


@dataclass(frozen=True, slots=True)
class SweepPlanEvent:
    """A sweep's resolved open-loop rates for one workload: the levels taken of the reference arm's peak."""

    KIND: ClassVar[str] = "sweep_plan"
    workload: str
    reference_arm: str
    peak_rps: dict[str, float]
    levels: list[float]
    rates: list[str]

    def to_dict(self) -> dict[str, Any]:
        return _event_dict(self.KIND, self)


@dataclass(frozen=True, slots=True)
class PeakProbeEvent:
    """One arm's peak request rate, probed with every case at once: completed requests per second of the burst."""

    KIND: ClassVar[str] = "peak_probe"
    workload: str
    arm: str
    requests: int
    ok: int
    wall_s: float = math.nan  # NaN (JSON null) when nothing was measured
    peak_rps: float = math.nan

    def to_dict(self) -> dict[str, Any]:
        return _event_dict(self.KIND, self)


@dataclass(frozen=True, slots=True)
class EngineLaunchEvent:
    """How a segment's engines were started (:func:`specharness.engines.fleet.launch`): the mode, the device and
    its memory, each arm's GPU memory share, the order, and a retry with its cause."""

    KIND: ClassVar[str] = "engine_launch"
    segment: int
    report: dict[str, Any] = field(default_factory=dict)
    instance: int = 0

    def to_dict(self) -> dict[str, Any]:
        return _event_dict(self.KIND, self)


@dataclass(frozen=True, slots=True)
class EngineFailedEvent:
    """An arm's engine failed to start (or its release has no environment) and the run went on without it: the
    arm, the reason (the engine's own first error and its log) and the release it was to run."""

    KIND: ClassVar[str] = "engine_failed"
    arm: str
    segment: int
    reason: str
    release: str = ""
    instance: int = 0

    def to_dict(self) -> dict[str, Any]:
        return _event_dict(self.KIND, self)


@dataclass(frozen=True, slots=True)
class OtherEvent:
    """A journal line of a kind this version does not type (kept whole, never written by this version)."""

    kind: str
    fields: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "schema": SCHEMA_VERSION, **self.fields}


JournalEvent = (
    SegmentEvent
    | SegmentEndEvent
    | EngineSpawnedEvent
    | EngineLaunchEvent
    | EngineFailedEvent
    | AttachWarningEvent
    | MismatchEvent
    | LookEvent
    | SweepPlanEvent
    | PeakProbeEvent
    | OtherEvent
)
EVENT_KINDS: dict[str, type] = {
    cls.KIND: cls
    for cls in (
        SegmentEvent,
        SegmentEndEvent,
        EngineSpawnedEvent,
        EngineLaunchEvent,
        EngineFailedEvent,
        AttachWarningEvent,
        MismatchEvent,
        LookEvent,
        SweepPlanEvent,
        PeakProbeEvent,
    )
}


@dataclass(frozen=True, slots=True)
class Manifest:
    """The run folder's ``manifest.json``: what was run, on what, and how it ended. Optional parts (None, False or
    empty) are left out of the file, as earlier versions wrote it; ``kind`` is ``"sampled"`` for a distribution
    check and empty for a paired run."""

    config: dict[str, Any]
    harness: str = "specharness"
    schema: int = SCHEMA_VERSION
    kind: str = ""
    harness_commit: str = ""  # commit, with "dirty" and the diff's hash when the tree had changes
    harness_version: str = ""
    hardware: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)
    workloads: dict[str, Any] = field(default_factory=dict)
    status: str = "running"
    started_unix_s: float | None = None
    ended_unix_s: float | None = None
    segments: list[dict[str, Any]] = field(default_factory=list)  # {"segment", "started_unix_s", "resume", ...}
    block_orders: dict[str, list[str]] | None = None
    attached: dict[str, str] | None = None  # arm -> URL of an engine started elsewhere
    design: dict[str, Any] | None = None  # a distribution check's declared design
    streams: dict[str, str] | None = None  # a distribution check's stream -> engine
    synthetic: bool = False  # made by experiment.synthetic, not measured
    engines_reused: list[dict[str, Any]] | None = None  # pooled engines' provenance (EngineRecord.reused, with arm)
    arm_environments: dict[str, dict[str, str]] | None = None  # arm -> its vLLM: release, python, site, origin

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in _OPTIONAL or not _unset(v)}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Manifest:
        """A manifest as read from disk (any schema): unknown keys are ignored, missing ones take their defaults."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in names})


def _unset(value: Any) -> bool:
    return value is None or value is False or (isinstance(value, (str, list)) and not value)


_OPTIONAL = frozenset(
    {
        "kind",
        "harness_commit",
        "harness_version",
        "started_unix_s",
        "ended_unix_s",
        "segments",
        "block_orders",
        "attached",
        "design",
        "streams",
        "synthetic",
        "engines_reused",
        "arm_environments",
    }
)
