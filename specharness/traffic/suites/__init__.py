"""The built-in workload suites, as plain case dicts read from the JSON Lines files beside this module.

One file per suite (copy, transform, free, abstain, structured) plus warmup.jsonl; each line is one case in the
format that :func:`specharness.traffic.workloads.parse_case` validates. Rubrics are fixed in advance of any run;
structured schemas are strict and use only keywords vLLM's backends support; the 80 abstain questions are distinct.
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

__all__ = ["builtin_cases", "warmup_cases"]

_SUITES = ("copy", "transform", "free", "abstain", "structured")


def _read(name: str) -> list[dict[str, Any]]:
    text = files(__name__).joinpath(f"{name}.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def builtin_cases(name: str) -> list[dict[str, Any]]:
    """The cases of built-in suite ``name``, in file order (a fresh copy each call); KeyError for an unknown name."""
    if name not in _SUITES:
        raise KeyError(name)
    return _read(name)


def warmup_cases() -> list[dict[str, Any]]:
    """Neutral warmup prompts, never measured: used when a workload has no case left over for warming up."""
    return _read("warmup")
