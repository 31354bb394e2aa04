"""The no-difference band and the engine-instance offset each kind of machine uses, both from that machine's A/A.

Two identical engines differ by a persistent engine-instance offset that no interval from one run can see. The A/A
record (several runs of baseline vs baseline-b on one machine) estimates the spread of that offset; what the record
cannot rule out is its upper confidence limit (:func:`specharness.reporting.aa_scorecard.offset_evidence`). The speed
interval adds that variance (``offset_sd_upper``², log scale), and the band follows from the same limit: it covers
95% of such offsets, exp(1.96 · sd_upper) - 1 rounded up to 1%, never under the practical 10%. Few A/A runs give a
large upper limit, hence a wide interval and band: run more A/A (``--profile aa``) to narrow both. Each entry names
the A/A record it came from; ``specharness aa-summary RUN...`` prints the figures for a new record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["BANDS", "Band", "band_for", "machine_kind"]


@dataclass(frozen=True, slots=True)
class Band:
    margin: float
    source: str
    offset_sd_upper: float = 0.0  # engine-instance offset sd (log scale), 95% upper limit from the A/A record
    aa_runs: int = 0

    @property
    def offset_var(self) -> float:
        """The offset variance a speed interval adds."""
        return self.offset_sd_upper**2


BANDS = {
    "cpu": Band(
        0.10,
        "2-core CPU A/A, vLLM CPU 0.32.0, 40 cells in 5 runs (2026-12-04, reports/cpu-aa/20261204): 0 "
        "false verdicts; engine-instance offset sd 0.000, 95% upper limit 0.022 (specharness aa-summary, "
        "offset_evidence), so the band is the 10% floor",
        offset_sd_upper=0.022,
        aa_runs=5,
    ),
    "gpu": Band(
        0.10,
        "H200 A/A, vLLM 0.26.0, 58 cells in 8 runs (2026-12-04, reports/gpu-h200-vllm0.26.0/20261204 "
        "control-run1, control-run2, control-12blocks, aa-run2..aa-run6; aa-summary.md): 0 false verdicts; "
        "engine-instance offset sd 0.000, 95% upper limit 0.027 (specharness aa-summary, offset_evidence), so the "
        "band is the 10% floor",
        offset_sd_upper=0.027,
        aa_runs=8,
    ),
}


def machine_kind(hardware: dict[str, Any]) -> str:
    """The kind of machine a run's hardware record names: ``gpu`` when its ``gpus`` is non-empty, else ``cpu`` (the
    key of :data:`BANDS` and of the A/A identity record)."""
    return "gpu" if hardware.get("gpus") else "cpu"


def band_for(hardware: dict[str, Any]) -> Band:
    """The band for a run's hardware record (:func:`machine_kind`)."""
    return BANDS[machine_kind(hardware)]
