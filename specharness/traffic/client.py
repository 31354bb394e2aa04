"""Streaming OpenAI-compatible client: one request in, one :class:`RequestRecord` out, failures included.

:func:`send_request` streams one case (its body from :func:`build_body`, with :class:`Sampling` and
:class:`RequestMeta`), timing every network read, joining streamed tool calls and hashing the generated token ids
into a digest and a prefix chain (:data:`PREFIX_KEY`); :func:`common_prefix_tokens` reads two records' common
prefix from their chains. Rules: docs/workloads.md#the-streaming-client.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from specharness.records import RequestRecord, completeness
from specharness.traffic.sse import DONE, SSEParser
from specharness.traffic.workloads import Case

__all__ = [
    "PREFIX_GROUP_HEX",
    "PREFIX_KEY",
    "RequestMeta",
    "Sampling",
    "build_body",
    "common_prefix_tokens",
    "send_request",
]

PREFIX_KEY = b"specharness prefix chain v1"  # public: under --keep-text full the texts themselves are kept
PREFIX_GROUP_HEX = 4  # hex characters kept per token


def common_prefix_tokens(chain_a: str, chain_b: str) -> int:
    """Tokens two outputs share from the start: leading equal groups of their prefix chains (a group collides with
    probability 2^-16, so a shared prefix may read one token long at the point they part)."""
    g = PREFIX_GROUP_HEX
    n = min(len(chain_a), len(chain_b)) // g
    same, differs = 0, n * g  # characters: chain_a[:same] == chain_b[:same]; the prefixes of length differs are not
    if chain_a[:differs] == chain_b[:differs]:
        return n
    while differs - same > 1:  # bisect on whole-prefix comparisons (done in C) for the first differing character
        mid = (same + differs) // 2
        if chain_a[:mid] == chain_b[:mid]:
            same = mid
        else:
            differs = mid
    return same // g


@dataclass(frozen=True, slots=True)
class Sampling:
    """Sampling parameters, identical for every arm of an experiment."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = 0
    max_tokens_cap: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "max_tokens_cap": self.max_tokens_cap,
        }


@dataclass(frozen=True, slots=True)
class RequestMeta:
    """Where a request sits in the design; copied onto its record."""

    arm: str
    block: int
    workload: str
    clients: int
    warmup: bool
    cell: str
    seq: int
    rate: str = ""  # open loop: the cell's rate (records.rate_text); "" for a closed loop
    scheduled_s: float = math.nan  # open loop: the planned send offset from the cell's start
    send_lateness_s: float = math.nan  # open loop: how late the send began (>= 0)


def build_body(case: Case, model: str, sampling: Sampling) -> dict[str, Any]:
    max_tokens = case.max_tokens if sampling.max_tokens_cap is None else min(case.max_tokens, sampling.max_tokens_cap)
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "return_token_ids": True,
    }
    if sampling.seed is not None:
        body["seed"] = sampling.seed
    if case.messages is not None:
        body["messages"] = [dict(m) for m in case.messages]
        if case.response_format is not None:
            body["response_format"] = copy.deepcopy(case.response_format)
        if case.tools is not None:
            body["tools"] = copy.deepcopy(list(case.tools))
        if case.tool_choice is not None:
            body["tool_choice"] = copy.deepcopy(case.tool_choice)
    else:  # a raw-prompt case never carries response_format, tools or tool_choice (refused when it is parsed)
        body["prompt"] = case.prompt
    return body


class _StreamState:
    """What has been read of one stream so far."""

    def __init__(self) -> None:
        self.arrivals: list[float] = []
        self.tokens: list[int] = []
        self.text_parts: list[str] = []
        self.finish_reason: str | None = None
        self.completion_tokens: int | None = None
        self.prompt_tokens: int | None = None
        self.saw_done = False
        self.error_kind: str | None = None
        self.error: str | None = None
        self.spec_draft: int | None = None
        self.spec_accepted: int | None = None
        self._usage_seen = 0
        self.token_digest = hashlib.sha256()
        self.token_ids_seen = False
        self.first_token_id: int | None = None  # the first generated token (what sampled runs compare)
        self._chain_state = b""
        self._chain: list[str] = []  # 4 hex per generated token (docs/workloads.md#the-streaming-client)
        self._tool_parts: dict[int, tuple[list[str], list[str]]] = {}  # index -> (name fragments, argument fragments)

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """The streamed tool calls so far, by index: ``{"name": ..., "arguments": ...}``."""
        return [
            {"name": "".join(name), "arguments": "".join(args)} for _, (name, args) in sorted(self._tool_parts.items())
        ]

    def _take_tool_calls(self, items: Any) -> bool:
        """Merge one delta's tool-call items; True when they carried any name or argument text."""
        carried = False
        for position, item in enumerate(items if isinstance(items, list) else ()):
            if not isinstance(item, dict):
                continue
            index = item.get("index", position)
            function = item.get("function")
            if not isinstance(index, int) or not isinstance(function, dict):
                continue
            name, args = self._tool_parts.setdefault(index, ([], []))
            for key, parts in (("name", name), ("arguments", args)):
                piece = function.get(key)
                if isinstance(piece, str) and piece:
                    parts.append(piece)
                    carried = True
        return carried

    @property
    def prefix_chain(self) -> str:
        return "".join(self._chain)

    def _extend_chain(self, token_ids: Any) -> None:
        for t in token_ids:
            self._chain_state = hashlib.sha256(PREFIX_KEY + self._chain_state + int(t).to_bytes(4, "little")).digest()
            self._chain.append(self._chain_state.hex()[:PREFIX_GROUP_HEX])

    def take(self, payload: str, now: float) -> None:
        if payload == DONE:
            self.saw_done = True
            return
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            self.error_kind, self.error = "protocol", f"unparseable event: {payload[:80]!r}"
            return
        if not isinstance(obj, dict):
            return
        if "error" in obj:
            err = obj["error"]
            self.error_kind = "server_error"
            self.error = str(err.get("message", err) if isinstance(err, dict) else err)[:500]
            return
        usage = obj.get("usage") or None
        running_tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
        for choice in obj.get("choices") or []:
            delta = choice.get("delta") or {}
            piece = choice.get("text") if "text" in choice else delta.get("content")
            token_ids = choice.get("token_ids")
            tool_text = self._take_tool_calls(delta.get("tool_calls")) if isinstance(delta, dict) else False
            if piece or token_ids or tool_text:
                if token_ids is not None:
                    count = len(token_ids)
                    if self.first_token_id is None and token_ids:
                        self.first_token_id = int(token_ids[0])
                    self.token_ids_seen = True
                    self.token_digest.update(b"".join(int(t).to_bytes(4, "little") for t in token_ids))
                    self._extend_chain(token_ids)
                elif isinstance(running_tokens, int):
                    count = max(running_tokens - self._usage_seen, 1)
                else:
                    count = 1
                self.arrivals.append(now)
                self.tokens.append(count)
                self.text_parts.append(piece or "")
            if choice.get("finish_reason") is not None:
                self.finish_reason = choice["finish_reason"]
        if isinstance(running_tokens, int):
            self._usage_seen = running_tokens
        if isinstance(usage, dict) and not obj.get("choices"):
            self.completion_tokens = usage.get("completion_tokens")
            self.prompt_tokens = usage.get("prompt_tokens")
            spec = ((obj.get("metrics") or {}).get("speculative_decoding")) or {}
            if spec:
                self.spec_draft = spec.get("num_draft_tokens")
                self.spec_accepted = spec.get("num_accepted_draft_tokens")


async def send_request(
    client: httpx.AsyncClient,
    base_url: str,
    case: Case,
    body: dict[str, Any],
    meta: RequestMeta,
    sink: Callable[[RequestRecord], None],
    *,
    timeout_s: float,
    headers: dict[str, str] | None = None,
) -> RequestRecord:
    """Send one streamed request and hand its record to ``sink`` exactly once, whatever happens (cancel included)."""
    state = _StreamState()
    parser = SSEParser()
    http_status: int | None = None
    started_unix = time.time()
    t_send = time.perf_counter()
    t_end = math.nan
    cancelled = False
    try:
        async with asyncio.timeout(timeout_s):
            async with client.stream("POST", base_url + case.endpoint, json=body, headers=headers) as response:
                http_status = response.status_code
                if response.status_code >= 400:
                    detail = (await response.aread()).decode(errors="replace")
                    state.error_kind = "http_error"
                    state.error = f"HTTP {response.status_code}: {_error_message(detail)}"
                else:
                    async for text in response.aiter_text():
                        now = time.perf_counter()
                        for payload in parser.feed(text):
                            state.take(payload, now)
                    for payload in parser.close():
                        state.take(payload, time.perf_counter())
        t_end = time.perf_counter()
    except TimeoutError:
        state.error_kind, state.error = "timeout", f"no complete response within {timeout_s:g} s"
    except httpx.ConnectError as exc:
        state.error_kind, state.error = "connect", f"connection failed: {exc}"
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
        state.error_kind, state.error = "stream_broken", f"{type(exc).__name__}: {exc}"
    except httpx.HTTPError as exc:
        state.error_kind, state.error = "transport", f"{type(exc).__name__}: {exc}"
    except asyncio.CancelledError:
        state.error_kind, state.error = "cancelled", "run interrupted while the request was in flight"
        cancelled = True
    if state.error_kind is None and not state.saw_done:
        state.error_kind, state.error = "no_done", "stream ended without [DONE]"
    record = _to_record(state, meta, case, started_unix, t_send, t_end, http_status)
    sink(record)
    if cancelled:
        raise asyncio.CancelledError
    return record


def _error_message(detail: str) -> str:
    try:
        obj = orjson.loads(detail)
        if isinstance(obj, dict):
            err = obj.get("error", obj)
            if isinstance(err, dict):
                return str(err.get("message", err))[:300]
            return str(err)[:300]
    except orjson.JSONDecodeError:
        pass
    return detail[:300]


def _to_record(
    state: _StreamState,
    meta: RequestMeta,
    case: Case,
    started_unix: float,
    t_send: float,
    t_end: float,
    http_status: int | None,
) -> RequestRecord:
    text = "".join(state.text_parts)
    verdict = completeness(error_kind=state.error_kind, saw_done=state.saw_done, finish_reason=state.finish_reason)
    correct: bool | None = None
    detail = "unchecked"
    tool_calls = state.tool_calls
    if case.check is not None:
        result = case.check.evaluate_response(text, tool_calls)
        correct, detail = result.correct, result.detail
    arrivals = [t - t_send for t in state.arrivals]
    return RequestRecord(
        arm=meta.arm,
        block=meta.block,
        workload=meta.workload,
        group=case.group,
        case_id=case.id,
        clients=meta.clients,
        warmup=meta.warmup,
        cell=meta.cell,
        seq=meta.seq,
        started_unix_s=started_unix,
        send_s=t_send,
        chunk_arrival_s=arrivals,
        chunk_tokens=state.tokens,
        ttft_s=arrivals[0] if arrivals else math.nan,
        e2e_s=(t_end - t_send) if not math.isnan(t_end) else math.nan,
        completion_tokens=state.completion_tokens,
        prompt_tokens=state.prompt_tokens,
        finish_reason=state.finish_reason,
        text=text,
        http_status=http_status,
        error_kind=state.error_kind,
        error=state.error,
        saw_done=state.saw_done,
        verdict=verdict,
        correct=correct,
        check_detail=detail,
        spec_draft_tokens=state.spec_draft,
        spec_accepted_tokens=state.spec_accepted,
        output_digest=state.token_digest.hexdigest()[:32] if state.token_ids_seen else None,
        prefix_chain=state.prefix_chain,
        tool_calls=tool_calls,
        first_token_id=state.first_token_id,
        rate=meta.rate,
        scheduled_s=meta.scheduled_s,
        send_lateness_s=meta.send_lateness_s,
    )
