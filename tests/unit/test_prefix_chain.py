"""The per-token prefix chain: the client builds it from streamed token ids, the text policy re-keys it, and two
arms' common prefix is read from it without any token id on disk."""

import orjson
from hypothesis import given
from hypothesis import strategies as st

from specharness.experiment.telemetry import TextPolicy, rekey_prefix_chain
from specharness.records import RequestRecord
from specharness.traffic.client import _StreamState, common_prefix_tokens


def _chain(chunks: list[list[int]]) -> str:
    state = _StreamState()
    for ids in chunks:
        state.take(orjson.dumps({"choices": [{"index": 0, "delta": {"content": "x"}, "token_ids": ids}]}).decode(), 0.0)
    return state.prefix_chain


def test_chain_has_one_group_per_token_whatever_the_chunking() -> None:
    a = _chain([[5, 6], [7], [8, 9, 10]])
    assert len(a) == 4 * 6
    assert a == _chain([[5], [6, 7, 8], [9, 10]])


def test_common_prefix_is_the_tokens_written_alike() -> None:
    a, b = _chain([[1, 2, 3, 4, 5]]), _chain([[1, 2, 3, 9, 5]])
    assert common_prefix_tokens(a, b) == 3
    assert common_prefix_tokens(a, a) == 5
    assert common_prefix_tokens(a, _chain([[1, 2]])) == 2
    assert common_prefix_tokens(a, "") == 0
    # a later equal token after a difference does not count: each group depends on all earlier tokens
    assert common_prefix_tokens(_chain([[1, 7, 3]]), _chain([[1, 8, 3]])) == 1


def _groups_alike(a: str, b: str) -> int:
    """The definition, group by group: leading equal 4-character groups of the shorter chain's whole groups."""
    n = 0
    while n < min(len(a), len(b)) // 4 and a[4 * n : 4 * n + 4] == b[4 * n : 4 * n + 4]:
        n += 1
    return n


@given(st.text("0a", max_size=40), st.text("0a", max_size=12), st.text("0a", max_size=12))
def test_common_prefix_counts_leading_equal_groups(shared: str, tail_a: str, tail_b: str) -> None:
    """Any two strings (lengths not a multiple of 4, differences inside a group, one a prefix of the other)."""
    a, b = shared + tail_a, shared + tail_b
    assert common_prefix_tokens(a, b) == _groups_alike(a, b) == common_prefix_tokens(b, a)


def test_rekeyed_chains_keep_common_prefixes_and_hide_the_public_chain() -> None:
    a, b = _chain([[1, 2, 3, 4, 5]]), _chain([[1, 2, 3, 9, 5]])
    ka, kb = rekey_prefix_chain(a, b"salt-1"), rekey_prefix_chain(b, b"salt-1")
    assert common_prefix_tokens(ka, kb) == 3
    assert ka != a and len(ka) == len(a)
    assert rekey_prefix_chain(a, b"salt-2") != ka  # another run's salt: nothing matches across runs


def test_policy_rekeys_the_chain_under_hash_and_none_only() -> None:
    chain = _chain([[11, 12, 13]])
    r = RequestRecord(
        arm="a",
        block=0,
        workload="w",
        group="g",
        case_id="c",
        clients=1,
        warmup=False,
        cell="x",
        seq=0,
        started_unix_s=0.0,
        send_s=0.0,
        prefix_chain=chain,
    )
    assert TextPolicy("full").request(r).prefix_chain == chain
    for mode in ("hash", "none"):
        kept = TextPolicy(mode, b"s").request(r).prefix_chain
        assert kept == rekey_prefix_chain(chain, b"s") and kept != chain
