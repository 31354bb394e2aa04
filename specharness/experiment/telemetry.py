"""What text a run keeps: ``--keep-text full|hash|none``, the one owner of the rule.

Every check runs at request time on the full text, so verdicts, correctness and the output identity (a digest of
the generated token ids) are the same under every policy; the policy decides only what reaches disk.

    full   prompts, outputs, tool-call arguments and check details are kept as they are (the default)
    hash   each text becomes ``hash:<32 hex>:<n> chars``: a SHA-256 of the text under a salt drawn when the run
           starts and never written anywhere, so two arms' identical outputs still match within the run while a
           short text cannot be looked up in a table; lengths are kept
    none   texts are dropped (only their lengths are kept)

Under ``hash`` and ``none`` the check detail keeps only whether the rubric passed (details quote values and
output), an error keeps its kind and HTTP status (a server may echo input in its message), and the manifest keeps
each case's id, group, max_tokens and check type, not its prompt, messages or expected values.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field, replace
from typing import Any

from specharness._errors import ConfigError
from specharness.records import RequestRecord

__all__ = ["KEEP_TEXT", "TextPolicy"]

KEEP_TEXT = ("full", "hash", "none")
UNCHECKED = "unchecked"  # RequestRecord.checked reads this literal: it survives every policy


@dataclass(frozen=True, slots=True)
class TextPolicy:
    mode: str = "full"
    salt: bytes = field(default_factory=lambda: os.urandom(16), repr=False)

    def __post_init__(self) -> None:
        if self.mode not in KEEP_TEXT:
            raise ConfigError(f"--keep-text {self.mode!r}: use full (default), hash or none")

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
        error = None if r.error is None else f"{r.error_kind or 'error'}" + (f" (HTTP {r.http_status})" if r.http_status else "")
        calls = [{"name": c.get("name"), "arguments": self.text(str(c.get("arguments", "")))} for c in r.tool_calls]
        return replace(r, text=self.text(r.text), check_detail=detail, error=error, tool_calls=calls)

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
