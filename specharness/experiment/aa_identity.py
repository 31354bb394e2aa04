"""The A/A identity record: how often two identical engines write identical greedy outputs, per kind of machine and
client count; a run without an A/A arm judges its greedy identity against it.

:data:`AA_IDENTITY` holds the records (:class:`AAIdentity`: per prompt, identical pairs over pairs), keyed by
:func:`~specharness.experiment.bands.machine_kind`; :func:`aa_identity_for` gives a run's. A kind of machine or a
client count without a record of its own has none. Rules: docs/method.md#the-aa-identity-record.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from specharness.experiment.bands import CPU_XEON_2, CPU_ZEN4_2, machine_kind

__all__ = ["AA_IDENTITY", "AA_IDENTITY_LONGER", "AAIdentity", "aa_identity_for"]


@dataclass(frozen=True, slots=True)
class AAIdentity:
    """Identical greedy outputs of baseline-b vs baseline at one client count on one kind of machine."""

    kind: str  # the machine kind, as bands.BANDS keys it (bands.CPU_XEON_2, "h200")
    clients: int
    identical_pairs: int
    pairs: int
    case_counts: tuple[tuple[int, int, int], ...]  # (identical pairs, pairs, prompts with those counts)
    runs: tuple[str, ...]  # the A/A run folders it came from
    source: str  # machine, engine, workloads and cap, where the runs are
    max_output_tokens: int = 0  # the longest baseline output in the record's pairs

    @property
    def cases(self) -> int:
        return sum(n for _, _, n in self.case_counts)

    def case_shares(self) -> list[float]:
        """Each prompt's share of identical pairs (one value per prompt: the unit of the test)."""
        return [same / total for same, total, n in self.case_counts for _ in range(n) if total]

    @property
    def identical_share(self) -> float:
        """Mean per-prompt share of identical pairs."""
        shares = self.case_shares()
        return sum(shares) / len(shares) if shares else float("nan")


_CPU_SOURCE = (
    "2-core Xeon A/A, vLLM CPU 0.32.0, workloads copy, transform, free, abstain at max_tokens 48, 4 blocks in each "
    "of 5 runs (2026-12-04, reports/cpu-aa/20261204 run1-run5)"
)
_H200_SOURCE = (
    "H200 A/A, vLLM 0.26.0, workloads copy, transform, free, abstain at max_tokens 48 (control-run1, control-run2, "
    "aa-run2..aa-run6: 4 blocks each; control-12blocks: copy, transform at 1 client, 12 blocks) (2026-12-04, "
    "reports/gpu-h200-vllm0.26.0/20261204, not its WritingBench A/A, which has no journal)"
)
_CPU_RUNS = tuple(f"reports/cpu-aa/20261204/run{k}" for k in range(1, 6))
_H200_RUNS = tuple(
    f"reports/gpu-h200-vllm0.26.0/20261204/{name}"
    for name in ("control-run1", "control-run2", "control-12blocks", *(f"aa-run{k}" for k in range(2, 7)))
)

# From measure_aa_identity on the runs named (tests/unit/test_aa_identity.py recomputes them).
AA_IDENTITY: dict[str, dict[int, AAIdentity]] = {
    CPU_XEON_2: {
        1: AAIdentity(CPU_XEON_2, 1, 320, 320, ((20, 20, 16),), _CPU_RUNS, _CPU_SOURCE, max_output_tokens=48),
        4: AAIdentity(
            CPU_XEON_2,
            4,
            317,
            320,
            ((18, 20, 1), (19, 20, 1), (20, 20, 14)),
            _CPU_RUNS,
            _CPU_SOURCE,
            max_output_tokens=48,
        ),
    },
    "h200": {
        1: AAIdentity(
            "h200", 1, 1088, 1088, ((28, 28, 16), (40, 40, 16)), _H200_RUNS, _H200_SOURCE, max_output_tokens=48
        ),
        8: AAIdentity("h200", 8, 896, 896, ((28, 28, 32),), _H200_RUNS, _H200_SOURCE, max_output_tokens=48),
    },
}


_CPU_96_SOURCE = (
    "2-core EPYC Zen 4 A/A, vLLM CPU 0.32.0, workloads copy, transform at max_tokens 96 (outputs up to 62 tokens), 4 "
    "blocks in each of 3 runs (2026-12-06, reports/cpu-aa/20261206-cap96 run1-run3)"
)
_CPU_96_RUNS = tuple(f"reports/cpu-aa/20261206-cap96/run{k}" for k in range(1, 4))

# Records at longer outputs, for runs whose answers outrun the records above (:func:`aa_identity_for` picks).
AA_IDENTITY_LONGER: dict[str, dict[int, AAIdentity]] = {
    CPU_ZEN4_2: {
        1: AAIdentity(CPU_ZEN4_2, 1, 144, 144, ((12, 12, 12),), _CPU_96_RUNS, _CPU_96_SOURCE, max_output_tokens=62),
        4: AAIdentity(CPU_ZEN4_2, 4, 144, 144, ((12, 12, 12),), _CPU_96_RUNS, _CPU_96_SOURCE, max_output_tokens=62),
    },
}


def aa_identity_for(hardware: dict[str, Any], tokens: int | None = None) -> dict[int, AAIdentity]:
    """Client count -> the A/A identity record for a run's hardware record (its
    :func:`~specharness.experiment.bands.machine_kind`, as the band is picked) whose answers run to ``tokens`` (the
    run's cap): per client count the shortest record whose outputs reach that length, else the longest (None: the
    longest)."""
    kind = machine_kind(hardware)
    by_clients: dict[int, list[AAIdentity]] = {}
    for records in (AA_IDENTITY, AA_IDENTITY_LONGER):
        for clients, record in records.get(kind, {}).items():
            by_clients.setdefault(clients, []).append(record)
    length = attrgetter("max_output_tokens")
    out = {}
    for clients, found in by_clients.items():
        reaching = [r for r in found if tokens is not None and r.max_output_tokens >= tokens]
        out[clients] = min(reaching, key=length) if reaching else max(found, key=length)
    return out
