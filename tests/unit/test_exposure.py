"""Exposure: servers bind to loopback by default, and an API key never lands in argv or the saved config."""

from pathlib import Path

from specharness.engines.server import EngineSettings, build_command
from specharness.experiment.config import RunConfig
from specharness.experiment.design import build_arms, get_profile

SECRET = "sk-test-0123456789"


def test_loopback_by_default_and_key_not_in_argv() -> None:
    settings = EngineSettings(model_path="/m", served_model_name="m", api_key=SECRET)
    for arm in build_arms(get_profile("standard")):
        cmd = build_command(settings, arm, 8000, supports_per_request_metrics=True)
        assert cmd[cmd.index("--host") + 1] == "127.0.0.1"
        assert SECRET not in " ".join(cmd)
    assert SECRET not in repr(settings)


def test_saved_config_says_only_whether_a_key_was_set(tmp_path: Path) -> None:
    config = RunConfig(profile=get_profile("quick"), out_dir=tmp_path, api_key=SECRET)
    saved = config.to_dict()
    assert saved["api_key"] == "set" and SECRET not in str(saved) and SECRET not in repr(config)
