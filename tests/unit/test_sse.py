from hypothesis import given
from hypothesis import strategies as st

from specharness.traffic.sse import DONE, SSEParser

STREAM = 'data: {"a": 1}\n\n: keep-alive comment\n\nevent: x\ndata: line1\ndata: line2\n\ndata: [DONE]\n\n'
EXPECTED = ['{"a": 1}', "line1\nline2", DONE]


def feed_all(chunks: list[str]) -> list[str]:
    parser = SSEParser()
    out: list[str] = []
    for chunk in chunks:
        out += parser.feed(chunk)
    return out + parser.close()


def test_whole_stream() -> None:
    assert feed_all([STREAM]) == EXPECTED


def test_every_two_way_split() -> None:
    for i in range(len(STREAM) + 1):
        assert feed_all([STREAM[:i], STREAM[i:]]) == EXPECTED, i


def test_one_char_at_a_time() -> None:
    assert feed_all(list(STREAM)) == EXPECTED


def test_crlf_split_between_chunks() -> None:
    crlf = STREAM.replace("\n", "\r\n")
    for i in range(len(crlf) + 1):
        assert feed_all([crlf[:i], crlf[i:]]) == EXPECTED, i


def test_no_space_after_colon_and_bare_cr() -> None:
    assert feed_all(["data:x\r\rdata:y\r\r"]) == ["x", "y"]


def test_truncated_stream_returns_last_event_on_close() -> None:
    assert feed_all(['data: {"b": 2}']) == ['{"b": 2}']


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=6))
def test_any_split_points(cuts: list[int]) -> None:
    points = sorted(set(cuts))
    pieces = [STREAM[a:b] for a, b in zip([0, *points], [*points, len(STREAM)], strict=True)]
    assert feed_all(pieces) == EXPECTED
