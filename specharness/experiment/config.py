"""The run configuration: everything one experiment needs, validated on creation, saved (less secrets) in the manifest."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specharness._errors import ConfigError
from specharness.experiment.design import Profile
from specharness.experiment.telemetry import KEEP_TEXT
from specharness.traffic.client import Sampling

__all__ = ["DTYPES", "RunConfig", "canonical_vllm_args"]

DTYPES = ("auto", "bfloat16", "float16", "half", "float32", "float")  # what vLLM's --dtype accepts


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Everything one experiment needs; saved (less secrets) in the run folder's manifest."""

    profile: Profile
    out_dir: Path
    model: str = "default"
    sampling: Sampling = field(default_factory=Sampling)
    request_timeout_s: float = 300.0
    host: str = "127.0.0.1"
    port: int = 0
    max_model_len: int = 2048
    dtype: str = "bfloat16"  # vLLM's --dtype, the same for every arm
    kv_cache_gib: int | None = 2
    gpu_memory_utilization: float | None = None
    start_timeout_s: float = 900.0
    api_key: str | None = field(default=None, repr=False)
    python: str = ""
    extra_engine_args: tuple[str, ...] = ()
    fsync: bool = True
    start_together: bool = True  # spawn every engine before waiting for any (False: one after another)
    attach: dict[str, str] = field(default_factory=dict)  # arm -> base URL of an engine started elsewhere
    keep_text: str = "full"  # full, hash or none: what prompt and output text reaches disk (experiment.telemetry)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """One line naming the flag for any setting vLLM or the client could not use."""

        def finite(x: float | None) -> bool:
            return x is not None and math.isfinite(x)

        t, gpu = self.sampling.temperature, self.gpu_memory_utilization
        rules = [
            ("--temperature", t, finite(t) and t >= 0, "0 (greedy) or a finite number above it"),
            (
                "--request-timeout",
                self.request_timeout_s,
                finite(self.request_timeout_s) and self.request_timeout_s > 0,
                "a positive number of seconds",
            ),
            (
                "--start-timeout",
                self.start_timeout_s,
                finite(self.start_timeout_s) and self.start_timeout_s > 0,
                "a positive number of seconds",
            ),
            ("--max-model-len", self.max_model_len, self.max_model_len >= 16, "at least 16 tokens"),
            ("--kv-cache-gib", self.kv_cache_gib, self.kv_cache_gib is None or self.kv_cache_gib >= 1, "at least 1"),
            (
                "--gpu-memory-utilization",
                gpu,
                gpu is None or (finite(gpu) and 0 < gpu <= 1),
                "a fraction above 0, at most 1",
            ),
            ("--port", self.port, 0 <= self.port <= 65535, "0 (pick free ports) or a TCP port up to 65535"),
        ]
        if self.profile.prefix_caching == "reset" and self.host not in ("127.0.0.1", "localhost", "::1"):
            raise ConfigError(
                f"--prefix-caching reset with --host {self.host}: resetting needs vLLM's dev endpoints, "
                "which specharness enables on a loopback host only; use --prefix-caching off"
            )
        if self.attach and sorted(self.attach) != sorted(self.profile.arms):
            raise ConfigError(
                f"--attach names {', '.join(sorted(self.attach))} but the run's arms are "
                f"{', '.join(self.profile.arms)}; give one URL per arm (or --arms to match)"
            )
        if self.dtype not in DTYPES:
            raise ConfigError(f"--dtype {self.dtype!r}: use one of vLLM's {', '.join(DTYPES)}")
        if any(arg == "--dtype" or arg.startswith("--dtype=") for arg in self.extra_engine_args):
            raise ConfigError(
                "--engine-arg --dtype: the engines' dtype is an engine option, journaled in the manifest; "
                "use --dtype (e.g. --dtype float32) instead"
            )
        if self.keep_text not in KEEP_TEXT:
            raise ConfigError(f"--keep-text {self.keep_text!r}: use full (default), hash or none")
        for flag, value, ok, need in rules:
            if not ok:
                raise ConfigError(f"{flag} {value}: must be {need}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile.to_dict(),
            "model": self.model,
            "sampling": self.sampling.to_dict(),
            "request_timeout_s": self.request_timeout_s,
            "host": self.host,
            "port": self.port,
            "max_model_len": self.max_model_len,
            "dtype": self.dtype,
            "kv_cache_gib": self.kv_cache_gib,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "start_timeout_s": self.start_timeout_s,
            "api_key": "set" if self.api_key else "unset",
            "python": self.python,
            "extra_engine_args": list(self.extra_engine_args),
            "start_together": self.start_together,
            "attach": dict(self.attach),
            "keep_text": self.keep_text,
        }

    @classmethod
    def from_manifest(cls, out_dir: Path, raw: dict[str, Any], api_key: str | None) -> RunConfig:
        s = raw["sampling"]
        given_dtype, extra = _split_dtype(raw.get("extra_engine_args", ()))
        return cls(
            profile=Profile.from_dict(raw["profile"]),
            out_dir=out_dir,
            model=raw["model"],
            sampling=Sampling(
                temperature=s["temperature"], top_p=s["top_p"], seed=s["seed"], max_tokens_cap=s.get("max_tokens_cap")
            ),
            request_timeout_s=raw["request_timeout_s"],
            host=raw["host"],
            port=raw["port"],
            max_model_len=raw["max_model_len"],
            # a manifest written before --dtype was an engine option: the dtype its extra arguments gave (after the
            # harness's own --dtype bfloat16, so theirs won), else bfloat16; never a second --dtype among them
            dtype=raw.get("dtype") or given_dtype or "bfloat16",
            kv_cache_gib=raw["kv_cache_gib"],
            gpu_memory_utilization=raw["gpu_memory_utilization"],
            start_timeout_s=raw["start_timeout_s"],
            api_key=api_key,
            python=raw.get("python", ""),
            extra_engine_args=extra,
            start_together=raw.get("start_together", True),
            attach=dict(raw.get("attach", {})),
            keep_text=raw.get("keep_text", "full"),
        )


def _split_dtype(extra: Any) -> tuple[str | None, tuple[str, ...]]:
    """Extra vLLM arguments split into the dtype they give (the last ``--dtype X`` or ``--dtype=X``: vLLM's last
    flag wins; None when they give none) and the other arguments, in order (a bare ``--dtype`` at the end is kept)."""
    words = [str(w) for w in extra]
    dtype: str | None = None
    kept: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--dtype" and i + 1 < len(words):
            dtype, i = words[i + 1], i + 2
            continue
        if word.startswith("--dtype="):
            dtype = word.split("=", 1)[1]
        else:
            kept.append(word)
        i += 1
    return dtype, tuple(kept)


def _is_option(word: str) -> bool:
    """``--name``, ``--name=value`` or a short ``-O3``; not a negative number (``-1`` is a value)."""
    if not word.startswith("-") or word == "-":
        return False
    try:
        float(word)
    except ValueError:
        return True
    return False


def canonical_vllm_args(words: Iterable[str]) -> tuple[str, ...]:
    """Extra vLLM arguments in one spelling, to tell whether two runs set their engines the same way: each option
    with the words that follow it up to the next option, ``--name=value`` as ``--name value`` and underscores in a
    long option's name as dashes up to its first ``.`` (vLLM's parser reads them alike; after the dot they are JSON
    keys). Options are sorted by name where order cannot matter: not when an option is given twice, when one is
    another's ``--no-`` form, or when a short option (``-O3``, ``-tp``) may be another's alias; then they keep their
    order (vLLM's last flag wins). Words before the first option stay first. Two spellings of one setup may still
    read as two (an alias, JSON spaced otherwise); two setups never read as one."""
    lead: list[str] = []
    groups: list[tuple[str, list[str]]] = []
    for word in map(str, words):
        if not _is_option(word):
            (groups[-1][1] if groups else lead).append(word)
        elif word.startswith("--"):
            name, eq, value = word.partition("=")
            head, dot, tail = name[2:].partition(".")
            groups.append(("--" + head.replace("_", "-") + dot + tail, [value] if eq else []))
        else:
            groups.append((word, []))
    names = [name for name, _ in groups]
    order_free = (
        len(set(names)) == len(names)
        and all(name.startswith("--") for name in names)
        and not any(name.startswith("--no-") and "--" + name[5:] in names for name in names)
    )
    if order_free:
        groups.sort(key=lambda group: group[0])
    return (*lead, *(w for name, values in groups for w in (name, *values)))
