"""Importers (dataset file -> Workload) and the reference checker, on the small fixtures in tests/data/importers."""

import sys
from collections import Counter
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specharness import ConfigError, WorkloadError
from specharness.traffic.checks import parse_check
from specharness.traffic.importers import (
    KEPT_REJECTIONS,
    ImportOptions,
    ImportResult,
    detect_format,
    import_workload,
    packaged_dataset_path,
    stratified_sample,
)
from specharness.traffic.reference import ReferenceCheck, chrf, parse_reference_check, rouge_l_f
from specharness.traffic.workloads import Case, case_to_dict, load_workload

DATA = Path(__file__).parent.parent / "data" / "importers"


def imported(name: str, **options: object) -> ImportResult:
    result = import_workload(DATA / name, ImportOptions(**options))  # type: ignore[arg-type]
    assert result.read == result.imported + result.skipped_by_filter + result.not_sampled + result.rejected
    assert result.imported == len(result.workload.cases)
    return result


def by_id(result: ImportResult) -> dict[str, Case]:
    return {c.id: c for c in result.workload.cases}


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def write_lines(tmp_path: Path, name: str, records: list[object]) -> Path:
    path = tmp_path / name
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


# --- each format ---------------------------------------------------------------------------------------------------


def test_plain_prompt_jsonl_reads_prompt_or_text_with_groups_and_references() -> None:
    result = imported("prompts.jsonl", group_field="category", reference_field="answer")
    assert result.format == "prompt" and result.workload.name == "prompts"
    cases = by_id(result)
    assert list(cases) == ["p1", "p2", "p3", "p8"]
    assert cases["p2"].messages == (user("Write a haiku about a lighthouse."),) and cases["p2"].group == "creative"
    assert cases["p3"].group == "default" and result.group_defaulted == 1
    assert cases["p2"].check is None and result.unchecked == 1  # counted among imported cases only
    assert isinstance(cases["p8"].check, ReferenceCheck) and cases["p8"].check.references == ("bonjour", "bon matin")
    assert all(c.max_tokens == 256 for c in cases.values()) and result.max_tokens_defaulted == 0


def test_plain_prompts_can_be_raw_completions() -> None:
    cases = by_id(imported("prompts.jsonl", raw_prompts=True))
    assert cases["p1"].messages is None and cases["p1"].prompt.startswith("Summarise:")
    assert cases["p1"].endpoint == "/v1/completions"


def test_openai_batch_bodies_and_envelopes() -> None:
    result = imported("openai_batch.jsonl", group_field="task")
    assert result.format == "openai"
    cases = by_id(result)
    assert list(cases) == ["req-1", "openai_batch-2", "req-6"]
    assert cases["req-1"].group == "editing" and cases["req-1"].max_tokens == 64  # group from body.metadata
    assert cases["req-1"].messages[0] == {"role": "system", "content": "Be brief."}
    assert cases["openai_batch-2"].messages == (
        {"role": "system", "content": "Answer in one word."},
        user("Capital of France?"),
    )
    assert cases["openai_batch-2"].max_tokens == 8  # max_completion_tokens
    assert cases["req-6"].prompt == "Once upon a time" and cases["req-6"].messages is None
    assert result.max_tokens_defaulted == 0 and result.group_defaulted == 2


def test_sharegpt_json_array_first_turn_and_all_turns() -> None:
    first = imported("sharegpt.json", group_field="source")
    assert first.format == "sharegpt"
    cases = by_id(first)
    assert list(cases) == ["c1", "c2", "sharegpt-4"]  # a JSON array's default id is <stem>-<index>
    assert [m["role"] for m in cases["c1"].messages] == ["system", "user"]
    assert cases["c2"].messages == (user("Tell me a joke about clocks."),)  # the leading gpt greeting is dropped
    every = by_id(imported("sharegpt.json", turns="all"))
    assert [m["role"] for m in every["c1"].messages] == ["system", "user", "assistant", "user"]
    assert every["c1"].messages[-1] == user("What colour?")  # ends at the last user turn
    assert [m["role"] for m in every["c2"].messages] == ["user"]


def test_sharegpt_jsonl(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path,
        "chats.jsonl",
        [
            {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]},
            {"conversations": [{"from": "USER", "value": "bye"}]},
        ],
    )
    result = import_workload(path)
    assert result.format == "sharegpt"
    assert [c.id for c in result.workload.cases] == ["chats-1", "chats-2"]
    assert result.workload.cases[1].messages == (user("bye"),)


def test_csv_prompt_column_quoted_multiline_rows_and_max_tokens_field() -> None:
    result = imported("prompts.csv", group_field="category", max_tokens_field="max_tokens", reference_field="answer")
    assert result.format == "csv"
    cases = by_id(result)
    assert list(cases) == ["r1", "r2", "r4", "r5"]
    assert cases["r1"].max_tokens == 32 and cases["r1"].group == "copy"
    assert cases["r1"].check is not None and cases["r1"].check.evaluate("The clock on platform nine runs fast.").correct
    assert cases["r2"].max_tokens == 256 and result.max_tokens_defaulted == 1  # empty cell: the default, counted
    assert cases["r4"].messages == (user("Multi-line\nprompt that spans two lines"),)
    assert cases["r5"].group == "default" and result.group_defaulted == 1


def test_csv_other_prompt_column_and_missing_column(tmp_path: Path) -> None:
    path = tmp_path / "q.tsv"
    path.write_text("question\tkind\nWhat is 2+2?\tmath\n")
    result = import_workload(path, ImportOptions(prompt_column="question", group_field="kind"))
    assert result.workload.cases[0].messages == (user("What is 2+2?"),) and result.workload.cases[0].group == "math"
    with pytest.raises(WorkloadError, match=r"q\.tsv:1: no column 'prompt'; the header has 'question', 'kind'"):
        import_workload(path)


def test_specharness_jsonl_is_delegated_to_the_workload_parser() -> None:
    result = imported("native.jsonl")
    assert result.format == "specharness"
    n1, n2 = result.workload.cases
    assert (n1.id, n1.group, n1.max_tokens, n1.check.to_dict()) == (
        "n1",
        "g1",
        8,
        {"type": "contains", "values": ["hello"]},
    )
    assert (n2.id, n2.prompt, n2.group) == ("n2", "Once upon", "default")
    assert result.rejections == (f"{DATA / 'native.jsonl'}:3: field 'max_tokens' must be an integer from 1 to 32768",)
    with pytest.raises(ConfigError, match="group_field does not apply to a specharness workload"):
        import_workload(DATA / "native.jsonl", ImportOptions(group_field="category"))


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("prompts.jsonl", {"group_field": "category"}),
        ("openai_batch.jsonl", {"group_field": "task"}),
        ("sharegpt.json", {"turns": "all"}),
        ("prompts.csv", {"max_tokens_field": "max_tokens"}),
        ("native.jsonl", {}),
    ],
)
def test_imported_cases_round_trip_through_a_specharness_file(name: str, options: dict, tmp_path: Path) -> None:
    # What the run manifest records (case_to_dict) reads back as the same cases.
    cases = imported(name, **options).workload.cases
    out = write_lines(tmp_path, "again.jsonl", [case_to_dict(c) for c in cases])
    assert load_workload(str(out)).cases == cases


def test_format_detection_and_forcing(tmp_path: Path) -> None:
    assert detect_format(DATA / "prompts.csv") == "csv"
    assert detect_format(DATA / "sharegpt.json") == "sharegpt"
    assert detect_format(DATA / "native.jsonl") == "specharness"
    body = write_lines(tmp_path, "bodies.jsonl", [{"messages": [user("x")], "max_tokens": 3}])  # no id: not native
    assert detect_format(body) == "openai"
    odd = write_lines(tmp_path, "odd.jsonl", [{"question": "Why?", "category": "q"}])
    with pytest.raises(
        WorkloadError, match=r"cannot tell the format from the first record's keys \(category, question\)"
    ):
        import_workload(odd)
    forced = import_workload(odd, ImportOptions(format="prompt", prompt_column="question"))
    assert forced.workload.cases[0].messages == (user("Why?"),)


# --- rejections, duplicates, nothing imported ----------------------------------------------------------------------


def test_malformed_records_name_file_line_and_field_and_are_counted() -> None:
    result = imported("prompts.jsonl", group_field="category")
    where = str(DATA / "prompts.jsonl")
    assert result.read == 8 and result.rejected == 4  # the blank line is not a record
    assert result.rejections == (
        f"{where}:5: field 'prompt' must be a non-empty string, not 42",
        f"{where}:6: field 'category' must be a string, not ['list']",
        f"{where}:7: not valid JSON (unexpected character, expected a string key: line 1 column 2 (char 1))",
        f"{where}:8: duplicate id 'p1' (first at {where}:1); ids must be unique",
    )
    sharegpt = imported("sharegpt.json")
    assert [r.split(": ", 1)[0] for r in sharegpt.rejections] == [
        f"{DATA / 'sharegpt.json'}[2]",
        f"{DATA / 'sharegpt.json'}[3]",
    ]
    assert "field 'conversations' must be a list of {from, value} objects" in sharegpt.rejections[0]
    assert "field 'conversations[0].from' is 'narrator'" in sharegpt.rejections[1]
    openai = imported("openai_batch.jsonl")
    assert [r.split(": ", 2)[1] for r in openai.rejections] == [
        "field 'messages[0].content' has a part of type 'image_url'; only text parts can be imported",
        "field 'messages[1].role' is 'tool'; only system, developer, user and assistant turns can be replayed",
        "field 'max_tokens' must be an integer from 1 to 32768, not 99999",
    ]
    assert all("\n" not in r for r in result.rejections + sharegpt.rejections + openai.rejections)


def test_csv_rejections_give_the_line_a_row_starts_on(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text('prompt,max_tokens\n"two\nlines",4\nfine,x\nshort\n')
    result = import_workload(path, ImportOptions(max_tokens_field="max_tokens"))
    assert result.rejections == (
        f"{path}:4: field 'max_tokens' must be an integer from 1 to 32768, not 'x'",
        f"{path}:5: malformed row (row has 1 fields, the header has 2)",
    )


def test_only_the_first_rejections_are_kept_but_all_are_counted(tmp_path: Path) -> None:
    path = write_lines(tmp_path, "many.jsonl", [{"prompt": ""}] * 25 + [{"prompt": "ok"}])
    result = import_workload(path)
    assert result.rejected == 25 and len(result.rejections) == KEPT_REJECTIONS and result.imported == 1
    assert result.rejections[-1].startswith(f"{path}:20: field 'prompt'")


def test_duplicate_ids_are_rejected_with_both_places(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path,
        "dups.jsonl",
        [{"question_id": 7, "prompt": "a"}, {"question_id": 8, "prompt": "b"}, {"question_id": 7, "prompt": "c"}],
    )
    result = import_workload(path)
    assert [c.id for c in result.workload.cases] == ["7", "8"]
    assert result.rejections == (f"{path}:3: duplicate id '7' (first at {path}:1); ids must be unique",)


def test_nothing_imported_raises_one_line_naming_the_file_and_first_problem(tmp_path: Path) -> None:
    bad = write_lines(tmp_path, "bad.jsonl", [{"prompt": 1}, {"prompt": 2}])
    with pytest.raises(WorkloadError) as info:
        import_workload(bad, ImportOptions(format="prompt"))
    message = str(info.value)
    assert "\n" not in message
    assert message == (
        f"{bad}: nothing imported: 2 of 2 records rejected, the first: "
        f"{bad}:1: field 'prompt' must be a non-empty string, not 1"
    )
    with pytest.raises(WorkloadError) as info:
        import_workload(DATA / "sharegpt.json", ImportOptions(min_prompt_chars=10_000))
    assert str(info.value).startswith(
        f"{DATA / 'sharegpt.json'}: nothing imported: 3 of 5 records outside the "
        "prompt-length filter (min_prompt_chars=10000, max_prompt_chars=None; "
        f"characters); 2 of 5 records rejected, the first: {DATA / 'sharegpt.json'}[2]: "
    )
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(WorkloadError, match=r"empty\.jsonl: nothing imported: the file has no records"):
        import_workload(empty, ImportOptions(format="prompt"))
    with pytest.raises(WorkloadError, match="not found"):
        import_workload(tmp_path / "missing.jsonl")


def test_broken_json_array_and_non_utf8(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('[{"prompt": "a"},')
    with pytest.raises(WorkloadError, match=r"broken\.json: starts with '\[' but is not one valid JSON array"):
        import_workload(broken)
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"prompt": "caf\xe9"}\n')
    with pytest.raises(WorkloadError, match=r"latin\.jsonl: not UTF-8 text near line 1"):
        import_workload(latin, ImportOptions(format="prompt"))


# --- filters and sampling ------------------------------------------------------------------------------------------


def test_prompt_length_filters_count_characters_and_skipped_records() -> None:
    # sharegpt.json first turns: c1 = system (28) + user (79) characters, c2 = 28, the last = 56.
    result = imported("sharegpt.json", min_prompt_chars=30, max_prompt_chars=100)
    assert [c.id for c in result.workload.cases] == ["sharegpt-4"]
    assert result.skipped_by_filter == 2 and result.rejected == 2
    assert imported("sharegpt.json", min_prompt_chars=107, max_prompt_chars=107).workload.cases[0].id == "c1"


def cases_of(sizes: dict[str, int]) -> list[Case]:
    return [Case(id=f"{g}{i}", max_tokens=4, group=g, prompt="x") for g, n in sizes.items() for i in range(n)]


def test_stratified_sample_keeps_every_group_and_is_deterministic() -> None:
    cases = cases_of({"big": 100, "mid": 30, "small": 3, "one": 1})
    picked = stratified_sample(cases, 20, seed=1)
    counts = Counter(c.group for c in picked)
    assert counts == {"big": 14, "mid": 4, "small": 1, "one": 1}  # proportional, at least one each
    assert picked == stratified_sample(cases, 20, seed=1)
    assert picked != stratified_sample(cases, 20, seed=2)
    assert [c.id for c in picked] == sorted((c.id for c in picked), key=[c.id for c in cases].index)  # file order
    assert Counter(c.group for c in stratified_sample(cases, 2, seed=1)) == {"big": 1, "mid": 1}  # fewer than groups
    assert stratified_sample(cases, 1000, seed=1) == cases


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 30), min_size=1, max_size=8), st.integers(1, 120), st.integers(0, 3))
def test_stratified_sample_properties(sizes: list[int], n: int, seed: int) -> None:
    cases = cases_of({f"g{i}": s for i, s in enumerate(sizes)})
    picked = stratified_sample(cases, n, seed)
    assert len(picked) == min(n, len(cases)) and len({c.id for c in picked}) == len(picked)
    if n >= len(sizes):
        assert {c.group for c in picked} == {c.group for c in cases}
    counts = Counter(c.group for c in picked)
    for i, size in enumerate(sizes):  # never more than one away from the proportional share, floors of one aside
        share = min(n, len(cases)) * size / len(cases)
        assert counts[f"g{i}"] <= size and (counts[f"g{i}"] <= 1 or abs(counts[f"g{i}"] - share) < 2)
    assert picked == stratified_sample(cases, n, seed)


def test_sample_option_counts_the_cases_left_out() -> None:
    result = imported("prompts.jsonl", group_field="category", sample=3, seed=5)
    assert result.imported == 3 and result.not_sampled == 1
    assert len({c.group for c in result.workload.cases}) == 3
    assert result.workload.cases == imported("prompts.jsonl", group_field="category", sample=3, seed=5).workload.cases


# --- MT-Bench question files ----------------------------------------------------------------------------------------


def test_mtbench_question_file_imports_as_it_is() -> None:
    result = imported("mtbench_question.jsonl", reference_mode="rouge-l", reference_threshold=0.3)
    assert result.format == "mtbench" and result.read == 5 and result.imported == 4 and result.rejected == 1
    assert "mtbench_question.jsonl:5: field 'turns' must be a non-empty list" in result.rejections[0]
    cases = {c.id: c for c in result.workload.cases}
    assert [c.group for c in result.workload.cases] == ["writing", "math", "coding", "reasoning"]
    assert cases["81"].messages == (user(cases["81"].messages[0]["content"]),) and cases["81"].turns is None
    assert cases["81"].check is None and result.unchecked == 1  # writing has no reference
    math_check = cases["111"].check
    assert isinstance(math_check, ReferenceCheck) and math_check.references == ("Area is 3",)  # the first turn's
    assert math_check.mode == "rouge-l" and math_check.evaluate("The area is 3.").correct
    assert cases["130"].check is not None and cases["130"].check.references == ("Thomas may work at a hospital.",)


def test_mtbench_replay_sends_every_turn_and_checks_the_last_turns_reference() -> None:
    result = imported("mtbench_question.jsonl", turns="replay", reference_mode="rouge-l", reference_threshold=0.3)
    cases = {c.id: c for c in result.workload.cases}
    assert cases["81"].turns == ("Rewrite your previous response. Start every sentence with the letter A.",)
    assert cases["111"].check is not None and cases["111"].check.references == ("5pi",)
    assert cases["125"].turns is None and cases["125"].check is not None  # one turn, one reference
    assert cases["130"].check is None  # two turns sent, a reference for the first only: unchecked
    assert result.unchecked == 2


def test_mtbench_round_trips_through_a_workload_file(tmp_path: Path) -> None:
    result = imported("mtbench_translation.jsonl", reference_mode="chrf", reference_threshold=0.6)
    out = tmp_path / "mt.jsonl"
    out.write_bytes(b"".join(orjson.dumps(case_to_dict(c)) + b"\n" for c in result.workload.cases))
    assert load_workload(str(out)).cases == result.workload.cases
    check = result.workload.cases[1].check  # a string reference, not a list, is taken as it is
    assert check is not None and check.references == ("Bonjour, mon ami.",)
    assert check.evaluate("Bonjour, mon ami !").correct and not check.evaluate("Good morning, my friend.").correct


def test_mtbench_turns_all_is_refused() -> None:
    with pytest.raises(ConfigError, match="MT-Bench question file has none"):
        import_workload(DATA / "mtbench_question.jsonl", ImportOptions(turns="all"))


# --- options -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"format": "xml"}, "format 'xml' is unknown"),
        ({"turns": "last"}, "turns 'last' is unknown"),
        ({"max_tokens": 0}, "max_tokens must be an integer from 1"),
        ({"sample": 0}, "sample must be a positive integer"),
        ({"min_prompt_chars": -1}, "characters, not tokens"),
        ({"min_prompt_chars": 9, "max_prompt_chars": 3}, "no prompt could pass"),
        ({"reference_mode": "bleu"}, "reference_mode 'bleu' is unknown"),
        ({"reference_field": "a", "reference_mode": "rouge-l"}, "needs reference_threshold"),
        ({"reference_threshold": 0.5, "reference_mode": "exact"}, "applies to reference_mode rouge-l or chrf only"),
        ({"reference_field": "a", "reference_mode": "chrf"}, "reference_mode chrf needs reference_threshold"),
        ({"group_field": ""}, "group_field must be a non-empty string"),
    ],
)
def test_bad_options_raise_config_error(options: dict, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        ImportOptions(**options)


# --- the reference checker -----------------------------------------------------------------------------------------


def ref(text: str | list[str], mode: str, **extra: object) -> ReferenceCheck:
    key = "references" if isinstance(text, list) else "reference"
    return parse_reference_check({"type": "reference", key: text, "mode": mode, **extra}, "t")


def test_reference_exact_strips_only_the_ends() -> None:
    check = ref("Paris", "exact")
    assert check.evaluate("  Paris\n").correct
    assert not check.evaluate("paris").correct and not check.evaluate("Paris.").correct


def test_reference_normalised_contains_ignores_case_punctuation_and_spacing_on_word_boundaries() -> None:
    check = ref("The clock runs four minutes fast", "normalised-contains")
    assert check.evaluate("Answer: the CLOCK  runs four-minutes, fast!").correct
    assert not check.evaluate("The clock runs five minutes fast").correct
    assert not ref("cat", "normalised-contains").evaluate("concatenate").correct
    assert ref(["bonjour", "salut"], "normalised-contains").evaluate("Salut !").correct


def test_reference_rouge_l_threshold() -> None:
    assert rouge_l_f("The cat sat on the mat.", "the cat was on the mat") == pytest.approx(5 / 6)
    assert rouge_l_f("", "anything") == 0.0
    check = ref("the cat was on the mat", "rouge-l", threshold=0.8)
    result = check.evaluate("The cat sat on the mat.")
    assert result.correct and result.detail == "ROUGE-L F 0.833 >= 0.8"
    assert not ref("the cat was on the mat", "rouge-l", threshold=0.9).evaluate("The cat sat on the mat.").correct


def test_reference_rouge_l_keeps_every_script_and_takes_the_best_reference() -> None:
    # rouge-score's own tokenizer keeps only a-z and 0-9, which would score these 0; the normalised tokens keep them
    assert rouge_l_f("Die Größe über alles", "die größe über") == pytest.approx(2 * 1 * 0.75 / 1.75)
    assert ref(["nothing alike", "the cat sat"], "rouge-l", threshold=0.9).evaluate("The cat sat.").correct


def test_reference_chrf_scores_translations_against_a_threshold() -> None:
    assert chrf("Der Hund bellt laut.", ["Der Hund bellt laut."]) == pytest.approx(1.0)
    close = chrf("Der Hund bellt sehr laut!", ["Der Hund bellt laut."])
    far = chrf("Le chien aboie.", ["Der Hund bellt laut."])
    assert 0.5 < close < 1.0 and far < 0.2
    check = ref("Der Hund bellt laut.", "chrf", threshold=0.6)
    result = check.evaluate("Der Hund bellt sehr laut!")
    assert result.correct and result.detail == f"chrF {close:.3f} >= 0.6"
    assert not check.evaluate("Le chien aboie.").correct
    both = chrf("Bonjour mon ami", ["Hello my friend", "Bonjour, mon ami."])  # several references: the best one counts
    assert both == pytest.approx(chrf("Bonjour mon ami", ["Bonjour, mon ami."]))
    assert both > 5 * chrf("Bonjour mon ami", ["Hello my friend"])


def test_reference_scoring_reaches_no_network() -> None:
    """rouge-score imports nltk; neither it nor sacrebleu may fetch anything when a check is scored (fresh process,
    every socket connection and name lookup refused)."""
    code = (
        "import socket\n"
        "def refuse(*a, **k):\n    raise OSError('network use')\n"
        "socket.socket.connect = refuse; socket.create_connection = refuse; socket.getaddrinfo = refuse\n"
        "from specharness.traffic.reference import parse_reference_check\n"
        "for mode in ('rouge-l', 'chrf'):\n"
        "    c = parse_reference_check({'type': 'reference', 'reference': 'the cat sat', 'mode': mode, "
        "'threshold': 0.5}, 't')\n"
        "    assert c.evaluate('The cat sat on the mat.').correct, mode\n"
        "print('ok')\n"
    )
    import os
    import subprocess

    env = {**os.environ, "NLTK_DATA": "/nonexistent", "PYTHONPATH": str(Path(__file__).parents[2])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_reference_check_to_dict_round_trips() -> None:
    for check in (
        ref("a", "exact"),
        ref(["a b", "c"], "normalised-contains"),
        ref("x y", "rouge-l", threshold=0.4),
        ref(["x y", "z"], "chrf", threshold=0.5),
    ):
        assert parse_reference_check(check.to_dict(), "t") == check


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({}, "exactly one of check.reference or check.references"),
        ({"reference": "a", "references": ["a"]}, "exactly one of"),
        ({"references": []}, "non-empty list of non-blank strings"),
        ({"reference": "a", "mode": "fuzzy"}, "check.mode 'fuzzy' is unknown"),
        ({"reference": "a", "mode": "rouge-l"}, "check.threshold must be a number in (0, 1]"),
        ({"reference": "a", "mode": "rouge-l", "threshold": 1.5}, "check.threshold must be a number in (0, 1]"),
        ({"reference": "a", "threshold": 0.5}, "applies to modes rouge-l and chrf only"),
        ({"reference": "a", "mode": "chrf"}, "check.threshold must be a number in (0, 1] for a chrf check"),
        ({"reference": "?!", "mode": "normalised-contains"}, "has no letter or digit"),
    ],
)
def test_bad_reference_checks_name_the_field(raw: dict, fragment: str) -> None:
    with pytest.raises(WorkloadError, match=r"^f\.jsonl:3: ") as info:
        parse_reference_check({"type": "reference", **raw}, "f.jsonl:3")
    assert fragment in str(info.value)


def test_reference_is_a_registered_check_type() -> None:
    check = parse_check({"type": "reference", "reference": "Paris", "mode": "exact"}, "t")
    assert isinstance(check, ReferenceCheck) and check.evaluate("Paris").correct


# --- the packaged public dataset -----------------------------------------------------------------------------------


def test_packaged_dataset_path_finds_the_installed_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = tmp_path / "inspect_evals-0.26.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: inspect-evals\nVersion: 0.26.0\n")
    data = tmp_path / "inspect_evals" / "writingbench" / "benchmark_all.jsonl"
    data.parent.mkdir(parents=True)
    data.write_text('{"index": 1, "domain1": "Education", "domain2": "Lesson Plan", "query": "Plan a lesson."}\n')
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert packaged_dataset_path() == data
    from specharness.traffic.importers import PACKAGED_DATASETS

    result = import_workload(data, PACKAGED_DATASETS["writingbench"].options)
    assert result.workload.cases[0] == Case(
        id="1", max_tokens=512, group="Education", messages=(user("Plan a lesson."),)
    )


def test_packaged_dataset_path_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    with pytest.raises(
        WorkloadError,
        match=r"inspect-evals, which is not installed; run: pip install --no-deps inspect-evals==0\.26\.0",
    ):
        packaged_dataset_path()
    with pytest.raises(WorkloadError, match="unknown packaged dataset 'nope'"):
        packaged_dataset_path("nope")


def test_a_line_separator_inside_a_prompt_survives_the_workload_file(tmp_path: Path) -> None:
    path = write_lines(tmp_path, "seps.jsonl", [{"prompt": "one\u2028two"}])  # orjson writes U+2028 raw, as JSON allows
    cases = import_workload(path).workload.cases
    assert cases[0].messages == (user("one\u2028two"),)
    out = write_lines(tmp_path, "again.jsonl", [case_to_dict(c) for c in cases])
    assert load_workload(str(out)).cases == cases


# --- defaults decided before a run: reference modes by category, empty references, unclosed quotes, scorers ---------


def test_mtbench_categories_choose_the_reference_mode_unless_one_is_given(tmp_path: Path) -> None:
    """Translation is judged by chrF, summarization by ROUGE-L (at DEFAULT_THRESHOLDS or the given threshold), a
    GSM8K ``#### N`` reference by its final number, anything else by normalised-contains; --reference-mode sets one
    for all. Fails if every category gets one mode (translations and summaries could then never match)."""
    path = write_lines(
        tmp_path,
        "mixed.jsonl",
        [
            {"question_id": 1, "category": "translation", "turns": ["Say hello in French."], "reference": ["Bonjour"]},
            {"question_id": 2, "category": "summarization", "turns": ["Summarise: a b c"], "reference": ["a b c"]},
            {"question_id": 3, "category": "math", "turns": ["2+2?"], "reference": ["2 plus 2 makes 4. #### 4"]},
            {"question_id": 4, "category": "reasoning", "turns": ["Why?"], "reference": ["Because"]},
            {"question_id": 5, "category": "writing", "turns": ["Write."], "reference": [""]},
        ],
    )
    result = import_workload(path, ImportOptions(format="mtbench"))
    checks = {c.id: c.check for c in result.workload.cases}
    modes = {k: (v.mode, v.threshold) for k, v in checks.items() if isinstance(v, ReferenceCheck)}
    assert modes == {
        "1": ("chrf", 0.5),
        "2": ("rouge-l", 0.3),
        "3": ("final-number", 0.0),
        "4": ("normalised-contains", 0.0),
    }
    assert checks["5"] is None and result.unchecked == 1  # an empty reference: unchecked and counted, not rejected
    assert result.rejected == 0 and "references judged by chrf (1), rouge-l (1)" in result.summary()
    given = import_workload(path, ImportOptions(format="mtbench", reference_mode="exact"))
    assert {c.check.mode for c in given.workload.cases if isinstance(c.check, ReferenceCheck)} == {"exact"}
    tuned = import_workload(path, ImportOptions(format="mtbench", reference_threshold=0.7))
    assert {
        c.check.threshold
        for c in tuned.workload.cases
        if isinstance(c.check, ReferenceCheck) and c.check.mode in ("chrf", "rouge-l")
    } == {0.7}


def test_reference_final_number_reads_gsm8k_marks_and_last_numbers() -> None:
    check = ref("Natalia sold 48/2 = 24 clips in May. #### 72", "final-number")
    assert check.evaluate("She sold 48 + 24 = 72 clips.").correct
    assert check.evaluate("#### 72.0").correct and check.evaluate("The answer is $72").correct
    assert not check.evaluate("72 clips, no: 73").correct and not check.evaluate("no number").correct
    assert ref("The total is 1,250.", "final-number").evaluate("1250").correct
    with pytest.raises(WorkloadError, match="has no number"):
        ref("no digits here", "final-number")


def test_empty_reference_field_leaves_the_record_unchecked(tmp_path: Path) -> None:
    path = write_lines(tmp_path, "p.jsonl", [{"prompt": "a", "answer": ""}, {"prompt": "b", "answer": "b"}])
    result = import_workload(path, ImportOptions(reference_field="answer"))
    assert result.imported == 2 and result.rejected == 0 and result.unchecked == 1
    assert "without a reference or with an empty one (unchecked)" in result.summary()


def test_csv_quote_that_never_closes_names_the_line(tmp_path: Path) -> None:
    """An unclosed quote made every later row part of one prompt, silently; now one line names where it opened."""
    path = tmp_path / "bad.csv"
    path.write_text('id,prompt\n1,fine\n2,"opens here\n3,swallowed\n4,too\n')
    with pytest.raises(WorkloadError, match=r"bad\.csv:3: a quoted field opened on this line never closes"):
        import_workload(path, ImportOptions())


def test_a_missing_scorer_package_stops_the_parse_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ROUGE-L check on a machine without rouge-score fails when the workload is read (before any engine
    starts), naming the file:line and the package; chrF the same for sacrebleu."""
    from specharness.traffic import reference

    for mode, module, package in (("rouge-l", "rouge_score", "rouge-score"), ("chrf", "sacrebleu", "sacrebleu")):
        reference._rouge_scorer.cache_clear()
        reference._chrf_metric.cache_clear()
        monkeypatch.setitem(sys.modules, module, None)  # importing it now raises ImportError
        monkeypatch.delitem(sys.modules, f"{module}.metrics", raising=False)
        with pytest.raises(WorkloadError, match=rf"w\.jsonl:4: check\.mode {mode} needs the {package} package"):
            parse_reference_check({"type": "reference", "reference": "x", "mode": mode, "threshold": 0.5}, "w.jsonl:4")
        monkeypatch.undo()
    reference._rouge_scorer.cache_clear()
    reference._chrf_metric.cache_clear()


def test_a_quote_inside_a_field_still_imports(tmp_path: Path) -> None:
    """Only a quote that never closes is refused: a TSV prompt that starts with a quoted phrase imports as before."""
    path = tmp_path / "q.tsv"
    path.write_text('id\tprompt\n1\t"To be" - who said it?\n2\tplain\n')
    result = import_workload(path, ImportOptions())
    assert result.imported == 2 and result.rejected == 0


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("pages 10-12", 12.0),  # a range: its last number, not -12
        ("COVID-19 cases", None),  # a name, not a number
        ("the roots are 2,3", 3.0),
        ("total 1,000,000 units", 1_000_000.0),
        ("x = -3.5", -3.5),
        ("the answer is .5", 0.5),
        ("1.5e3", 1500.0),
        ("#### -7", -7.0),
    ],
)
def test_final_number_edge_cases(text: str, number: float | None) -> None:
    from specharness.traffic.reference import final_number

    assert final_number(text) == number


def test_a_check_type_that_is_not_a_string_is_one_line() -> None:
    with pytest.raises(WorkloadError, match=r"w:3: check.type \['contains'\] is unknown"):
        parse_check({"type": ["contains"]}, "w:3")


def test_mtbench_mode_follows_the_category_whatever_the_groups(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path,
        "m.jsonl",
        [{"question_id": 1, "category": "translation", "level": "hard", "turns": ["Hi?"], "reference": ["Salut"]}],
    )
    result = import_workload(path, ImportOptions(format="mtbench", group_field="level"))
    check = result.workload.cases[0].check
    assert isinstance(check, ReferenceCheck) and check.mode == "chrf" and result.workload.cases[0].group == "hard"
