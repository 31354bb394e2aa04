import pytest

from specharness import ConfigError
from specharness.experiment.design import PROFILES, build_arms, get_profile, override, plan_cells


def test_standard_profile_is_the_published_reference() -> None:
    std = PROFILES["standard"]
    assert std.measured_requests() == 384 and std.warmup_requests() == 96


def test_arm_order_alternates_between_blocks() -> None:
    plans = plan_cells(PROFILES["standard"])
    assert len(plans) == 3 * 2 * 2
    orders = {p.block: p.arm_order for p in plans}
    assert orders == {0: ("baseline", "ngram"), 1: ("ngram", "baseline"), 2: ("baseline", "ngram")}


def test_arms_separate_speculation_from_scheduling() -> None:
    arms = {a.name: a for a in build_arms(override(get_profile("quick"), arms=("baseline", "ngram", "baseline-sync")))}
    assert arms["ngram"].speculative_config["method"] == "ngram"
    assert arms["baseline-sync"].async_scheduling is False and arms["baseline"].async_scheduling is None


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"blocks": 0}, "--blocks"),
        ({"clients": (0,)}, "--clients"),
        ({"arms": ("baseline",)}, "--arms"),
        ({"arms": ("baseline", "eagle")}, "'eagle' is unknown"),
        ({"min_correct_fraction": 1.5}, "--min-correct"),
        ({"speculative": {"method": "eagle"}}, "method 'eagle'"),
        ({"speculative": {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 5,
                          "prompt_lookup_max": 2}}, "min must not exceed max"),
        ({"speculative": {"method": "ngram", "num_speculative_tokens": "4", "prompt_lookup_min": 1,
                          "prompt_lookup_max": 2}}, "num_speculative_tokens"),
    ],
)
def test_bad_design_names_the_option(changes: dict, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        override(get_profile("quick"), **changes)
    assert fragment in str(info.value)


def test_unknown_profile() -> None:
    with pytest.raises(ConfigError, match="--profile 'huge'"):
        get_profile("huge")
