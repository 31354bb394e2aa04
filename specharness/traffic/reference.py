"""The ``reference`` check: an answer is compared with a reference answer fixed in the dataset, before anything runs.

``{"type": "reference", "references": ["..."], "mode": "normalised-contains"}`` (or ``"reference": "..."`` for one).
With several references the answer passes when it passes against any one of them. Modes:

exact                 the answer equals a reference after both are stripped of leading and trailing whitespace
                      (case and inner spacing count).
normalised-contains   after normalising both (lowercase; every character that is not a letter, digit or whitespace
                      becomes a space; whitespace collapsed), the reference appears in the answer on word boundaries.
rouge-l               ROUGE-L F-measure (Lin, 2004) over the normalised whitespace tokens: with L the length of the
                      longest common subsequence, P = L / answer tokens, R = L / reference tokens, F = 2PR / (P + R);
                      the answer passes when F >= ``threshold`` (required, in (0, 1]). Like rouge-score's default
                      tokenizer but Unicode-aware and without stemming; scripts written without spaces (Chinese,
                      Japanese) make one token per run of text, so use normalised-contains for those.

The LCS length is computed bit-parallel (Allison and Dix 1986; Hyyrö 2004): one big-integer add per answer token, so a
2,000-token answer is checked in milliseconds; the check runs in the client's event loop, beside requests being timed.
This module builds on :class:`~specharness.traffic.checks.Check`; ``checks.parse_check`` hands ``"reference"`` here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from specharness._errors import WorkloadError
from specharness.traffic.checks import Check, CheckResult

__all__ = ["REFERENCE_MODES", "ReferenceCheck", "lcs_length", "normalise", "parse_reference_check", "rouge_l_f"]

REFERENCE_MODES = ("exact", "normalised-contains", "rouge-l")
_NOT_WORD = re.compile(r"[^\w\s]|_")


def normalise(text: str) -> str:
    """Lowercase, every non-letter/digit/whitespace character to a space, whitespace collapsed to single spaces."""
    return " ".join(_NOT_WORD.sub(" ", text.lower()).split())


def lcs_length(a: list[str], b: list[str]) -> int:
    """Length of the longest common subsequence of two token lists (bit-parallel; Hyyrö 2004, Allison-Dix form)."""
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return 0
    masks: dict[str, int] = {}
    for i, token in enumerate(a):
        masks[token] = masks.get(token, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for token in b:
        u = v & masks.get(token, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def rouge_l_f(answer: str, reference: str) -> float:
    """ROUGE-L F-measure over normalised whitespace tokens; 0.0 when either side has no token."""
    cand, ref = normalise(answer).split(), normalise(reference).split()
    lcs = lcs_length(cand, ref)
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(cand), lcs / len(ref)
    return 2 * precision * recall / (precision + recall)


@dataclass(frozen=True, slots=True)
class ReferenceCheck(Check):
    """A check against reference answers; ``type`` is always ``"reference"``."""

    references: tuple[str, ...] = ()
    mode: str = "normalised-contains"
    threshold: float = 0.0  # rouge-l only

    def evaluate(self, text: str) -> CheckResult:
        if self.mode == "exact":
            ok = text.strip() in {r.strip() for r in self.references}
            return CheckResult(ok, "equals the reference" if ok else "differs from the reference")
        if self.mode == "normalised-contains":
            hay = f" {normalise(text)} "
            ok = any(f" {normalise(r)} " in hay for r in self.references)
            return CheckResult(ok, "contains the reference" if ok else "reference not found in the answer")
        best = max(rouge_l_f(text, r) for r in self.references)
        ok = best >= self.threshold
        return CheckResult(ok, f"ROUGE-L F {best:.3f} {'>=' if ok else '<'} {self.threshold:g}")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "reference", "references": list(self.references), "mode": self.mode}
        if self.mode == "rouge-l":
            out["threshold"] = self.threshold
        return out


def parse_reference_check(raw: dict[str, Any], where: str) -> ReferenceCheck:
    """Validate a ``{"type": "reference", ...}`` dict; ``where`` names the file and line for the error message."""
    one, many = raw.get("reference"), raw.get("references")
    if (one is None) == (many is None):
        raise WorkloadError(f"{where}: a reference check needs exactly one of check.reference or check.references")
    refs = [one] if many is None else many
    if not isinstance(refs, list) or not refs or not all(isinstance(r, str) and r.strip() for r in refs):
        raise WorkloadError(f"{where}: check.references must be a non-empty list of non-blank strings")
    mode = raw.get("mode", "normalised-contains")
    if mode not in REFERENCE_MODES:
        raise WorkloadError(f"{where}: check.mode {mode!r} is unknown; use one of {', '.join(REFERENCE_MODES)}")
    if mode != "exact" and not all(normalise(r) for r in refs):
        raise WorkloadError(f"{where}: a reference has no letter or digit, so {mode} cannot match it; use mode exact")
    threshold = raw.get("threshold")
    if mode == "rouge-l":
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 < threshold <= 1:
            raise WorkloadError(f"{where}: check.threshold must be a number in (0, 1] for a rouge-l check")
        return ReferenceCheck(type="reference", references=tuple(refs), mode=mode, threshold=float(threshold))
    if threshold is not None:
        raise WorkloadError(f"{where}: check.threshold applies to mode rouge-l only, not {mode}")
    return ReferenceCheck(type="reference", references=tuple(refs), mode=mode)
