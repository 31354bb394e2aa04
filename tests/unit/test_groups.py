"""Per-group decisions, copyability and the group report on a SYNTHETIC run folder (made-up records; no engine)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest

from specharness.analysis.analyse import analyse
from specharness.analysis.copyability import copyability, lookup_words
from specharness.analysis.groups import (
    POOLED,
    FeatureCorrelation,
    FeatureCorrelations,
    GroupDecision,
    feature_correlations,
    group_decisions,
    predictors_text,
    prompts_from_manifest,
    token_spread,
)
from specharness.experiment.config import RunConfig
from specharness.experiment.design import get_profile, override
from specharness.experiment.journal import Journal
from specharness.experiment.plan import block_orders
from specharness.experiment.rundir import read_manifest, write_manifest
from specharness.records import CellRecord, Manifest, RequestRecord, cell_id, cell_key, load_label
from specharness.reporting.group_tables import groups_chart, groups_markdown

# ---------------------------------------------------------------------------------------------------- copyability


def test_words_split_punctuation_apart() -> None:
    assert lookup_words("Hello, world!  x_1") == ["Hello", ",", "world", "!", "x_1"]


def test_verbatim_copy_of_the_prompt_is_near_one() -> None:
    sentence = " ".join(f"word{i}" for i in range(50))
    # the first two output words have no earlier n-gram ending just before them; every later word does
    assert copyability(sentence, sentence) == pytest.approx(48 / 50)


def test_unrelated_text_is_zero() -> None:
    assert copyability("the quick brown fox jumps over the lazy dog", "alpha beta gamma delta epsilon zeta") == 0.0


def test_a_loop_of_its_own_output_is_high() -> None:
    # "a b c" repeated: from the 6th word on, the last two words occurred earlier followed by the right word
    assert copyability("Say anything.", "a b c " * 10) == pytest.approx(25 / 30)


def test_empty_output_is_nan() -> None:
    assert math.isnan(copyability("some prompt", ""))
    assert math.isnan(copyability("some prompt", "   \n"))


def test_a_match_followed_by_another_word_is_a_miss() -> None:
    assert copyability("a b c d e", "a b x") == 0.0


def test_proposer_drafts_from_the_earliest_occurrence_any_counts_every_one() -> None:
    # (x, y) first occurred followed by p: the proposer drafts p, and the output goes on with q
    assert copyability("x y p x y q", "x y q") == 0.0
    assert copyability("x y p x y q", "x y q", rule="any") == pytest.approx(1 / 3)


def test_proposer_prefers_the_longest_match() -> None:
    # before "d", (y z b) matched earlier followed by d; the shorter (z b) first occurred followed by c
    assert copyability("q z b c y z b d", "y z b d") == pytest.approx(2 / 4)
    assert copyability("q z b c y z b d", "y z b d", lookup_max=2) == pytest.approx(1 / 4)


def test_lookup_sizes_are_validated() -> None:
    assert copyability("a b", "a b", lookup_min=1, lookup_max=1) == pytest.approx(1 / 2)
    with pytest.raises(ValueError):
        copyability("a", "b", lookup_min=3, lookup_max=2)
    with pytest.raises(ValueError):
        copyability("a", "b", lookup_min=0)


# ------------------------------------------------------------------------------------------------ small helpers


def test_token_spread_needs_twenty_samples_for_p95() -> None:
    assert math.isnan(token_spread(range(19))["p95"])
    spread = token_spread([*range(1, 21), None])
    assert spread["n"] == 20 and spread["p50"] == 10 and spread["p95"] == 19


def test_prompts_from_manifest_reads_raw_and_chat_cases() -> None:
    manifest = {
        "workloads": {
            "w": {
                "cases": [
                    {"id": "raw", "prompt": "copy this"},
                    {
                        "id": "chat",
                        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
                    },
                ]
            }
        }
    }
    assert prompts_from_manifest(manifest) == {("w", "raw"): "copy this", ("w", "chat"): "be brief\nhi"}


def test_predictors_text_never_claims_a_cause() -> None:
    nan = math.nan
    none = [FeatureCorrelation("copyability", 0.1, 0.6, 12), FeatureCorrelation("prompt_tokens", nan, nan, 12)]
    assert predictors_text(none, 12).startswith("None did in this run")
    assert "prompt tokens could not be tested" in predictors_text(none, 12)
    one = [FeatureCorrelation("copyability", 0.8, 0.001, 12), FeatureCorrelation("output_tokens", -0.1, 0.7, 12)]
    text = predictors_text(one, 12)
    assert "higher copyability went with larger speedups" in text and "output tokens did not" in text
    assert "not evidence that the feature causes" in text
    assert predictors_text(one, 3).startswith("Too few cases")


# ------------------------------------------------------------------------------------- a synthetic grouped run

# group -> (cases, true speedup of ngram over baseline, blocks the group's cases run in)
SYNTHETIC_GROUPS = {"fast": (6, 2.0, range(4)), "slow": (6, 0.7, range(4)), "rare": (1, 1.0, range(3))}
K = 4  # num_speculative_tokens of the synthetic profile (vLLM's default in this harness)


@dataclass(frozen=True, slots=True)
class SyntheticCase:
    """A SYNTHETIC case and the answer every arm gives to it."""

    id: str
    group: str
    prompt: str
    output: str
    prompt_tokens: int
    tokens: int


def _synthetic_cases() -> list[SyntheticCase]:
    """SYNTHETIC cases: "fast" outputs copy their prompt, the others share no word with it; token counts are spread
    the same way in every group."""
    cases = []
    for group, (n, _, _) in SYNTHETIC_GROUPS.items():
        for i in range(n):
            words = [f"{group}{i}w{j}" for j in range(20 + 3 * i)]
            output = words if group == "fast" else [f"new{i}x{j}" for j in range(20 + 3 * i)]
            cases.append(
                SyntheticCase(
                    f"{group}{i}",
                    group,
                    "Repeat exactly: " + " ".join(words),
                    " ".join(output),
                    prompt_tokens=40 + 7 * ((i * 5) % 6),
                    tokens=30 + 4 * ((i * 7) % 6),
                )
            )
    return cases


def write_synthetic_grouped_run(out_dir: Path, seed: int = 3) -> Path:
    """A SYNTHETIC run folder (baseline vs ngram, one workload at 1 client, 4 blocks) whose groups have known true
    speedups; per-request draft counts give "fast" 75% acceptance and every other group 10%."""
    rng = random.Random(seed)
    cases = _synthetic_cases()
    profile = override(
        get_profile("standard"),
        workloads=("copy",),
        clients=(1,),
        requests_per_cell=len(cases),
        warmups_per_cell=0,
        equivalence_margin=0.10,
        band_source="synthetic",
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    orders = block_orders(profile.arms, profile.blocks, profile.order_seed)
    saved = [{"id": c.id, "max_tokens": 256, "group": c.group, "prompt": c.prompt} for c in cases]
    manifest = Manifest(
        config=RunConfig(profile=profile, out_dir=out_dir).to_dict(),
        status="complete",
        synthetic=True,
        model={"name": "synthetic"},
        workloads={"copy": {"source": "synthetic", "cases": saved}},
    )
    write_manifest(out_dir, manifest)
    with Journal(out_dir / "journal.jsonl", fsync=False) as journal:
        for block in range(profile.blocks):
            sent = [c for c in cases if block in SYNTHETIC_GROUPS[c.group][2]]
            base = {c.id: c.tokens * 0.03 * rng.uniform(0.95, 1.05) for c in sent}  # the baseline's time per case
            for order_index, arm in enumerate(orders[block]):
                cell = cell_id(cell_key(block, "copy", load_label(1), arm), 0)
                spec = arm == "ngram"
                for seq, c in enumerate(sent):
                    e2e = base[c.id] / (SYNTHETIC_GROUPS[c.group][1] if spec else 1.0) * rng.uniform(0.97, 1.03)
                    journal.write(
                        RequestRecord(
                            arm=arm,
                            block=block,
                            workload="copy",
                            group=c.group,
                            case_id=c.id,
                            clients=1,
                            warmup=False,
                            cell=cell,
                            seq=seq,
                            started_unix_s=0.0,
                            send_s=0.0,
                            chunk_arrival_s=[0.05, e2e],
                            chunk_tokens=[1, c.tokens - 1],
                            ttft_s=0.05,
                            e2e_s=e2e,
                            completion_tokens=c.tokens,
                            prompt_tokens=c.prompt_tokens,
                            finish_reason="stop",
                            text=c.output,
                            saw_done=True,
                            verdict="complete",
                            correct=True,
                            check_detail="synthetic",
                            output_digest=f"case-{c.id}",
                            spec_draft_tokens=40 if spec else None,
                            spec_accepted_tokens=(30 if c.group == "fast" else 4) if spec else None,
                        )
                    )
                journal.write(
                    CellRecord(
                        arm=arm,
                        block=block,
                        workload="copy",
                        clients=1,
                        cell=cell,
                        wall_s=10.0,
                        requests=len(sent),
                        order_index=order_index,
                    )
                )
    return out_dir


Grouped = tuple[Path, list[GroupDecision], list[FeatureCorrelations]]


@pytest.fixture(scope="module")
def grouped(tmp_path_factory: pytest.TempPathFactory) -> Grouped:
    run = write_synthetic_grouped_run(tmp_path_factory.mktemp("grouped"))
    manifest = read_manifest(run)
    a = analyse(run, manifest)
    prompts = prompts_from_manifest(manifest)
    return run, group_decisions(a, prompts), feature_correlations(a, prompts)


def _by_group(decisions: list[GroupDecision]) -> dict[str, GroupDecision]:
    return {d.group: d for d in decisions}


def test_each_group_gets_its_own_verdict(grouped: Grouped) -> None:
    _, decisions, _ = grouped
    rows = _by_group(decisions)
    assert set(rows) == {POOLED, "fast", "slow", "rare"}
    assert rows[POOLED].pooled and not rows["fast"].pooled
    fast, slow = rows["fast"], rows["slow"]
    assert fast.speed.verdict == "helps" and fast.speedup.estimate == pytest.approx(2.0, rel=0.05)
    assert slow.speed.verdict == "hurts" and slow.speedup.estimate == pytest.approx(0.7, rel=0.05)
    assert fast.quality.verdict == slow.quality.verdict == "holds"
    assert fast.pair_counts.same_work == 24 and fast.blocks_with_pairs == 4 and not fast.small


def test_a_three_pair_group_claims_no_verdict(grouped: Grouped) -> None:
    rows = _by_group(grouped[1])
    rare = rows["rare"]
    assert rare.small and rare.pair_counts.same_work == 3
    assert rare.speed.verdict == "too small (3 pairs)"
    # quality counts cases: one case (3 pairs) cannot show a loss (the smallest p over 1 case is 0.5); 6 cases can
    assert rare.quality.verdict == "too small (1 case)" and "a quality verdict needs 6" in rare.quality.reason
    assert rows["fast"].quality.verdict == "holds"
    assert "no verdict claimed" in rare.speed.reason
    assert math.isfinite(rare.speedup.estimate) and math.isfinite(rare.speedup.low)  # the estimate is still shown


def test_acceptance_and_traffic_per_group(grouped: Grouped) -> None:
    rows = _by_group(grouped[1])
    fast, slow = rows["fast"], rows["slow"]
    assert fast.acceptance_rate == pytest.approx(0.75) and slow.acceptance_rate == pytest.approx(0.10)
    # 40 drafted tokens are 40 / K = 10 drafts: 1 + 30 / 10 and 1 + 4 / 10 tokens per step
    assert fast.mean_acceptance_length == pytest.approx(4.0) and slow.mean_acceptance_length == pytest.approx(1.4)
    assert fast.copyability > 0.85 and slow.copyability == 0.0 and fast.copyability_n == 24
    assert fast.input_tokens["n"] == 24 and math.isfinite(fast.input_tokens["p95"])
    assert math.isnan(rows["rare"].output_tokens["p95"])  # 3 samples: too few for a p95
    assert fast.request_speedup_p50 == pytest.approx(2.0, rel=0.05)
    assert orjson.loads(orjson.dumps([d.to_dict() for d in grouped[1]]))  # JSON-ready (NaN becomes null)


def test_copyability_predicted_the_gain(grouped: Grouped) -> None:
    (corr,) = grouped[2]
    assert corr.cases == 13
    found = {f.feature: f for f in corr.features}
    assert found["copyability"].predicts and found["copyability"].rho > 0.5
    assert "higher copyability went with larger speedups" in corr.predictors_text
    assert orjson.loads(orjson.dumps(corr.to_dict()))["features"][0]["feature"] == "copyability"


def test_markdown_and_chart(grouped: Grouped, tmp_path: Path) -> None:
    _, decisions, correlations = grouped
    md = "\n".join(groups_markdown(decisions, correlations, load_text=lambda load: f"load {load}"))
    assert "## Per-group decisions" in md and "### copy, load c1: ngram vs baseline" in md
    assert "too small (3 pairs)" in md and "| fast |" in md and "| **(all)** |" in md
    assert correlations[0].predictors_text in md
    assert groups_markdown([], []) == []
    path = groups_chart(decisions, tmp_path / "plots" / "groups.png", margin=0.10)
    assert path is not None and path.stat().st_size > 1000
    assert groups_chart([], tmp_path / "none.png") is None


def test_groups_reuse_the_pair_work_their_comparison_computed(
    grouped: Grouped, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The common prefixes are computed once per comparison (compare_arms), not again for the group estimate."""
    import specharness.analysis.comparison.speed as speed  # where compare_arms's speed estimate calls prefix_work

    run = grouped[0]
    manifest = read_manifest(run)
    a = analyse(run, manifest)
    calls: list[int] = []
    real = speed.prefix_work

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(speed, "prefix_work", counted)
    decisions = group_decisions(a, prompts_from_manifest(manifest))
    assert len(calls) == sum(not d.pooled for d in decisions) == 3  # one compare_arms per group, nothing more
    assert [d.request_speedup_p50 for d in decisions] == [d.request_speedup_p50 for d in grouped[1]]


def test_a_sampled_run_gets_group_estimates_pair_by_pair(grouped: Grouped, tmp_path: Path) -> None:
    """The same SYNTHETIC run read as sampled (temperature 0.8): time per output token, pair by pair."""
    import shutil

    run = tmp_path / "sampled"
    shutil.copytree(grouped[0], run)
    manifest = orjson.loads((run / "manifest.json").read_bytes())
    manifest["config"]["sampling"]["temperature"] = 0.8
    (run / "manifest.json").write_bytes(orjson.dumps(manifest))
    a = analyse(run, read_manifest(run))
    rows = _by_group(group_decisions(a, prompts_from_manifest(manifest)))
    assert rows["fast"].speedup.estimate == pytest.approx(2.0, rel=0.05) and rows["fast"].speed.verdict == "helps"
    assert rows["slow"].request_speedup_p50 == pytest.approx(0.7, rel=0.05) and rows["fast"].blocks_with_pairs == 4
    assert rows["fast"].pair_counts.in_estimate == 24 and rows["fast"].pair_counts.unstable == 0
