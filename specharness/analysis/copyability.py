"""Copyability: how much of an answer a prompt-lookup draft could have guessed. Pure: two strings in, a share out.

:func:`copyability` is the share of an output's word positions where the ngram proposer's lookup would have
drafted the right next word; :func:`lookup_words` splits a text into the words it counts (:data:`WORD`).
Rules: docs/method.md#copyability.
"""

from __future__ import annotations

import math
import re
from typing import Literal

__all__ = ["LOOKUP_MAX", "LOOKUP_MIN", "WORD", "copyability", "lookup_words"]

WORD = re.compile(r"\w+|[^\w\s]")
LOOKUP_MIN = 2  # vLLM's prompt_lookup_min / prompt_lookup_max defaults in this harness's profiles
LOOKUP_MAX = 4


def lookup_words(text: str) -> list[str]:
    """The words copyability counts: :data:`WORD` matches, in order (``"a, b"`` -> ``["a", ",", "b"]``)."""
    return WORD.findall(text)


def copyability(
    prompt: str,
    output: str,
    lookup_min: int = LOOKUP_MIN,
    lookup_max: int = LOOKUP_MAX,
    *,
    rule: Literal["proposer", "any"] = "proposer",
) -> float:
    """Share of the output's word positions ``i`` where an n-gram (``lookup_min <= n <= lookup_max``) of the
    context ending just before ``i`` (context = prompt + output before ``i``, what vLLM's ngram proposer searches)
    occurred earlier in the context and was followed there by the word at ``i``; NaN for an empty output.

    ``rule="proposer"`` judges the occurrence vLLM drafts from: the longest matching n, its earliest occurrence.
    ``rule="any"`` counts a hit when any earlier occurrence of any matching n-gram was followed by the right word,
    an upper bound on the proposer's share (they differ where an n-gram recurs with different continuations).
    """
    if not 1 <= lookup_min <= lookup_max:
        raise ValueError(f"need 1 <= lookup_min <= lookup_max, got {lookup_min}, {lookup_max}")
    out = lookup_words(output)
    if not out:
        return math.nan
    context = lookup_words(prompt) + out
    start = len(context) - len(out)
    sizes = range(lookup_max, lookup_min - 1, -1)  # longest first, as the proposer tries them
    # n -> n-gram -> the words that followed it, in order of first occurrence (the first is the proposer's draft);
    # before step j it holds the n-grams ending at j - 2 or earlier, so the suffix itself is never its own match
    seen: dict[int, dict[tuple[str, ...], dict[str, None]]] = {n: {} for n in sizes}
    hits = 0
    for j, word in enumerate(context):
        if j >= start:
            for n in sizes:
                if j < n:
                    continue
                followers = seen[n].get(tuple(context[j - n : j]))
                if followers is None:
                    continue
                if rule == "proposer":
                    hits += next(iter(followers)) == word
                    break
                if word in followers:
                    hits += 1
                    break
        for n in sizes:
            if j >= n:
                seen[n].setdefault(tuple(context[j - n : j]), {}).setdefault(word, None)
    return hits / len(out)
