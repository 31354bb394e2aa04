"""The no-difference band and the engine-instance offset each kind of machine uses, both from that machine's A/A.

Two identical engines differ by a persistent engine-instance offset that no interval from one run can see. The A/A
record (several runs of an engine against its identical twin on one machine) estimates the spread of that offset; what
the record cannot rule out is its upper confidence limit (:func:`specharness.reporting.aa_scorecard.offset_evidence`).
The speed interval adds that variance (``offset_sd_upper``², log scale), and the band follows from the same limit: it
covers 95% of such offsets, exp(1.96 · sd_upper) - 1 rounded up to 1%, never under the practical 10%. Few A/A runs give
a large upper limit, hence a wide interval and band: run more A/A to narrow both. The records are data, one file a kind
of machine (:mod:`specharness.experiment.machine_record`); ``specharness aa-record RUN...`` writes a machine's own.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any

from specharness.experiment.machine_record import Band, band_from_offset, machine_records

__all__ = [
    "CPU_XEON_2",
    "CPU_ZEN4_2",
    "CPU_ZEN5_2",
    "Band",
    "band_for",
    "band_from_offset",
    "cpu_kind",
    "machine_kind",
    "recorded_bands",
]


_STEPPING = re.compile(r" stepping \S+(?=\)$)")


def cpu_kind(model: str, cores: object) -> str:
    """The kind of a machine without GPUs: ``cpu:<model>, <n> cores``, the model as the hardware record names it
    (experiment.rundir.cpu_model) without its stepping."""
    return f"cpu:{_STEPPING.sub('', model)}, {cores} cores"


# The CPUs whose records the package holds (experiment/aa_records/)
CPU_XEON_2 = cpu_kind("Intel(R) Xeon(R) Processor", 2)  # its runs predate family and model in the record
CPU_ZEN4_2 = cpu_kind("AMD EPYC (family 25 model 17)", 2)
CPU_ZEN5_2 = cpu_kind("AMD EPYC (family 26 model 2)", 2)

_H200 = re.compile(r"(NVIDIA )?H200( \d+ ?GB( HBM3e?)?)?", re.I)  # the SXM H200 only: NVL and GH200 differ
UNRECORDED_FACTOR = 2.0  # a machine without its own A/A record: this many times the largest recorded upper limit of
# its class (CPUs, GPUs)


def machine_kind(hardware: dict[str, Any]) -> str:
    """The kind of machine a run's hardware record names (the key of its A/A record, :mod:`specharness.experiment.machine_record`):
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


def recorded_bands() -> dict[str, Band]:
    """Each recorded kind of machine's band (:func:`~specharness.experiment.machine_record.machine_records`)."""
    return {kind: r.band for kind, r in machine_records().items() if r.band is not None}


def _unrecorded_memory(bands: dict[str, Band], cpu: bool) -> float:
    """The peak-memory offset allowance of a machine whose record holds none: :data:`UNRECORDED_FACTOR` times the
    largest recorded of its class (NaN where none of its class has one)."""
    recorded = [b.memory_sd_upper for k, b in bands.items() if k.startswith("cpu:") == cpu and b.memory_sd_upper >= 0]
    return UNRECORDED_FACTOR * max(recorded) if recorded else math.nan


def band_for(hardware: dict[str, Any], model: str | None = None) -> Band:
    """The band for a run's hardware record (:func:`machine_kind`) and the model it served (None: not checked); a
    machine without an A/A record of its own, or whose record was measured with another model (offsets belong to the
    machine and the model), gets a stated conservative allowance, never another machine's or model's record (the same
    for the peak-memory allowance of a record that holds none)."""
    kind = machine_kind(hardware)
    bands = recorded_bands()
    cpu = kind.startswith("cpu:")
    record = machine_records().get(kind)
    if record is not None and kind in bands and not record.applies_to(model):
        return _unrecorded(
            bands,
            cpu,
            f"the A/A record of this {'CPU' if cpu else 'GPU'} was measured with {record.model}, not {model}",
        )
    if kind in bands:
        band = bands[kind]
        if math.isnan(band.memory_sd_upper) and math.isfinite(fallback := _unrecorded_memory(bands, cpu)):
            note = f"; this record holds no peak-memory allowance: sd {fallback:.3f}, {UNRECORDED_FACTOR:g}x the largest recorded"
            band = replace(band, memory_sd_upper=fallback, source=band.source + note)
        return band
    what = "CPU" if cpu else "GPU"
    return _unrecorded(bands, cpu, f"no A/A record for this {what} ({kind.split(':', 1)[-1]})")


def _unrecorded(bands: dict[str, Band], cpu: bool, why: str) -> Band:
    """The stated conservative band and allowances of a run no record speaks for (``why``)."""
    what = "CPU" if cpu else "GPU"
    same_class = [b.offset_sd_upper for k, b in bands.items() if k.startswith("cpu:") == cpu]
    recorded = max(same_class or [b.offset_sd_upper for b in bands.values()] or [0.0])
    sd = UNRECORDED_FACTOR * recorded
    memory = _unrecorded_memory(bands, cpu)
    memory_note = f"; peak-memory allowance sd {memory:.3f} likewise" if math.isfinite(memory) else ""
    return Band(
        band_from_offset(sd),
        f"{why}: a conservative engine-instance offset allowance, "
        f"sd {sd:.3f} ({UNRECORDED_FACTOR:g}x the largest recorded {what} upper limit, {recorded:.3f}), and its band; "
        "record this machine's own with specharness run --profile aa (5 runs or more) and specharness aa-record, or "
        "give the run --instances, which measures the offset itself" + memory_note,
        offset_sd_upper=sd,
        aa_runs=0,
        memory_sd_upper=memory,
    )
