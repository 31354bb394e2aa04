"""What ASV records about the machine: enough to tell two CPUs (or GPUs) apart, under a name derived from them.

ASV keeps one series per machine name and copies the machine entry (``~/.asv-machine.json``) into
``results/<machine>/machine.json`` and into every result's parameters. ``asv machine --yes`` stores a host name and
little else, so two different 2-core CPUs share a series. :func:`register_machine` writes an entry with the CPU
model, core count, RAM, OS, and each GPU's name, memory and driver, under the series name of its kind
(:func:`~specharness.history.asv.series.series_name`: ``cpu-2core-epyc-zen4``, ``h100-xeon207``), so a run on a
recorded kind continues its series and a run on other hardware starts its own instead of moving ours.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
from pathlib import Path
from typing import Any

from specharness._errors import ConfigError
from specharness.experiment.rundir import cpu_model
from specharness.history.asv.series import series_name

__all__ = ["machine_info", "register_machine"]


def _ram_gib() -> int:
    """Installed memory rounded to whole GiB (ASV copies the entry into every result's parameters: a value that
    drifts with the kernel's reservations would split the series)."""
    import psutil

    return round(psutil.virtual_memory().total / 2**30)


def _os() -> str:
    """The distribution's name, without the kernel build (which changes with every host update)."""
    with contextlib.suppress(OSError):
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip(chr(34))
    return platform.system()


def _gpus() -> list[dict[str, str]]:
    with contextlib.suppress(Exception):
        import pynvml

        pynvml.nvmlInit()
        try:
            driver = pynvml.nvmlSystemGetDriverVersion()
            out = []
            for i in range(pynvml.nvmlDeviceGetCount()):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                name = pynvml.nvmlDeviceGetName(h)
                mem = pynvml.nvmlDeviceGetMemoryInfo(h).total / 2**30
                out.append(
                    {
                        "name": name if isinstance(name, str) else name.decode(),
                        "memory": f"{mem:.0f} GiB",
                        "driver": driver if isinstance(driver, str) else driver.decode(),
                    }
                )
            return out
        finally:
            pynvml.nvmlShutdown()
    return []


def machine_info(name: str | None = None) -> dict[str, Any]:
    """The machine entry: ASV's fields (machine, os, arch, cpu, num_cpu, ram) plus gpu, gpu_memory, gpu_driver."""
    cpu, cores, gpus = cpu_model(), os.cpu_count() or 0, _gpus()
    info = {
        "machine": name or "",
        "os": _os(),
        "arch": platform.machine(),
        "cpu": cpu,
        "num_cpu": str(cores),
        "ram": f"{_ram_gib()} GiB",
        "gpu": ", ".join(g["name"] for g in gpus) or "none",
        "gpu_memory": ", ".join(g["memory"] for g in gpus) or "none",
        "gpu_driver": gpus[0]["driver"] if gpus else "none",
    }
    return {**info, "machine": name or series_name(info)}


_HARDWARE = ("cpu", "num_cpu", "gpu", "gpu_memory")


def _check_same_hardware(info: dict[str, Any], known: Any, where: str) -> None:
    """A machine name is one series: refuse it when ``known`` (an entry already registered under that name) names
    another CPU or GPU."""
    if not isinstance(known, dict):
        return
    differ = [k for k in _HARDWARE if known.get(k) and info.get(k) and str(known[k]) != str(info[k])]
    if differ:
        theirs = ", ".join(f"{k} {known[k]!r}" for k in differ)
        raise ConfigError(
            f"--name {info['machine']}: {where} registers that name for {theirs}, not this machine's "
            f"{', '.join(f'{k} {info[k]!r}' for k in differ)}; pick another name (or none: one is "
            "derived from the hardware)"
        )


def register_machine(
    name: str | None = None, path: Path | None = None, results_dir: Path | None = None
) -> dict[str, Any]:
    """Write (or refresh) the entry in ASV's machine file; returns it. ``asv run --machine <name>`` then uses it.
    A name already registered for another CPU or GPU (in that file or in ``results_dir/<name>/machine.json``,
    default ``./results``) is refused with :class:`ConfigError`."""
    path = path or Path.home() / ".asv-machine.json"
    info = machine_info(name)
    data: dict[str, Any] = {}
    with contextlib.suppress(OSError, json.JSONDecodeError):
        data = json.loads(path.read_text())
    data = data if isinstance(data, dict) else {}
    _check_same_hardware(info, data.get(info["machine"]), str(path))
    committed = (results_dir or Path.cwd() / "results") / info["machine"] / "machine.json"
    with contextlib.suppress(OSError, json.JSONDecodeError):
        _check_same_hardware(info, json.loads(committed.read_text()), str(committed))
    data[info["machine"]] = info
    data["version"] = 1
    path.write_text(json.dumps(data, indent=4) + "\n")
    return info
