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

__all__ = [
    "BANDS",
    "CPU_XEON_2",
    "CPU_ZEN4_2",
    "CPU_ZEN5_2",
    "Band",
    "band_for",
    "band_from_offset",
    "cpu_kind",
    "machine_kind",
]


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


_STEPPING = re.compile(r" stepping \S+(?=\)$)")


def cpu_kind(model: str, cores: object) -> str:
    """The kind of a machine without GPUs: ``cpu:<model>, <n> cores``, the model as the hardware record names it
    (experiment.rundir.cpu_model) without its stepping."""
    return f"cpu:{_STEPPING.sub('', model)}, {cores} cores"


CPU_XEON_2 = cpu_kind("Intel(R) Xeon(R) Processor", 2)  # its runs predate family and model in the record
CPU_ZEN4_2 = cpu_kind("AMD EPYC (family 25 model 17)", 2)
CPU_ZEN5_2 = cpu_kind("AMD EPYC (family 26 model 2)", 2)

BANDS = {
    CPU_XEON_2: Band(
        0.10,
        "2-core Xeon A/A, vLLM CPU 0.32.0, 40 cells in 5 runs (2026-12-04, reports/cpu-aa/20261204): 0 "
        "false verdicts; per-cell engine-instance offset sd 0.000, 95% upper limit 0.021 (specharness aa-summary, "
        "offset_evidence: run and cell offsets together), so the band is the 10% floor",
        offset_sd_upper=0.021,
        aa_runs=5,
    ),
    CPU_ZEN4_2: Band(
        0.10,
        "2-core EPYC Zen 4 A/A (the release against itself), vLLM CPU 0.32.0, 20 cells in 5 runs (2026-12-06, "
        "reports/cpu-release-controls/20261206 run1-run5, scorecard.md): 0 false verdicts; per-cell engine-instance "
        "offset sd 0.019, 95% upper limit 0.047 (specharness aa-summary, offset_evidence), so the band is the 10% floor",
        offset_sd_upper=0.047,
        aa_runs=5,
    ),
    CPU_ZEN5_2: Band(
        0.10,
        "2-core EPYC Zen 5 A/A (the release against itself), vLLM CPU 0.32.0, 20 cells in 5 runs (2026-12-07, "
        "reports/cpu-release-controls/20261207-settle controls/run1-run3, two-engines/settle1.2-run1, -run2): 0 false "
        "verdicts; per-cell engine-instance offset sd 0.000, 95% upper limit 0.020 (specharness aa-summary, "
        "offset_evidence), so the band is the 10% floor",
        offset_sd_upper=0.020,
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
UNRECORDED_FACTOR = 2.0  # a machine without its own A/A record: this many times the largest recorded upper limit of
# its class (CPUs, GPUs)


def band_from_offset(offset_sd_upper: float) -> float:
    """The band that covers 95% of offsets with this sd: exp(1.96 sd) - 1 rounded up to 1%, never under 10%."""
    return max(0.10, math.ceil((math.exp(1.96 * offset_sd_upper) - 1.0) * 100 - 1e-9) / 100)


def machine_kind(hardware: dict[str, Any]) -> str:
    """The kind of machine a run's hardware record names (the key of :data:`BANDS` and of the A/A identity record):
    ``h200`` for an H200, ``gpu:<its name>`` for another GPU, ``cpu:<model (family, model)>, <n> cores`` without GPUs
    (the stepping left out; ``cpu:unknown`` where the record names no CPU)."""
    gpus = hardware.get("gpus") or []
    if gpus:
        name = str(gpus[0])
        return "h200" if _H200.fullmatch(name.strip()) else f"gpu:{name}"
    cpu = str(hardware.get("cpu") or "").strip()
    if not cpu:
        return "cpu:unknown"
    return cpu_kind(cpu, hardware.get("cpu_count", "?"))


def band_for(hardware: dict[str, Any]) -> Band:
    """The band for a run's hardware record (:func:`machine_kind`); a machine without an A/A record of its own gets a
    stated conservative allowance, never another machine's record."""
    kind = machine_kind(hardware)
    if kind in BANDS:
        return BANDS[kind]
    cpu = kind.startswith("cpu:")
    what = "CPU" if cpu else "GPU"
    recorded = max(b.offset_sd_upper for k, b in BANDS.items() if k.startswith("cpu:") == cpu)
    sd = UNRECORDED_FACTOR * recorded
    return Band(
        band_from_offset(sd),
        f"no A/A record for this {what} ({kind.split(':', 1)[1]}): a conservative engine-instance offset allowance, "
        f"sd {sd:.3f} ({UNRECORDED_FACTOR:g}x the largest recorded {what} upper limit, {recorded:.3f}), and its band; "
        "record this machine's own with specharness run --profile aa (5 runs or more) and specharness aa-summary",
        offset_sd_upper=sd,
        aa_runs=0,
    )
