"""One parse of the engine and run options: the CLI and the ASV suite read the same declarations."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from specharness import ConfigError
from specharness.cli import _parser
from specharness.engines.model import ResolvedModel
from specharness.engines.server import ArmSpec, build_command
from specharness.experiment.config import RunConfig
from specharness.experiment.design import get_profile
from specharness.experiment.engineset import engine_settings
from specharness.experiment.options import engine_fields, engine_options, run_config
from specharness.history.asv.suite import _engine_options


def parse(*words: str) -> argparse.Namespace:
    return _parser().parse_args(list(words))


def test_engine_words_read_as_the_cli_reads_them() -> None:
    words = ["--gpu-memory-utilization", "0.3", "--start-one-by-one", "--kv-cache-gib", "4", "--max-model-len", "4096"]
    from_words = engine_options(words)
    from_cli = engine_fields(parse("run", *words))
    assert from_words == from_cli
    assert (from_words["gpu_memory_utilization"], from_words["kv_cache_gib"]) == (0.3, 4)
    assert from_words["start_together"] is False and from_words["max_model_len"] == 4096


def test_unknown_engine_words_go_to_vllm_in_order() -> None:
    words = ["--enforce-eager", "--kv-cache-gib", "3", "--tool-call-parser", "hermes", "--engine-arg=--x"]
    options = engine_options(words)
    assert options["kv_cache_gib"] == 3
    assert options["extra_engine_args"] == ("--x", "--enforce-eager", "--tool-call-parser", "hermes")


def test_no_engine_words_give_the_run_configs_defaults(tmp_path: Path) -> None:
    quick = get_profile("quick")
    assert RunConfig(profile=quick, out_dir=tmp_path, **engine_options([])) == RunConfig(
        profile=quick, out_dir=tmp_path
    )


def test_a_bad_engine_word_is_a_config_error_naming_its_source() -> None:
    with pytest.raises(ConfigError, match="SPECHARNESS_ASV_ENGINE: argument --kv-cache-gib: invalid int value"):
        engine_options(["--kv-cache-gib", "lots"])


def test_asv_reads_its_variable_with_the_same_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECHARNESS_ASV_ENGINE", "--gpu-memory-utilization 0.3 --start-one-by-one --enforce-eager")
    options = _engine_options()
    assert options == engine_options(["--gpu-memory-utilization", "0.3", "--start-one-by-one", "--enforce-eager"])
    assert options["extra_engine_args"] == ("--enforce-eager",) and options["start_together"] is False


def test_run_options_become_one_run_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEY_FOR_TEST", "secret")
    words = ["--workloads", "copy", "--clients", "1,4", "--rates", "2,inf", "--requests", "6", "--temperature", "0.5"]
    engine = ["--engine-arg=--enforce-eager", "--api-key-env", "KEY_FOR_TEST"]
    args = parse("run", *words, *engine, "--out", str(tmp_path / "r"))
    config, resume = run_config(args, "run")
    assert not resume and config.out_dir == tmp_path / "r" and config.api_key == "secret"
    assert config.profile.workloads == ("copy",) and config.profile.clients == (1, 4)
    assert config.profile.rates == ("2", "inf") and config.profile.requests_per_cell == 6
    assert config.sampling.temperature == 0.5 and config.extra_engine_args == ("--enforce-eager",)


def test_run_option_rules_that_span_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = str(tmp_path / "r")
    with pytest.raises(ConfigError, match=r"--levels .* or --rates"):
        run_config(parse("sweep", "--levels", "0.5,1", "--rates", "1,2", "--out", out), "sweep")
    sweep, _ = run_config(parse("sweep", "--rates", "1,2", "--out", out), "sweep")
    assert sweep.profile.sweep_levels == () and sweep.profile.clients == ()  # the user's own ladder
    with pytest.raises(ConfigError, match="two rates are the same"):
        run_config(parse("run", "--rates", "1,1.0000001", "--out", out), "run")
    monkeypatch.delenv("NO_SUCH_KEY_FOR_TEST", raising=False)
    with pytest.raises(ConfigError, match="--api-key-env NO_SUCH_KEY_FOR_TEST"):
        run_config(parse("run", "--api-key-env", "NO_SUCH_KEY_FOR_TEST", "--out", out), "run")


def test_sampled_takes_the_same_engine_options() -> None:
    args = parse("sampled", "--out", "x", "--start-one-by-one", "--kv-cache-gib", "3", "--engine-arg=--enforce-eager")
    assert engine_fields(args) == engine_options(["--start-one-by-one", "--kv-cache-gib", "3", "--enforce-eager"])


def test_declared_speed_rules_reach_the_manifest_and_the_analysis(tmp_path: Path) -> None:
    """--min-prefix-tokens and --max-excluded-time are parsed once, saved in the manifest's profile and read back
    by the analysis of that run; a manifest without them (older runs) reads the defaults."""
    from specharness.analysis.analyse import rules_for
    from specharness.experiment.design import Profile

    words = ["--min-prefix-tokens", "24", "--max-excluded-time", "0.25", "--out", str(tmp_path / "r")]
    config, _ = run_config(parse("run", *words), "run")
    saved = config.to_dict()["profile"]
    assert (saved["min_prefix_tokens"], saved["max_excluded_time"]) == (24, 0.25)
    rules = rules_for(Profile.from_dict(saved), greedy=True)
    assert (rules.min_prefix_tokens, rules.max_excluded_time) == (24, 0.25)
    old = {k: v for k, v in saved.items() if k not in ("min_prefix_tokens", "max_excluded_time")}
    default = rules_for(Profile.from_dict(old), greedy=True)
    assert (default.min_prefix_tokens, default.max_excluded_time) == (8, 0.10)
    plain, _ = run_config(parse("run", "--out", str(tmp_path / "p")), "run")
    assert (plain.profile.min_prefix_tokens, plain.profile.max_excluded_time) == (8, 0.10)


@pytest.mark.parametrize(
    ("flag", "value", "shown"),
    [
        ("--min-prefix-tokens", "-1", "--min-prefix-tokens -1"),
        ("--max-excluded-time", "0", "--max-excluded-time 0.0"),
        ("--max-excluded-time", "1.5", "--max-excluded-time 1.5"),
    ],
)
def test_bad_declared_speed_rules_name_the_flag_and_the_fix(tmp_path: Path, flag: str, value: str, shown: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{shown}: give .*e\.g\. "):
        run_config(parse("run", flag, value, "--out", str(tmp_path / "r")), "run")


def test_the_cli_gives_one_line_for_a_bad_declared_rule(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """In-process (this checkout's code): exit 2 and one error line naming the flag, no traceback."""
    from specharness.cli import main

    assert main(["run", "--min-prefix-tokens=-2", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("specharness: error:") == 1 and "--min-prefix-tokens -2: give 0 or more" in err
    assert "Traceback" not in err


def test_dtype_reaches_every_engine_and_the_manifest(tmp_path: Path) -> None:
    """--dtype (for CPUs whose oneDNN has no bf16 matmul) is one engine option: read by the CLI and the ASV suite
    alike, saved in the manifest (an older manifest without it reads the dtype its engines ran), and the one --dtype
    of each server's command line (--engine-arg --dtype is refused); a dtype vLLM does not know is one line naming
    the flag."""
    assert engine_fields(parse("run", "--dtype", "float32")) == engine_options(["--dtype", "float32"])
    config, _ = run_config(parse("run", "--dtype", "float32", "--out", str(tmp_path / "r")), "run")
    saved = config.to_dict()
    assert saved["dtype"] == "float32"
    assert RunConfig.from_manifest(config.out_dir, saved, None).dtype == "float32"
    older = {k: v for k, v in saved.items() if k != "dtype"}
    assert RunConfig.from_manifest(config.out_dir, older, None).dtype == "bfloat16"
    # written when the dtype could only be an extra vLLM argument (after the harness's --dtype bfloat16: the last
    # flag wins, so its engines ran float32): read as the engine option, not as a second --dtype
    given = RunConfig.from_manifest(config.out_dir, {**older, "extra_engine_args": ["--dtype", "float32", "--x"]}, None)
    assert (given.dtype, given.extra_engine_args) == ("float32", ("--x",))
    with pytest.raises(ConfigError, match=r"--engine-arg --dtype: .* use --dtype"):
        run_config(parse("run", "--engine-arg=--dtype=half", "--out", str(tmp_path / "r3")), "run")
    model = ResolvedModel(  # a stand-in: only its path and name reach the command
        name="stand-in", serve_path=tmp_path, source_path=tmp_path, revision_sha256="0" * 64, origin="hf-dir"
    )
    cmd = build_command(engine_settings(config, model), ArmSpec("baseline"), 8000, supports_per_request_metrics=True)
    assert cmd.count("--dtype") == 1 and cmd[cmd.index("--dtype") + 1] == "float32"
    with pytest.raises(ConfigError, match="--dtype 'fp8'"):
        run_config(parse("run", "--dtype", "fp8", "--out", str(tmp_path / "r2")), "run")


def test_every_committed_run_reads_back_as_a_typed_config() -> None:
    """The configuration is typed from the command line to the manifest and back: every committed run's manifest
    (all schemas kept in reports/) reads as a :class:`RunConfig` whose own manifest form says the same (the analysis
    reads it so, never the dict with defaults of its own)."""
    root = Path(__file__).resolve().parents[2] / "reports"
    read = 0
    for path in sorted(root.rglob("manifest.json")):
        raw = json.loads(path.read_text())
        if "profile" not in (raw.get("config") or {}):
            continue
        config = RunConfig.from_manifest(path.parent, raw["config"], None)
        again = RunConfig.from_manifest(path.parent, config.to_dict(), None)
        assert again == config, path
        read += 1
    assert read >= 100
