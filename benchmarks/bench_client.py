"""The harness's own cost, no engine: parsing a canned 2,000-chunk stream (what each streamed chunk costs)."""

from specharness.traffic.client import _StreamState
from specharness.traffic.sse import SSEParser

_CHUNK = 'data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" word"},' \
         '"token_ids":[1234,99],"finish_reason":null}],"usage":{"prompt_tokens":50,"completion_tokens":7}}\n\n'


class ClientParse:
    chunks = 2000

    def setup(self):
        self.stream = _CHUNK * self.chunks + "data: [DONE]\n\n"
        # delivered the way a socket does: reads that do not line up with events
        self.reads = [self.stream[i : i + 1500] for i in range(0, len(self.stream), 1500)]

    def time_parse_stream(self):
        parser, state = SSEParser(), _StreamState()
        for i, text in enumerate(self.reads):
            for payload in parser.feed(text):
                state.take(payload, float(i))
