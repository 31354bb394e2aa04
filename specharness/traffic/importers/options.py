"""What an import is asked to do and what it answers: :class:`ImportOptions` and :class:`ImportResult`.

Every option is checked when the options are made, against the format table
(:data:`~specharness.traffic.importers.formats.FORMATS`), the reference modes and the workload limits, so a bad option
fails before any record is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from specharness._errors import ConfigError
from specharness.traffic.importers.fields import is_int
from specharness.traffic.importers.formats import FORMATS
from specharness.traffic.reference import REFERENCE_MODES, THRESHOLD_MODES
from specharness.traffic.workloads import MAX_TOKENS_LIMIT, Workload

__all__ = ["KEPT_REJECTIONS", "TURNS", "ImportOptions", "ImportResult"]

TURNS = ("first", "all", "replay")
KEPT_REJECTIONS = 20


@dataclass(frozen=True, slots=True)
class ImportOptions:
    """How a dataset file becomes cases; every field is checked here, so a bad option fails before any record is read.

    ``min_prompt_chars`` / ``max_prompt_chars`` count *characters* of the prompt text (for chat cases, the contents of
    every message sent, added up; for a replayed conversation, its later user turns too, not the answers to come),
    not tokens. ``sample`` draws that many cases stratified by group (see
    :func:`~specharness.traffic.importers.importing.stratified_sample`), deterministic for ``seed``.
    ``reference_field`` names the record field holding the reference answer (a string or a list of strings); a record
    with it gets a ``reference`` check in ``reference_mode``, one without it stays unchecked. ``raw_prompts`` sends
    plain prompts (prompt and csv formats) to ``/v1/completions`` as raw text instead of as one user message.
    """

    format: str = "auto"
    prompt_column: str | None = None
    id_field: str | None = None
    group_field: str | None = None
    max_tokens_field: str | None = None
    max_tokens: int = 256
    sample: int | None = None
    seed: int = 0
    min_prompt_chars: int | None = None
    max_prompt_chars: int | None = None
    turns: str = "first"
    reference_field: str | None = None
    reference_mode: str | None = None  # None: normalised-contains (MT-Bench: by category, mtbench.CATEGORY_MODES)
    reference_threshold: float | None = None
    raw_prompts: bool = False
    name: str | None = None

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ConfigError(f"format {self.format!r} is unknown; use one of {', '.join(FORMATS)}")
        if self.turns not in TURNS:
            raise ConfigError(f"turns {self.turns!r} is unknown; use one of {', '.join(TURNS)}")
        if not is_int(self.max_tokens) or not 1 <= self.max_tokens <= MAX_TOKENS_LIMIT:
            raise ConfigError(f"max_tokens must be an integer from 1 to {MAX_TOKENS_LIMIT}")
        if self.sample is not None and (not is_int(self.sample) or self.sample < 1):
            raise ConfigError("sample must be a positive integer")
        if not is_int(self.seed):
            raise ConfigError("seed must be an integer")
        for name in ("min_prompt_chars", "max_prompt_chars"):
            value = getattr(self, name)
            if value is not None and (not is_int(value) or value < 0):
                raise ConfigError(f"{name} must be a non-negative integer (characters, not tokens)")
        lo, hi = self.min_prompt_chars, self.max_prompt_chars
        if lo is not None and hi is not None and lo > hi:
            raise ConfigError("min_prompt_chars is larger than max_prompt_chars; no prompt could pass")
        if self.reference_mode is not None and self.reference_mode not in REFERENCE_MODES:
            raise ConfigError(
                f"reference_mode {self.reference_mode!r} is unknown; use one of {', '.join(REFERENCE_MODES)}"
            )
        if (
            self.reference_mode in THRESHOLD_MODES
            and self.reference_field is not None
            and self.reference_threshold is None
        ):
            raise ConfigError(f"reference_mode {self.reference_mode} needs reference_threshold, a number in (0, 1]")
        if (
            self.reference_threshold is not None
            and self.reference_mode is not None
            and self.reference_mode not in THRESHOLD_MODES
        ):
            raise ConfigError(f"reference_threshold applies to reference_mode {' or '.join(THRESHOLD_MODES)} only")
        if self.reference_threshold is not None and not 0 < self.reference_threshold <= 1:
            raise ConfigError("reference_threshold must be in (0, 1]")
        for name in ("prompt_column", "id_field", "group_field", "max_tokens_field", "reference_field", "name"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ConfigError(f"{name} must be a non-empty string")


@dataclass(frozen=True, slots=True)
class ImportResult:
    """The imported workload and what happened to every record: read = imported + skipped + not sampled + rejected."""

    workload: Workload
    format: str
    read: int
    imported: int
    skipped_by_filter: int
    not_sampled: int
    rejected: int
    # among the imported cases:
    group_defaulted: int  # group_field set but missing or empty in the record: group "default"
    max_tokens_defaulted: int  # max_tokens_field set (or an OpenAI body) but no max_tokens in the record: the default
    unchecked: int  # reference_field set but missing or empty in the record
    reference_modes: tuple[tuple[str, int], ...] = ()  # (mode, cases judged by it), in first-seen order
    rejections: tuple[str, ...] = field(default=())  # the first KEPT_REJECTIONS messages, one line each

    def summary(self) -> str:
        """One line for the terminal."""
        parts = [f"{self.workload.source} ({self.format}): {self.imported} imported of {self.read} read"]
        for count, label in (
            (self.rejected, "rejected"),
            (self.skipped_by_filter, "skipped by the length filter"),
            (self.not_sampled, "not sampled"),
            (self.group_defaulted, "without a group (-> default)"),
            (self.max_tokens_defaulted, "with the default max_tokens"),
            (self.unchecked, "without a reference or with an empty one (unchecked)"),
        ):
            if count:
                parts.append(f"{count} {label}")
        if self.reference_modes:
            parts.append("references judged by " + ", ".join(f"{m} ({n})" for m, n in self.reference_modes))
        return ", ".join(parts)
