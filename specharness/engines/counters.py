"""vLLM's Prometheus counters: parse ``/metrics`` text, take deltas over a cell, derive acceptance figures.

The parser does no I/O. Samples with several label sets (engine index, model name) are summed; the per-position
acceptance counter is kept by its ``position`` label.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import httpx

__all__ = [
    "CounterDelta",
    "CounterSnapshot",
    "acceptance_figures",
    "parse_prometheus",
    "reconcile_tokens",
    "scrape",
    "server_latency_means",
]

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
GENERATION = "vllm:generation_tokens_total"
PROMPT = "vllm:prompt_tokens_total"
PREFIX_QUERIES = "vllm:prefix_cache_queries_total"
PREFIX_HITS = "vllm:prefix_cache_hits_total"
REQUEST_SUCCESS = "vllm:request_success_total"  # finished requests, by finish reason (summed)
# The engine's own latency histograms (sum and count; means over a delta). vLLM renamed the TPOT histogram, so
# both names are read and whichever the version exports is used.
SERVER_LATENCY = {
    "ttft": ("vllm:time_to_first_token_seconds",),
    "tpot": ("vllm:request_time_per_output_token_seconds", "vllm:time_per_output_token_seconds"),
    "itl": ("vllm:inter_token_latency_seconds",),
}
_HISTOGRAM_PARTS = tuple(
    f"{base}_{part}" for bases in SERVER_LATENCY.values() for base in bases for part in ("sum", "count")
)
TRACKED = (
    DRAFTS,
    DRAFT_TOKENS,
    ACCEPTED,
    GENERATION,
    PROMPT,
    PREFIX_QUERIES,
    PREFIX_HITS,
    REQUEST_SUCCESS,
    *_HISTOGRAM_PARTS,
)

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, slots=True)
class CounterSnapshot:
    """Totals of the tracked counters and per-position acceptance at one moment."""

    totals: dict[str, float] = field(default_factory=dict)
    accepted_per_position: dict[int, float] = field(default_factory=dict)

    def minus(self, before: CounterSnapshot) -> CounterDelta:
        keys = set(self.totals) | set(before.totals)
        totals = {k: self.totals.get(k, 0.0) - before.totals.get(k, 0.0) for k in keys}
        positions = set(self.accepted_per_position) | set(before.accepted_per_position)
        per_pos = [
            self.accepted_per_position.get(p, 0.0) - before.accepted_per_position.get(p, 0.0) for p in sorted(positions)
        ]
        return CounterDelta(totals=totals, accepted_per_position=per_pos)


@dataclass(frozen=True, slots=True)
class CounterDelta:
    """Counter increase over one cell."""

    totals: dict[str, float]
    accepted_per_position: list[float]


def parse_prometheus(text: str) -> CounterSnapshot:
    """Sum every tracked counter over its label sets; keep per-position acceptance by position."""
    totals: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if not match:
            continue
        name, labels_text, raw_value = match.group(1), match.group(3) or "", match.group(4)
        if name not in TRACKED and name != PER_POS:
            continue
        try:
            value = float(raw_value)
        except ValueError:
            continue
        if name == PER_POS:
            labels = dict(_LABEL.findall(labels_text))
            if "position" in labels and labels["position"].isdigit():
                pos = int(labels["position"])
                per_pos[pos] = per_pos.get(pos, 0.0) + value
            continue
        totals[name] = totals.get(name, 0.0) + value
    return CounterSnapshot(totals=totals, accepted_per_position=per_pos)


def scrape(base_url: str, headers: dict[str, str] | None = None, timeout_s: float = 10.0) -> CounterSnapshot:
    reply = httpx.get(f"{base_url}/metrics", headers=headers, timeout=timeout_s)
    reply.raise_for_status()
    return parse_prometheus(reply.text)


def server_latency_means(totals: dict[str, float]) -> dict[str, float]:
    """Mean TTFT / TPOT / inter-token latency in ms as the engine measured them, from histogram deltas (NaN if absent)."""
    out: dict[str, float] = {}
    for key, bases in SERVER_LATENCY.items():
        out[f"server_mean_{key}_ms"] = math.nan
        for base in bases:
            count = totals.get(f"{base}_count", 0.0)
            if count > 0:
                out[f"server_mean_{key}_ms"] = totals.get(f"{base}_sum", 0.0) / count * 1000
                break
    return out


def acceptance_figures(totals: dict[str, float]) -> dict[str, float]:
    """Drafts, draft tokens, accepted tokens, acceptance rate and mean acceptance length (1 + accepted/drafts)."""
    drafts = totals.get(DRAFTS, 0.0)
    draft_tokens = totals.get(DRAFT_TOKENS, 0.0)
    accepted = totals.get(ACCEPTED, 0.0)
    return {
        "drafts": drafts,
        "draft_tokens": draft_tokens,
        "accepted_tokens": accepted,
        "acceptance_rate": accepted / draft_tokens if draft_tokens else math.nan,
        "mean_acceptance_length": 1.0 + accepted / drafts if drafts else math.nan,
        "generation_tokens": totals.get(GENERATION, 0.0),
        "prefix_cache_queries": totals.get(PREFIX_QUERIES, 0.0),
        "prefix_cache_hits": totals.get(PREFIX_HITS, 0.0),
    }


def reconcile_tokens(engine_generated: float, journal_completion_tokens: int) -> str:
    """'' when the engine's generation-token delta equals the journal's sum, else a message saying by how much."""
    if engine_generated == journal_completion_tokens:
        return ""
    return (
        f"engine generated {engine_generated:.0f} tokens but the journal's usage sums to {journal_completion_tokens}"
        f" (difference {engine_generated - journal_completion_tokens:+.0f})"
    )
