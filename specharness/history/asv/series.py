"""One rule for naming a machine series: a kind of machine gets one name, so a run on a recorded kind continues its
series. ``specharness machine`` names this machine by :func:`series_name`; every committed series
(``results/<name>/machine.json``) is named by it (``tests/unit/test_machine_series.py``).

The rule: a CPU-only machine is ``cpu-<cores>core-<cpu>``, a GPU machine ``<gpus>-<cpu>`` (the GPU model, with a
count when there are several, then its host's CPU), where ``<cpu>`` is the CPU's kind from its family and model
(:func:`cpu_kind`: ``epyc-zen4``, ``xeon207``). Kinds recorded before this rule keep the name their series has
(:data:`RECORDED`); a series whose kind is no longer the one reviewed names its successor (:data:`SUPERSEDED`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["RECORDED", "SUPERSEDED", "Superseded", "cpu_kind", "gpu_kind", "series_name", "superseded_note"]

# the rule's name -> the committed series' name, for kinds measured before the rule (their history stays one series)
RECORDED: dict[str, str] = {
    "cpu-2core-xeon167": "cpu-2core-xeon",
    "h100-xeon143": "h100",
    "h200-xeon207": "h200",
}


@dataclass(frozen=True, slots=True)
class Superseded:
    """An older series another one replaces for review: the successor and why."""

    by: str
    why: str


SUPERSEDED: dict[str, Superseded] = {
    "h100": Superseded(
        "h100-xeon207",
        "an H100 on a Xeon model 143 host, 2026-12-06: the baseline arm only, 6 blocks; the current H100 record is "
        "h100-xeon207 (a Xeon model 207 host, both arms, 20 blocks, 2026-12-07)",
    ),
}

# AMD family 25 (0x19): models 0x00-0x0f Zen 3, 0x10-0x1f Zen 4 (Genoa), 0x60-0x7f and 0xa0-0xaf Zen 4; family 26 Zen 5
_AMD_ZEN = ((25, range(0x00, 0x10), "zen3"), (25, range(0x10, 0x20), "zen4"), (25, range(0x60, 0x80), "zen4"))
_FAMILY_MODEL = re.compile(r"\(family (\d+) model (\d+)")


def cpu_kind(cpu: str) -> str:
    """The CPU's kind from its model string (``cpu_model()``: name, then family and model): ``epyc-zen4`` for an AMD
    EPYC of family 25 model 17, ``xeon207`` for an Intel Xeon of family 6 model 207; else the name's words."""
    found = _FAMILY_MODEL.search(cpu)
    family, model = (int(found.group(1)), int(found.group(2))) if found else (-1, -1)
    low = cpu.lower()
    if "epyc" in low or "amd" in low:
        line = "epyc" if "epyc" in low else "amd"
        zen = next((z for f, models, z in _AMD_ZEN if f == family and model in models), "")
        zen = zen or ("zen5" if family == 26 else f"f{family}m{model}")
        return f"{line}-{zen}"
    if "xeon" in low and found:
        return f"xeon{model}"
    words = re.sub(r"\((R|TM|tm|r)\)|\bCPU\b|@.*$|\(family.*$", " ", cpu)
    slug = re.sub(r"[^a-z0-9]+", "-", words.lower()).strip("-") or "unknown"
    return f"{slug}-f{family}m{model}" if found else slug


def gpu_kind(gpus: list[str]) -> str:
    """``h100`` for one NVIDIA H100 80GB HBM3, ``4xh100`` for four (the first GPU's model: hosts carry one kind)."""
    first = re.sub(r"^(nvidia|amd)\s+", "", gpus[0].strip(), flags=re.IGNORECASE).split()[0].lower()
    model = re.sub(r"[^a-z0-9]+", "-", first).strip("-")
    return model if len(gpus) == 1 else f"{len(gpus)}x{model}"


def series_name(entry: Mapping[str, object]) -> str:
    """The series name of a machine entry (ASV's machine fields: ``cpu``, ``num_cpu``, ``gpu`` as
    :func:`~specharness.history.asv.machine.machine_info` writes them)."""
    gpu = str(entry.get("gpu") or "none")
    gpus = [g for g in gpu.split(", ") if g and g != "none"]
    cpu = cpu_kind(str(entry.get("cpu") or ""))
    name = f"{gpu_kind(gpus)}-{cpu}" if gpus else f"cpu-{entry.get('num_cpu')}core-{cpu}"
    return RECORDED.get(name, name)[:64]


def superseded_note(machine: str) -> str:
    """One line saying a series is superseded and by which ("" for a current series)."""
    old = SUPERSEDED.get(machine)
    if old is None:
        return ""
    return (
        f"note: series {machine} is superseded by {old.by} ({old.why}); name --machine {old.by} for the current record"
    )
