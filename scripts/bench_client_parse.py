"""The harness's own cost of parsing a streamed response, no engine: a canned 2,000-chunk stream delivered in reads
that do not line up with events. Not an ASV benchmark: it does not depend on the vLLM release (ASV's axis).

    .venv/bin/python scripts/bench_client_parse.py
"""

from __future__ import annotations

import timeit

from specharness.traffic.client import _StreamState
from specharness.traffic.sse import SSEParser

_CHUNK = (
    'data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" word"},'
    '"token_ids":[1234,99],"finish_reason":null}],"usage":{"prompt_tokens":50,"completion_tokens":7}}\n\n'
)
CHUNKS = 2000


def parse(reads: list[str]) -> None:
    parser, state = SSEParser(), _StreamState()
    for i, text in enumerate(reads):
        for payload in parser.feed(text):
            state.take(payload, float(i))


def main() -> None:
    stream = _CHUNK * CHUNKS + "data: [DONE]\n\n"
    reads = [stream[i : i + 1500] for i in range(0, len(stream), 1500)]
    best = min(timeit.repeat(lambda: parse(reads), number=5, repeat=5)) / 5
    print(f"client parse: {1e6 * best / CHUNKS:.2f} µs per streamed chunk ({CHUNKS} chunks, best of 5×5)")


if __name__ == "__main__":
    main()
