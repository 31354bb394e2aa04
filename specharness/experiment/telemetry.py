"""What text a run keeps: ``--keep-text full|hash|none``, the one owner of the rule.

:class:`TextPolicy` applies a policy (:data:`KEEP_TEXT`) to request records, manifest cases and engine flags;
:func:`run_policy` makes a run's policy, with the salt :func:`run_salt` draws and keeps outside the run folder;
:func:`rekey_prefix_chain` keys a prefix chain with it. Checks run on the full text first, so verdicts are the same under every policy.
Rules: docs/development.md#what-text-a-run-keeps.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from specharness._errors import ConfigError
from specharness.records import RequestRecord

__all__ = ["KEEP_TEXT", "LOGGING_FLAGS", "TextPolicy", "rekey_prefix_chain", "run_policy", "run_salt"]

LOGGING_FLAGS = ("--enable-log-requests", "--enable-log-outputs")  # vLLM flags that would write prompts or outputs

KEEP_TEXT = ("full", "hash", "none")
UNCHECKED = "unchecked"  # RequestRecord.checked reads this literal: it survives every policy


def run_salt(run_dir: Path, cache: Path) -> bytes:
    """The run's salt: drawn once and kept outside the run folder (``cache/salts``, owner-only), under a name derived
    from the folder's path, so a ``--resume`` hashes alike and the folder alone never holds it."""
    path = cache / "salts" / hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:32]
    if path.is_file():
        return path.read_bytes()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    salt = os.urandom(16)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(salt)
    return salt


def rekey_prefix_chain(chain: str, salt: bytes, group: int = 4) -> str:
    """A prefix chain (4 hex per token, public key: :mod:`specharness.traffic.client`) re-keyed with the run's salt:
    ``k_i = HMAC(salt, k_{i-1} || g_i)``, 4 hex kept per token. Each public group already depends on every earlier
    token, so equal prefixes stay equal and the first differing group still differs (unless two 16-bit groups
    collide); without the salt a table over a public tokenizer cannot name the tokens."""
    state = b""
    out = []
    for i in range(0, len(chain) - len(chain) % group, group):
        state = hmac.new(salt, state + chain[i : i + group].encode(), "sha256").digest()
        out.append(state.hex()[:group])
    return "".join(out)


@dataclass(frozen=True, slots=True)
class TextPolicy:
    mode: str = "full"
    salt: bytes = field(default_factory=lambda: os.urandom(16), repr=False)

    def __post_init__(self) -> None:
        if self.mode not in KEEP_TEXT:
            raise ConfigError(f"--keep-text {self.mode!r}: use full (default), hash or none")

    def check_engine_args(self, args: tuple[str, ...]) -> None:
        """Refuse engine flags that would log prompts or outputs when the policy keeps no text."""
        logging = [a for a in args if a.split("=", 1)[0] in LOGGING_FLAGS]
        if logging and self.mode != "full":
            raise ConfigError(
                f"--keep-text {self.mode} with --engine-arg={logging[0]}: that flag writes prompts or "
                "outputs to the engine log; drop it or use --keep-text full"
            )

    @property
    def keeps_text(self) -> bool:
        return self.mode == "full"

    def text(self, value: str) -> str:
        """One text as the policy keeps it."""
        if self.mode == "full":
            return value
        if self.mode == "none":
            return f"dropped:{len(value)} chars"
        digest = hashlib.sha256(self.salt + value.encode()).hexdigest()[:32]
        return f"hash:{digest}:{len(value)} chars"

    def request(self, r: RequestRecord) -> RequestRecord:
        """A request record as it may be journaled."""
        if self.mode == "full":
            return r
        detail = r.check_detail if r.check_detail == UNCHECKED else ("passed" if r.correct else "failed")
        error = (
            None
            if r.error is None
            else f"{r.error_kind or 'error'}" + (f" (HTTP {r.http_status})" if r.http_status else "")
        )
        calls = [{"name": c.get("name"), "arguments": self.text(str(c.get("arguments", "")))} for c in r.tool_calls]
        # the token-id digest is unsalted (a table over a public tokenizer could name a short answer): keyed with the
        # run's salt, equal outputs still match within the run; the first token id is dropped
        digest = (
            None
            if r.output_digest is None
            else hmac.new(self.salt, r.output_digest.encode(), "sha256").hexdigest()[:32]
        )
        return replace(
            r,
            text=self.text(r.text),
            check_detail=detail,
            error=error,
            tool_calls=calls,
            output_digest=digest,
            first_token_id=None,
            prefix_chain=rekey_prefix_chain(r.prefix_chain, self.salt),
        )

    def case(self, raw: dict[str, Any]) -> dict[str, Any]:
        """A workload case (``case_to_dict``) as the manifest may keep it."""
        if self.mode == "full":
            return raw
        check = raw.get("check")
        kept: dict[str, Any] = {k: raw[k] for k in ("id", "group", "max_tokens") if k in raw}
        source = str(raw.get("prompt") if raw.get("prompt") is not None else raw.get("messages", ""))
        kept["prompt_kept"] = self.text(source)  # not "prompt": nothing downstream may read it as one
        if raw.get("turns"):
            kept["turns_kept"] = [self.text(str(t)) for t in raw["turns"]]
        if isinstance(check, dict):
            kept["check"] = {"type": check.get("type")}
        return kept


def run_policy(keep: str, run_dir: Path, cache: Path, engine_args: Iterable[tuple[str, ...]] = ()) -> TextPolicy:
    """A run's policy: ``keep`` (:data:`KEEP_TEXT`), salted with the run's salt (:func:`run_salt`, drawn only when
    text is hashed or dropped); refuses any of ``engine_args`` (each an engine's flags) that would log text."""
    policy = TextPolicy(keep, run_salt(run_dir, cache)) if keep != "full" else TextPolicy()
    for words in engine_args:
        policy.check_engine_args(words)
    return policy
