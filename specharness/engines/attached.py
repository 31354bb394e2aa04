"""Engines the harness did not start (``--attach arm=URL,...``): another host, a k8s deployment, a shared server.

:class:`AttachedEngine` answers the calls the driver makes on :class:`~specharness.engines.server.EngineServer`, but
starts and stops nothing: its "start" is waiting for ``/health``, its version comes from ``/version``, its counters
from ``/metrics`` like any engine's, and its log is a short note in the run folder saying where the engine was.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from specharness._errors import ConfigError, EngineError, EngineStartTimeout, EngineUnreachable
from specharness.engines.counters import DRAFTS, GENERATION, parse_prometheus
from specharness.engines.server import ArmSpec, settings_from_server_info

__all__ = ["AttachedEngine", "check_speculation", "normalise_url", "parse_attach"]

_EXAMPLE = "baseline=http://HOST:8000,ngram=http://HOST:8001"
_PROBE_TIMEOUT_S = 5.0
_REFUSED_GRACE_S = 3.0  # a refused connection is retried this long (a server restarting), then the run stops
_LOADING_CODES = (503,)  # vLLM answers /health 503 while its engine is not (or no longer) serving


def normalise_url(arm: str, raw: str) -> str:
    """``raw`` as a base URL: http(s) with a host, no credentials, query or fragment, no trailing "/" or "/v1"."""
    url = raw.strip()
    if not url:
        raise ConfigError(f"--attach {arm}= has no URL; give {arm}=http://HOST:PORT")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        raise ConfigError(f"--attach {arm}={url!r}: not a valid URL ({exc}); write it as http://HOST:PORT") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"--attach {arm}={url!r} is not an http(s) URL with a host; write it as http://HOST:PORT")
    if parts.username is not None or parts.password is not None:
        raise ConfigError(f"--attach {arm}: the URL carries credentials; drop them and pass the key with --api-key-env")
    if parts.query or parts.fragment:
        raise ConfigError(f"--attach {arm}={url!r} has a query or fragment; give only the server's base URL")
    base = f"{parts.scheme}://{parts.netloc}{parts.path}".rstrip("/")
    if base.endswith("/v1"):
        base = base[: -len("/v1")].rstrip("/")
    return base


def parse_attach(text: str, known_arms: Sequence[str], required_arms: Sequence[str] = ()) -> dict[str, str]:
    """Parse ``"baseline=URL,ngram=URL"`` into {arm: base URL}; every arm must be in ``known_arms``, appear once and
    have its own URL, and every arm in ``required_arms`` (the run's arms) must be given. Raises ConfigError."""
    if not text.strip():
        raise ConfigError(f"--attach is empty; give one arm=URL pair per arm, e.g. {_EXAMPLE}")
    out: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            raise ConfigError(f"--attach {text!r} has an empty item; separate arm=URL pairs with single commas")
        arm, eq, raw = item.partition("=")
        arm = arm.strip()
        if not eq:
            raise ConfigError(f"--attach item {item!r} has no '='; write arm=URL, e.g. {_EXAMPLE}")
        if not arm:
            raise ConfigError(f"--attach item {item!r} has no arm name before '='; write arm=URL, e.g. {_EXAMPLE}")
        if arm not in known_arms:
            raise ConfigError(f"--attach arm {arm!r} is unknown; use {', '.join(known_arms)}")
        if arm in out:
            raise ConfigError(f"--attach gives arm {arm!r} twice; give each arm one URL")
        url = normalise_url(arm, raw)
        twin = next((a for a, u in out.items() if u == url), None)
        if twin is not None:
            raise ConfigError(f"--attach gives {twin} and {arm} the same URL {url}; each arm needs its own engine")
        out[arm] = url
    missing = [a for a in required_arms if a not in out]
    if missing:
        raise ConfigError(
            f"--attach has no URL for arm {missing[0]!r}; add {missing[0]}=URL (every arm of the run needs one)"
        )
    return out


class AttachedEngine:
    """A running vLLM server for one arm that someone else started; the driver uses it like an EngineServer."""

    def __init__(
        self, arm: ArmSpec, url: str, log_path: Path, *, api_key: str | None = None, start_timeout_s: float = 60.0
    ) -> None:
        self.arm = arm
        self.log_path = log_path
        self.api_key = api_key
        self.start_timeout_s = start_timeout_s
        self._url = normalise_url(arm.name, url)
        parts = urlsplit(self._url)
        self.port: int = parts.port or (443 if parts.scheme == "https" else 80)
        self.command: list[str] = []
        self.process: None = None
        self.start_s = 0.0
        self.version = ""
        self.per_request_metrics = False
        self.on_spawn: Callable[[int], None] | None = None  # never called: there is no process to report

    @property
    def base_url(self) -> str:
        return self._url

    def _label(self) -> str:
        return f"--attach {self.arm.name}={self._url}"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def _get(self, path: str, timeout_s: float, **params: str) -> httpx.Response:
        return httpx.get(f"{self._url}{path}", params=params or None, headers=self.headers(), timeout=timeout_s)

    def _note(self, line: str) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a", encoding="utf-8") as log:
            log.write(line + "\n")

    def start(self) -> None:
        """Record the engine and wait until it answers /health."""
        self.spawn()
        self.wait_ready()

    def spawn(self) -> None:
        """Start nothing: write the note that stands in for a server log."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self._note(
            f"attached {stamp}: specharness did not start this engine; the {self.arm.name} arm was driven "
            f"at {self._url} (--attach) and was neither started nor stopped by the harness"
        )

    def wait_ready(self) -> None:
        """Wait until /health answers 200, then read the version. Idempotent.

        Fails in seconds (:class:`EngineUnreachable`) when nothing listens at the URL (connection refused or no such
        host, past a grace of a few seconds) or when what answers is not a vLLM server (/health with a status vLLM
        never gives, or no vLLM version at /version). Only a server that accepts the connection but is still loading
        (/health 503 or no answer in time) gets ``start_timeout_s``."""
        if self.version:
            return
        if not self.log_path.exists():
            self.spawn()
        t0 = time.perf_counter()
        deadline = t0 + self.start_timeout_s
        last = "no answer"
        with httpx.Client(timeout=_PROBE_TIMEOUT_S, headers=self.headers()) as client:
            while True:
                try:
                    code = client.get(f"{self._url}/health").status_code
                    if code == 200:
                        break
                    if code not in _LOADING_CODES:
                        raise EngineUnreachable(
                            f"{self._label()}: /health answers HTTP {code}, which a vLLM server does not; point "
                            "--attach at a vLLM OpenAI-compatible server"
                        )
                    last = f"HTTP {code}"
                except (httpx.ConnectError, httpx.UnsupportedProtocol) as exc:
                    if time.perf_counter() - t0 > _REFUSED_GRACE_S:
                        raise EngineUnreachable(
                            f"{self._label()}: cannot connect ({_why(exc)}); check the URL and that the server is up"
                        ) from None
                    last = type(exc).__name__
                except httpx.HTTPError as exc:  # accepted but not answered in time: an engine still loading
                    last = type(exc).__name__
                if time.perf_counter() > deadline:
                    raise EngineStartTimeout(
                        f"{self._label()}: /health did not answer 200 within "
                        f"{self.start_timeout_s:.0f} s (last: {last}); check the URL and that "
                        f"the server is up"
                    )
                time.sleep(0.5)
        self.version = self._vllm_version()
        self._note(f"answering /health; vLLM version {self.version}")

    def _vllm_version(self) -> str:
        """The server's vLLM version from /version; raises EngineUnreachable when the answer is not vLLM's."""
        answer = "no answer"
        try:
            reply = self._get("/version", 10.0)
            answer = f"HTTP {reply.status_code}"
            version = reply.json()["version"]
            if reply.status_code == 200 and isinstance(version, str) and version:
                return version
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            answer = answer if answer != "no answer" else type(exc).__name__
        raise EngineUnreachable(
            f"{self._label()}: answers /health but /version ({answer}) gives no vLLM version; point --attach at a "
            "vLLM OpenAI-compatible server"
        )

    def alive(self) -> bool:
        """Whether /health answers HTTP 200 within a few seconds."""
        try:
            return self._get("/health", _PROBE_TIMEOUT_S).status_code == 200
        except httpx.HTTPError:
            return False

    def exit_status(self) -> str:
        return "attached: answering" if self.alive() else "attached: not answering /health"

    def cause(self) -> str:
        """Why the engine stopped answering, as far as the harness can tell (it has no log of an attached engine)."""
        return f"{self.exit_status()} at {self._url} (attached: its log is wherever it was started)"

    def log_tail(self, lines: int = 1) -> str:
        del lines
        return f"(no log: the {self.arm.name} engine at {self._url} was attached, not started by specharness)"

    def effective_settings(self) -> dict[str, Any]:
        """Settings from ``/server_info`` (vLLM dev mode only), else a note that the engine does not report them."""
        found: dict[str, Any] = {"source": "attached: not reported"}
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
            reply = self._get("/server_info", 60.0, config_format="json")
            if reply.status_code == 200:
                found = settings_from_server_info(reply.json()["vllm_config"])
        found["attached_url"] = self._url
        return found

    def served_model(self) -> str:
        """The first model id the engine lists at /v1/models."""
        try:
            reply = self._get("/v1/models", 10.0)
        except httpx.HTTPError as exc:
            raise EngineError(f"{self._label()}: GET /v1/models failed ({type(exc).__name__}); check the URL") from None
        ids: list[str] = []
        with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
            ids = [str(m["id"]) for m in reply.json()["data"]]
        if reply.status_code != 200 or not ids:
            raise ConfigError(
                f"{self._label()}: /v1/models (HTTP {reply.status_code}) lists no model; point --attach "
                f"at a vLLM OpenAI-compatible server"
            )
        return ids[0]

    def pids(self) -> list[int]:
        return []

    def stop(self, grace_s: float = 20.0) -> None:
        """Do nothing: an engine the harness did not start is never stopped by it."""
        del grace_s

    def __enter__(self) -> AttachedEngine:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _why(exc: httpx.HTTPError) -> str:
    """A connection failure in a few words: "connection refused", "name not resolved", else the exception's name."""
    text = str(exc).lower()
    if "refused" in text:
        return "connection refused"
    if "name or service not known" in text or "nodename nor servname" in text or "name resolution" in text:
        return "host name not resolved"
    return type(exc).__name__


def _speculation_state(engine: AttachedEngine) -> tuple[bool | None, str | None, str]:
    """(speculating, method, evidence): from /server_info when it is served, else from which counters /metrics has."""
    with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
        reply = engine._get("/server_info", 60.0, config_format="json")
        if reply.status_code == 200:
            spec = reply.json()["vllm_config"].get("speculative_config")
            if isinstance(spec, dict):
                return True, spec.get("method"), "/server_info"
            return False, None, "/server_info"
    with contextlib.suppress(httpx.HTTPError):
        reply = engine._get("/metrics", 10.0)
        if reply.status_code == 200:
            totals = parse_prometheus(reply.text).totals
            if DRAFTS in totals:
                return True, None, f"/metrics has {DRAFTS}"
            if GENERATION in totals:
                return False, None, f"/metrics has {GENERATION} but no {DRAFTS}"
    return None, None, ""


def check_speculation(engine: AttachedEngine, expects_speculation: bool) -> str | None:
    """A one-line warning when the attached engine's speculation contradicts its arm, else None.

    Detects: an arm that should speculate pointing at an engine without a speculative config (or one whose method is
    not ngram), and a baseline arm pointing at a speculating engine. Evidence is /server_info's speculative_config
    when the engine serves it (vLLM dev mode), else /metrics: vLLM registers the spec-decode counters at start-up,
    zero included, only when a speculative config is set, so this works before any traffic. It cannot tell the
    speculative settings (k, lookup window) without /server_info, nor whether two engines serve the same weights,
    and returns None when neither endpoint answers in a form it recognises.
    """
    speculating, method, evidence = _speculation_state(engine)
    label = engine._label()
    if speculating is None:
        return None
    if expects_speculation and not speculating:
        return f"{label}: the engine does not speculate ({evidence}); the {engine.arm.name} arm would measure none"
    if not expects_speculation and speculating:
        return f"{label}: the engine speculates ({evidence}), so the {engine.arm.name} arm is no baseline"
    if expects_speculation and method not in (None, "ngram"):
        return f"{label}: the engine speculates with method {method!r} ({evidence}), not ngram (prompt lookup)"
    return None
