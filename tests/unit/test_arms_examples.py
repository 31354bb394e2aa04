"""The example arms files under scripts/arms/ load (no engine) and say what docs/arms.md says they compare."""

from __future__ import annotations

from pathlib import Path

import pytest

from specharness.experiment.arms import load_arms_file
from specharness.experiment.design import PRESETS, get_profile

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "scripts" / "arms").glob("*.toml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_loads_and_is_in_the_docs(path: Path) -> None:
    declared = load_arms_file(path, get_profile("release"))
    assert declared.comparisons and len(declared.arms) >= 2
    assert f"scripts/arms/{path.name}" in (ROOT / "docs" / "arms.md").read_text()


def test_the_configuration_examples_compare_what_they_say() -> None:
    profile = get_profile("release")
    k = {a.name: a for a in load_arms_file(ROOT / "scripts/arms/ngram-k4-vs-k8.toml", profile).arms}
    assert k["k4"].speculative_config == PRESETS["ngram"](profile).speculative_config
    assert k["k8"].speculative_config == {**profile.speculative, "num_speculative_tokens": 8}
    lookup = {a.name: a for a in load_arms_file(ROOT / "scripts/arms/lookup-2-4-vs-vllm-default.toml", profile).arms}
    assert (lookup["lookup-2-4"].speculative_config or {})["prompt_lookup_min"] == 2
    assert lookup["lookup-5-5"].speculative_config == {
        **profile.speculative,
        "prompt_lookup_min": 5,
        "prompt_lookup_max": 5,
    }


def test_the_documented_preset_settings_are_the_presets() -> None:
    """docs/arms.md's table states each preset's settings; a preset changed without the table fails here."""
    text = (ROOT / "docs" / "arms.md").read_text()
    spec = get_profile("quick").speculative
    for preset in PRESETS:
        assert f"| `{preset}` |" in text
    assert (
        f"`num_speculative_tokens` {spec['num_speculative_tokens']}, `prompt_lookup_min` {spec['prompt_lookup_min']}, "
        f"`prompt_lookup_max` {spec['prompt_lookup_max']}" in text
    )
    assert f"`--known-slowdown` (default {get_profile('quick').known_slowdown:g})" in text
