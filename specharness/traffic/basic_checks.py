"""The basic answer checks, fixed in advance per case: exact, contains, regex, json_keys and abstains, on the
:class:`Check` record every check type builds on (:mod:`~specharness.traffic.reference` and
:mod:`~specharness.traffic.structured` add theirs); :func:`parse_basic_check` validates one."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from specharness._errors import WorkloadError

__all__ = ["BASIC_CHECK_TYPES", "DEFAULT_ABSTAIN_PHRASES", "Check", "CheckResult", "parse_basic_check"]

BASIC_CHECK_TYPES = ("exact", "contains", "regex", "json_keys", "abstains")
DEFAULT_ABSTAIN_PHRASES = (
    "i don't know",
    "i do not know",
    "i'm not sure",
    "i am not sure",
    "cannot",
    "can't",
    "unable",
    "not able to",
    "no way to know",
    "don't have",
    "do not have",
    "not possible",
    "no information",
    "not provided",
    "unknown",
    "sorry",
    "i won't",
    "i will not",
)


@dataclass(frozen=True, slots=True)
class CheckResult:
    correct: bool
    detail: str


@dataclass(frozen=True, slots=True)
class Check:
    """A validated rubric for one case."""

    type: str
    value: str = ""
    values: tuple[str, ...] = ()
    pattern: str = ""
    keys: tuple[str, ...] = ()
    case_sensitive: bool = False
    phrases: tuple[str, ...] = field(default=DEFAULT_ABSTAIN_PHRASES)

    def evaluate_response(self, text: str, tool_calls: Sequence[Mapping[str, Any]] = ()) -> CheckResult:
        """Judge a whole response: its content text and its tool calls (``{"name", "arguments"}`` dicts, in order).
        Only the tool_call check reads the tool calls; the others judge the text."""
        return self.evaluate(text)

    def evaluate(self, text: str) -> CheckResult:
        if self.type == "exact":
            ok = _norm(text, self.case_sensitive) == _norm(self.value, self.case_sensitive)
            return CheckResult(ok, "exact match" if ok else "differs from the expected text")
        if self.type == "contains":
            hay = _norm(text, self.case_sensitive)
            missing = [v for v in self.values if _norm(v, self.case_sensitive) not in hay]
            return CheckResult(not missing, "all present" if not missing else f"missing {missing[0]!r}")
        if self.type == "regex":
            flags = 0 if self.case_sensitive else re.IGNORECASE
            ok = re.search(self.pattern, text, flags | re.DOTALL) is not None
            return CheckResult(ok, "pattern found" if ok else "pattern not found")
        if self.type == "json_keys":
            return _check_json(text, self.keys)
        hay = text.lower().replace("\u2019", "'")
        hit = next((p for p in self.phrases if p in hay), None)
        return CheckResult(hit is not None, f"abstained ({hit!r})" if hit else "answered instead of abstaining")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.type == "exact":
            out["value"] = self.value
        elif self.type == "contains":
            out["values"] = list(self.values)
        elif self.type == "regex":
            out["pattern"] = self.pattern
        elif self.type == "json_keys":
            out["keys"] = list(self.keys)
        if self.case_sensitive:
            out["case_sensitive"] = True
        return out


def _norm(text: str, case_sensitive: bool) -> str:
    collapsed = " ".join(text.split())
    return collapsed if case_sensitive else collapsed.lower()


def _check_json(text: str, keys: tuple[str, ...]) -> CheckResult:
    body = text.strip()
    fence = re.search(r"```(?:json)?\s*(.*?)```", body, re.DOTALL)
    if fence:
        body = fence.group(1).strip()
    start, end = body.find("{"), body.rfind("}")
    if start == -1 or end < start:
        return CheckResult(False, "no JSON object")
    try:
        obj = json.loads(body[start : end + 1])
    except json.JSONDecodeError as exc:
        return CheckResult(False, f"invalid JSON ({exc.msg})")
    if not isinstance(obj, dict):
        return CheckResult(False, "JSON is not an object")
    missing = [k for k in keys if k not in obj]
    return CheckResult(not missing, "valid JSON with keys" if not missing else f"missing key {missing[0]!r}")


def _strings(raw: Any, where: str, name: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not raw or not all(isinstance(v, str) and v for v in raw):
        raise WorkloadError(f"{where}: check.{name} must be a non-empty list of non-empty strings")
    return tuple(raw)


def parse_basic_check(raw: dict[str, Any], where: str) -> Check:
    """Validate an exact, contains, regex, json_keys or abstains check dict (``raw["type"]`` is one of them)."""
    kind = raw["type"]
    case_sensitive = raw.get("case_sensitive", False)
    if not isinstance(case_sensitive, bool):
        raise WorkloadError(f"{where}: check.case_sensitive must be true or false")
    if kind == "exact":
        value = raw.get("value")
        if not isinstance(value, str):
            raise WorkloadError(f"{where}: check.value must be a string for an exact check")
        return Check(type=kind, value=value, case_sensitive=case_sensitive)
    if kind == "contains":
        return Check(type=kind, values=_strings(raw.get("values"), where, "values"), case_sensitive=case_sensitive)
    if kind == "regex":
        pattern = raw.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise WorkloadError(f"{where}: check.pattern must be a non-empty regular expression")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise WorkloadError(f"{where}: check.pattern is not a valid regular expression ({exc})") from None
        return Check(type=kind, pattern=pattern, case_sensitive=case_sensitive)
    if kind == "json_keys":
        return Check(type=kind, keys=_strings(raw.get("keys"), where, "keys"))
    phrases = raw.get("phrases")
    if phrases is None:
        return Check(type=kind)
    return Check(type=kind, phrases=tuple(p.lower() for p in _strings(phrases, where, "phrases")))
