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

import math
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["BANDS", "Band", "band_for", "band_from_offset", "machine_kind"]


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
        "false verdicts; per-cell engine-instance offset sd 0.000, 95% upper limit 0.021 (specharness aa-summary, "
        "offset_evidence: run and cell offsets together), so the band is the 10% floor",
        offset_sd_upper=0.021,
        aa_runs=5,
    ),
    "h200": Band(
        0.12,
        "H200 A/A, vLLM 0.26.0, 58 cells in 8 runs (2026-12-04, reports/gpu-h200-vllm0.26.0/20261204 "
        "control-run1, control-run2, control-12blocks, aa-run2..aa-run6; aa-summary.md): 0 false verdicts; "
        "per-cell engine-instance offset sd 0.020, 95% upper limit 0.054 (specharness aa-summary, offset_evidence: "
        "run and cell offsets together), so the band is 12%",
        offset_sd_upper=0.054,
        aa_runs=8,
    ),
}
_H200 = re.compile(r"(NVIDIA )?H200( \d+ ?GB( HBM3e?)?)?", re.I)  # the SXM H200 only: NVL and GH200 differ
UNRECORDED_FACTOR = 2.0  # a GPU without its own A/A record: this many times the largest recorded GPU upper limit


def band_from_offset(offset_sd_upper: float) -> float:
    """The band that covers 95% of offsets with this sd: exp(1.96 sd) - 1 rounded up to 1%, never under 10%."""
    return max(0.10, math.ceil((math.exp(1.96 * offset_sd_upper) - 1.0) * 100 - 1e-9) / 100)


def machine_kind(hardware: dict[str, Any]) -> str:
    """The kind of machine a run's hardware record names (the key of :data:`BANDS` and of the A/A identity record):
    ``cpu`` without GPUs, ``h200`` for an H200, else ``gpu:<its name>``, a GPU without a record of its own."""
    gpus = hardware.get("gpus") or []
    if not gpus:
        return "cpu"
    name = str(gpus[0])
    return "h200" if _H200.fullmatch(name.strip()) else f"gpu:{name}"


def band_for(hardware: dict[str, Any]) -> Band:
    """The band for a run's hardware record (:func:`machine_kind`); a GPU without an A/A record of its own gets a
    stated conservative allowance, never another GPU's record."""
    kind = machine_kind(hardware)
    if kind in BANDS:
        return BANDS[kind]
    recorded = max(b.offset_sd_upper for k, b in BANDS.items() if k != "cpu")
    sd = UNRECORDED_FACTOR * recorded
    return Band(
        band_from_offset(sd),
        f"no A/A record for this GPU ({kind.removeprefix('gpu:')}): a conservative engine-instance offset allowance, "
        f"sd {sd:.3f} ({UNRECORDED_FACTOR:g}x the largest recorded GPU upper limit, {recorded:.3f}), and its band; "
        "record this machine's own with specharness run --profile aa (5 runs or more) and specharness aa-summary",
        offset_sd_upper=sd,
        aa_runs=0,
    )
