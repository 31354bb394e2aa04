import pytest

from specharness import ConfigError
from specharness.experiment.design import PROFILES, build_arms, get_profile, override, plan_cells
from specharness.experiment.plan import block_orders


def test_standard_profile_is_the_published_reference() -> None:
    std = PROFILES["standard"]
    assert std.measured_requests() == 512 and std.warmup_requests() == 4 * 2 * (1 + 8) * 2


def test_arm_orders_come_in_mirrored_pairs() -> None:
    plans = plan_cells(PROFILES["standard"])
    assert len(plans) == 4 * 2 * 2
    orders = {p.block: p.arm_order for p in plans}
    ab, ba = ("baseline", "ngram"), ("ngram", "baseline")
    assert orders == {0: ab, 1: ba, 2: ba, 3: ab}
    assert block_orders(ab, 8) == [ab, ba, ba, ab, ab, ba, ba, ab]


def test_more_arms_get_a_seeded_order_and_its_reverse() -> None:
    arms = ("baseline", "baseline-b", "baseline-slow")
    orders = block_orders(arms, 6, seed=3)
    assert orders == block_orders(arms, 6, seed=3)
    for first, second in zip(orders[::2], orders[1::2], strict=True):
        assert second == tuple(reversed(first)) and sorted(first) == sorted(arms)
    for a in arms:  # every arm runs before every other equally often
        for b in arms:
            if a != b:
                assert sum(o.index(a) < o.index(b) for o in orders) == 3


def test_prefix_caching_is_off_unless_asked() -> None:
    assert all(a.prefix_caching is False for a in build_arms(get_profile("quick")))
    assert all(a.prefix_caching is True for a in build_arms(override(get_profile("quick"), prefix_caching="reset")))
    slow = {a.name: a for a in build_arms(get_profile("control"))}["baseline-slow"]
    assert slow.client_slowdown == 1.25 and slow.speculative_config is None


def test_arms_separate_speculation_from_scheduling() -> None:
    arms = {a.name: a for a in build_arms(override(get_profile("quick"), arms=("baseline", "ngram", "baseline-sync")))}
    assert arms["ngram"].speculative_config["method"] == "ngram"
    assert arms["baseline-sync"].async_scheduling is False and arms["baseline"].async_scheduling is None


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"blocks": 0}, "--blocks"),
        ({"blocks": 3}, "even number of blocks"),
        ({"until_decided": True, "max_blocks": 3}, "--max-blocks"),
        ({"prefix_caching": "sometimes"}, "--prefix-caching"),
        ({"known_slowdown": 0.9}, "--known-slowdown"),
        ({"clients": (0,)}, "--clients"),
        ({"arms": ("baseline",)}, "--arms"),
        ({"arms": ("baseline", "eagle")}, "'eagle' is unknown"),
        ({"min_correct_fraction": 1.5}, "--min-correct"),
        ({"speculative": {"method": "eagle"}}, "method 'eagle'"),
        (
            {
                "speculative": {
                    "method": "ngram",
                    "num_speculative_tokens": 4,
                    "prompt_lookup_min": 5,
                    "prompt_lookup_max": 2,
                }
            },
            "min must not exceed max",
        ),
        (
            {
                "speculative": {
                    "method": "ngram",
                    "num_speculative_tokens": "4",
                    "prompt_lookup_min": 1,
                    "prompt_lookup_max": 2,
                }
            },
            "num_speculative_tokens",
        ),
    ],
)
def test_bad_design_names_the_option(changes: dict, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        override(get_profile("quick"), **changes)
    assert fragment in str(info.value)


def test_unknown_profile() -> None:
    with pytest.raises(ConfigError, match="--profile 'huge'"):
        get_profile("huge")
