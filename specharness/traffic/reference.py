"""The ``reference`` check: an answer is compared with a reference answer fixed in the dataset, before anything runs.

:func:`parse_reference_check` builds a :class:`ReferenceCheck` (``checks.parse_check`` hands ``"reference"`` here)
in one of the modes exact, normalised-contains, rouge-l (:func:`rouge_l_f`), chrf (:func:`chrf`) and final-number
(:func:`final_number`). Modes and thresholds: docs/workloads.md#reference-checks.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from specharness._errors import WorkloadError
from specharness.traffic.basic_checks import Check, CheckResult

__all__ = [
    "REFERENCE_MODES",
    "THRESHOLD_MODES",
    "ReferenceCheck",
    "chrf",
    "final_number",
    "normalise",
    "parse_reference_check",
    "rouge_l_f",
]

REFERENCE_MODES = ("exact", "normalised-contains", "rouge-l", "chrf", "final-number")
THRESHOLD_MODES = ("rouge-l", "chrf")
SCORER_PACKAGES = {"rouge-l": "rouge-score", "chrf": "sacrebleu"}  # the package each scored mode imports
_NOT_WORD = re.compile(r"[^\w\s]|_")
_NUM = r"\$?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|\$?\.\d+"
# a number stands alone: no word or dot runs into it, a minus sign only where nothing runs into it either
# (10-12 is a range, its last number 12; COVID-19 is a name; 2,3 is two numbers; 1,250 one)
_NUMBER = re.compile(rf"(?:(?<![\w.])-)?(?<![\w.])(?<![A-Za-z]-)(?:{_NUM})")
_FINAL = re.compile(rf"####\s*(-?(?:{_NUM}))")


def final_number(text: str) -> float | None:
    """The number after ``####`` (GSM8K's answer mark), else the last number in ``text``; None without one."""
    marked = _FINAL.findall(text)
    found = marked or _NUMBER.findall(text)
    if not found:
        return None
    try:
        return float(found[-1].replace(",", "").replace("$", ""))
    except ValueError:
        return None


def normalise(text: str) -> str:
    """Lowercase, every non-letter/digit/whitespace character to a space, whitespace collapsed to single spaces."""
    return " ".join(_NOT_WORD.sub(" ", text.lower()).split())


class _NormalisedTokens:
    """rouge-score's tokenizer interface (``tokenize(text) -> list[str]``) over :func:`normalise`."""

    def tokenize(self, text: str) -> list[str]:
        return normalise(text).split()


@functools.cache
def _rouge_scorer() -> Any:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False, tokenizer=_NormalisedTokens())


@functools.cache
def _chrf_metric() -> Any:
    from sacrebleu.metrics import CHRF

    return CHRF()


def _load_scorer(mode: str, where: str) -> None:
    """Import the scorer a mode needs now, so a missing package stops the run before any engine starts."""
    package = SCORER_PACKAGES.get(mode)
    if package is None:
        return
    try:
        (_rouge_scorer if mode == "rouge-l" else _chrf_metric)()
    except ImportError:
        raise WorkloadError(
            f"{where}: check.mode {mode} needs the {package} package, which is not installed; install it "
            f"(pip install {package}) or use mode normalised-contains"
        ) from None


def rouge_l_f(answer: str, reference: str) -> float:
    """ROUGE-L F-measure (rouge-score) over normalised whitespace tokens; 0.0 when either side has no token."""
    return float(_rouge_scorer().score(reference, answer)["rougeL"].fmeasure)


def chrf(answer: str, references: list[str] | tuple[str, ...]) -> float:
    """chrF (sacrebleu, default settings) of ``answer`` against ``references``, as a fraction in [0, 1]."""
    return float(_chrf_metric().sentence_score(answer, list(references)).score) / 100.0


@dataclass(frozen=True, slots=True)
class ReferenceCheck(Check):
    """A check against reference answers; ``type`` is always ``"reference"``."""

    references: tuple[str, ...] = ()
    mode: str = "normalised-contains"
    threshold: float = 0.0  # rouge-l and chrf only

    def evaluate(self, text: str) -> CheckResult:
        if self.mode == "exact":
            ok = text.strip() in {r.strip() for r in self.references}
            return CheckResult(ok, "equals the reference" if ok else "differs from the reference")
        if self.mode == "normalised-contains":
            hay = f" {normalise(text)} "
            ok = any(f" {normalise(r)} " in hay for r in self.references)
            return CheckResult(ok, "contains the reference" if ok else "reference not found in the answer")
        if self.mode == "final-number":
            got = final_number(text)
            want = {final_number(r) for r in self.references}
            ok = got is not None and got in want
            shown = "no number" if got is None else f"{got:g}"
            return CheckResult(ok, f"final number {shown} {'equals' if ok else 'differs from'} the reference's")
        if self.mode == "chrf":
            score = chrf(text, self.references)
            ok = score >= self.threshold
            return CheckResult(ok, f"chrF {score:.3f} {'>=' if ok else '<'} {self.threshold:g}")
        best = max(rouge_l_f(text, r) for r in self.references)
        ok = best >= self.threshold
        return CheckResult(ok, f"ROUGE-L F {best:.3f} {'>=' if ok else '<'} {self.threshold:g}")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "reference", "references": list(self.references), "mode": self.mode}
        if self.mode in THRESHOLD_MODES:
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
    if mode == "final-number" and not all(final_number(r) is not None for r in refs):
        raise WorkloadError(f"{where}: a reference has no number, so final-number cannot match it; use another mode")
    _load_scorer(mode, where)
    threshold = raw.get("threshold")
    if mode in THRESHOLD_MODES:
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0 < threshold <= 1:
            raise WorkloadError(f"{where}: check.threshold must be a number in (0, 1] for a {mode} check")
        return ReferenceCheck(type="reference", references=tuple(refs), mode=mode, threshold=float(threshold))
    if threshold is not None:
        raise WorkloadError(
            f"{where}: check.threshold applies to modes {' and '.join(THRESHOLD_MODES)} only, not {mode}"
        )
    return ReferenceCheck(type="reference", references=tuple(refs), mode=mode)
