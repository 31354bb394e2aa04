"""The streaming client against a STAND-IN server (not vLLM): a tiny loopback HTTP server in a thread that plays
canned SSE streams, so chunk counting, failures and timeouts can be checked exactly. Engine tests use real vLLM."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator

import httpx
import pytest

from specharness.records import RequestRecord
from specharness.traffic.checks import parse_check
from specharness.traffic.client import RequestMeta, Sampling, build_body, send_request
from specharness.traffic.workloads import Case, parse_case


def _chunk(content: str, token_ids: list[int], finish: str | None = None) -> bytes:
    obj = {"choices": [{"index": 0, "delta": {"content": content}, "token_ids": token_ids, "finish_reason": finish}]}
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _tool_chunk(items: list[dict], token_ids: list[int], finish: str | None = None) -> bytes:
    """A chat chunk shaped like vLLM's for a tool call: content null, ``delta.tool_calls`` fragments."""
    obj = {
        "choices": [
            {
                "index": 0,
                "delta": {"content": None, "tool_calls": items},
                "token_ids": token_ids,
                "finish_reason": finish,
            }
        ]
    }
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


USAGE = (
    b'data: {"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 6}, "metrics": '
    b'{"speculative_decoding": {"num_draft_tokens": 8, "num_accepted_draft_tokens": 5}}}\n\n'
)
ROLE = b'data: {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}\n\n'

ARGS = '{"room": "Linden", "attendees": ["Ana Lund", "Ruth Okafor"], "minutes": 45}'
_first = _tool_chunk(
    [{"index": 0, "id": "chatcmpl-tool-1", "type": "function", "function": {"name": "book_meeting", "arguments": ""}}],
    [11],
)
_split = _tool_chunk([{"index": 0, "function": {"arguments": ARGS[13:40]}}], [14, 15, 16])
TOOL_STREAM = [
    ROLE,
    _first,
    _tool_chunk(
        [{"index": 0, "function": {"arguments": ARGS[:6]}}, {"index": 0, "function": {"arguments": ARGS[6:13]}}],
        [12, 13],
    ),  # two fragments of one call in one delta (vLLM's hermes parser does this)
    _split[:40],
    _split[40:],  # one event split across two network reads
    b'data: {"choices": [{"index": 0, "delta": {}, "token_ids": [17], "finish_reason": null}]}\n\n',
    _tool_chunk([{"index": 0, "function": {"arguments": ARGS[40:]}}], [18, 19], "tool_calls"),
    b'data: {"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 9}}\n\n',
    b"data: [DONE]\n\n",
]
TWO_CALLS = [
    _tool_chunk(
        [
            {"index": 0, "id": "a", "type": "function", "function": {"name": "book_meeting", "arguments": '{"ro'}},
            {"index": 1, "id": "b", "type": "function", "function": {"name": "cancel", "arguments": "{"}},
        ],
        [1, 2],
    ),
    _tool_chunk([{"index": 1, "function": {"arguments": "}"}}], [3]),
    _tool_chunk([{"index": 0, "function": {"arguments": 'om": "Amber", "minutes": 30}'}}], [4, 5], "stop"),
    b"data: [DONE]\n\n",
]
SCHEMA_400 = (
    b'{"error": {"message": "The provided JSON schema contains features not supported by xgrammar.", '
    b'"type": "BadRequestError", "param": null, "code": 400}}'
)  # vLLM's ErrorResponse shape

SCENARIOS: dict[str, tuple[int, list[bytes], float]] = {
    "multi": (
        200,
        [
            ROLE,
            _chunk("Hel", [1]),
            _chunk("lo wor", [2, 3, 4]),
            _chunk("ld", [5, 6], "stop"),
            USAGE,
            b"data: [DONE]\n\n",
        ],
        0.0,
    ),
    "length": (200, [_chunk("ab", [1, 2], "length"), b"data: [DONE]\n\n"], 0.0),
    "no_done": (200, [_chunk("partial", [1, 2])], 0.0),
    "dropped": (200, [_chunk("partial", [1, 2])], 0.0),
    "http400": (400, [b'{"error": {"message": "prompt is longer than the maximum model length"}}'], 0.0),
    "remote_error": (200, [b'data: {"error": {"message": "engine overloaded"}}\n\n', b"data: [DONE]\n\n"], 0.0),
    "slow": (200, [_chunk("x", [1])], 3.0),
    "tool": (200, TOOL_STREAM, 0.0),
    "two_calls": (200, TWO_CALLS, 0.0),
    "schema400": (400, [SCHEMA_400], 0.0),
}


class StandInServer:
    """Serves SCENARIOS by the request body's 'model' field; HTTP/1.1 with chunked transfer."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self.bodies: dict[str, dict] = {}  # the last request body received per scenario
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self.loop.run_forever()
        server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
        )
        body = json.loads(await reader.readexactly(length))
        self.bodies[body["model"]] = body
        status, parts, delay = SCENARIOS[body["model"]]
        ctype = b"text/event-stream" if status == 200 else b"application/json"
        writer.write(b"HTTP/1.1 %d X\r\ncontent-type: %s\r\ntransfer-encoding: chunked\r\n\r\n" % (status, ctype))
        for part in parts:
            writer.write(b"%x\r\n%s\r\n" % (len(part), part))
            await writer.drain()
            await asyncio.sleep(0.01)
        await asyncio.sleep(delay)
        if body["model"] != "dropped":
            writer.write(b"0\r\n\r\n")
        await writer.drain()
        writer.close()

    def __enter__(self) -> StandInServer:
        self._thread.start()
        self._ready.wait(5)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


@pytest.fixture(scope="module")
def standin() -> Iterator[StandInServer]:
    with StandInServer() as server:
        yield server


CASE = Case(
    id="c",
    max_tokens=8,
    group="g",
    messages=({"role": "user", "content": "hi"},),
    check=parse_check({"type": "contains", "values": ["hello world"]}, "t"),
)


def call(
    port: int, scenario: str, timeout_s: float = 5.0, case: Case = CASE
) -> tuple[RequestRecord, list[RequestRecord]]:
    sink: list[RequestRecord] = []

    async def go() -> RequestRecord:
        async with httpx.AsyncClient() as client:
            body = build_body(case, scenario, Sampling())
            meta = RequestMeta("ngram", 0, "w", 1, False, "cell", 0)
            return await send_request(
                client, f"http://127.0.0.1:{port}", case, body, meta, sink.append, timeout_s=timeout_s
            )

    return asyncio.run(go()), sink


def test_counts_tokens_per_chunk_and_reads_final_usage(standin: StandInServer) -> None:
    rec, sink = call(standin.port, "multi")
    assert sink == [rec]
    assert rec.chunk_tokens == [1, 3, 2] and len(rec.chunk_arrival_s) == 3
    assert rec.completion_tokens == 6 and rec.prompt_tokens == 7 and rec.text == "Hello world"
    assert rec.verdict == "complete" and rec.correct is True and rec.finish_reason == "stop"
    assert (rec.spec_draft_tokens, rec.spec_accepted_tokens) == (8, 5)
    assert 0 < rec.ttft_s == rec.chunk_arrival_s[0] <= rec.e2e_s
    assert rec.tpot_s == pytest.approx((rec.e2e_s - rec.ttft_s) / 5)


def test_length_is_truncated_not_complete(standin: StandInServer) -> None:
    rec, _ = call(standin.port, "length")
    assert rec.verdict == "truncated" and not rec.useful


@pytest.mark.parametrize(
    ("scenario", "kind", "verdict"),
    [
        ("no_done", "no_done", "incomplete"),
        ("dropped", "stream_broken", "failed"),
        ("http400", "http_error", "failed"),
        ("remote_error", "server_error", "failed"),
    ],
)
def test_faults_are_recorded_with_their_kind(standin: StandInServer, scenario: str, kind: str, verdict: str) -> None:
    rec, sink = call(standin.port, scenario)
    assert len(sink) == 1 and rec.error_kind == kind and rec.verdict == verdict and not rec.useful
    if scenario == "http400":
        assert rec.http_status == 400 and "maximum model length" in (rec.error or "")


def test_timeout_is_recorded(standin: StandInServer) -> None:
    rec, sink = call(standin.port, "slow", timeout_s=0.5)
    assert rec.error_kind == "timeout" and sink == [rec]


def test_connection_refused_is_recorded() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    rec, _ = call(port, "multi")
    assert rec.error_kind == "connect" and rec.verdict == "failed"


def test_cancelled_request_is_journaled_then_cancellation_propagates(standin: StandInServer) -> None:
    sink: list[RequestRecord] = []

    async def go() -> None:
        async with httpx.AsyncClient() as client:
            meta = RequestMeta("ngram", 0, "w", 1, False, "cell", 0)
            task = asyncio.create_task(
                send_request(
                    client,
                    f"http://127.0.0.1:{standin.port}",
                    CASE,
                    build_body(CASE, "slow", Sampling()),
                    meta,
                    sink.append,
                    timeout_s=10,
                )
            )
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(go())
    assert len(sink) == 1 and sink[0].error_kind == "cancelled"


TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("book_meeting", "cancel")
]
TOOL_CASE = parse_case(
    {
        "id": "t",
        "max_tokens": 32,
        "messages": [{"role": "user", "content": "book it"}],
        "tools": TOOLS,
        "tool_choice": {"type": "function", "function": {"name": "book_meeting"}},
        "check": {"type": "tool_call", "values": {"room": "Linden", "attendees[1]": "Ruth Okafor", "minutes": 45}},
    },
    "t",
)


def test_streamed_tool_call_is_assembled_counted_and_checked(standin: StandInServer) -> None:
    rec, sink = call(standin.port, "tool", case=TOOL_CASE)
    assert sink == [rec] and rec.error_kind is None
    assert rec.tool_calls == [{"name": "book_meeting", "arguments": ARGS}]
    assert rec.text == ""  # the record's text is the content, null throughout
    assert rec.chunk_tokens == [1, 2, 3, 1, 2] and rec.completion_tokens == 9  # token ids counted as for content
    assert rec.finish_reason == "tool_calls" and rec.verdict == "complete"
    assert rec.correct is True and rec.check_detail == "arguments valid JSON, 3 values match" and rec.useful
    assert rec.to_dict()["tool_calls"] == rec.tool_calls
    sent = standin.bodies["tool"]
    assert sent["tools"] == TOOLS and sent["tool_choice"] == {"type": "function", "function": {"name": "book_meeting"}}
    assert "response_format" not in sent


def test_parallel_tool_calls_are_kept_apart_by_index(standin: StandInServer) -> None:
    rec, _ = call(standin.port, "two_calls", case=TOOL_CASE)
    assert rec.tool_calls == [
        {"name": "book_meeting", "arguments": '{"room": "Amber", "minutes": 30}'},
        {"name": "cancel", "arguments": "{}"},
    ]
    assert rec.verdict == "complete" and rec.correct is False
    assert rec.check_detail == 'arguments value at room is "Amber", expected "Linden"'


def test_schema_rejected_by_the_server_is_an_http_error(standin: StandInServer) -> None:
    case = parse_case(
        {
            "id": "j",
            "max_tokens": 8,
            "messages": [{"role": "user", "content": "json"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": {}}},
            "check": {"type": "json_schema"},
        },
        "t",
    )
    rec, sink = call(standin.port, "schema400", case=case)
    assert sink == [rec] and rec.error_kind == "http_error" and rec.http_status == 400 and rec.verdict == "failed"
    assert "not supported by xgrammar" in (rec.error or "") and not rec.useful and rec.tool_calls == []
    assert standin.bodies["schema400"]["response_format"] == case.response_format
