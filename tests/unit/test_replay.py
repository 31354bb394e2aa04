"""Replayed multi-turn conversations: the ``turns`` field, the importer's ``turns="replay"``, the turn-by-turn
sender (with a stand-in send, no HTTP), the driver's use of it, and the pairing rule for diverging histories."""

from __future__ import annotations

import asyncio
import hashlib
import math
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from specharness import WorkloadError
from specharness.analysis.comparison import PairCounts
from specharness.analysis.comparison.classify import classify as classify_pairs
from specharness.analysis.pairing import pair_requests
from specharness.experiment import sending
from specharness.experiment.config import RunConfig
from specharness.experiment.context import RunContext
from specharness.experiment.design import get_profile, override
from specharness.experiment.engineset import EngineSet
from specharness.experiment.journal import Journal, read_journal
from specharness.experiment.plan import CellPlan, Load
from specharness.records import RequestRecord, completeness
from specharness.traffic.checks import parse_check
from specharness.traffic.client import RequestMeta
from specharness.traffic.importers import ImportOptions, detect_format, import_workload
from specharness.traffic.replay import SKIPPED_AFTER_FAILURE, replay_conversation, skipped_record
from specharness.traffic.workloads import (
    Case,
    Workload,
    case_to_dict,
    load_workload,
    parse_case,
    split_turn_id,
    turn_case_id,
)

DATA = Path(__file__).parent.parent / "data" / "importers"


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def write_lines(tmp_path: Path, name: str, records: list[Any]) -> Path:
    path = tmp_path / name
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


REPLAY = {
    "id": "chat",
    "messages": [{"role": "system", "content": "Be brief."}, user("Name a colour.")],
    "turns": ["Another one?", "And a third?"],
    "max_tokens": 16,
}


# --- the turns field -----------------------------------------------------------------------------------------------


def test_a_replay_case_parses_and_round_trips() -> None:
    case = parse_case(REPLAY, "mine.jsonl:1")
    assert case.turns == ("Another one?", "And a third?") and case.turn_count == 3
    assert case.messages[-1] == user("Name a colour.")
    assert parse_case(case_to_dict(case), "again") == case
    plain = parse_case({"id": "x", "messages": [user("hi")], "max_tokens": 4}, "w")
    assert plain.turns is None and plain.turn_count == 1 and "turns" not in case_to_dict(plain)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"messages": None, "prompt": "Once"},
            "field 'turns' needs a chat case ('messages'); a raw 'prompt' case cannot be replayed turn by turn",
        ),
        ({"turns": []}, "field 'turns' must be a non-empty list of non-blank strings"),
        ({"turns": "Another one?"}, "field 'turns' must be a non-empty list of non-blank strings"),
        ({"turns": ["ok", "  "]}, "field 'turns' must be a non-empty list of non-blank strings"),
        ({"turns": ["ok", 3]}, "field 'turns' must be a non-empty list of non-blank strings"),
        (
            {"messages": [user("hi"), {"role": "assistant", "content": "hello"}]},
            "field 'turns' needs 'messages' to end with a user message (turn 1), not 'assistant'",
        ),
        (
            {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]},
            "field 'turns' cannot go with 'tools' or 'tool_choice'",
        ),
        ({"id": "chat#t2"}, "field 'id' 'chat#t2' ends in '#t<number>'"),
    ],
)
def test_bad_turns_give_one_line_naming_file_line_and_field(
    change: dict[str, Any], message: str, tmp_path: Path
) -> None:
    obj = {k: v for k, v in {**REPLAY, **change}.items() if v is not None}
    path = write_lines(tmp_path, "mine.jsonl", [{"id": "ok", "messages": [user("hi")], "max_tokens": 4}, obj])
    with pytest.raises(WorkloadError) as info:
        load_workload(str(path))
    assert str(info.value).startswith(f"{path}:2: ") and message in str(info.value)
    assert "\n" not in str(info.value)


def test_turn_ids_have_one_format() -> None:
    assert turn_case_id("chat", 3) == "chat#t3"
    assert split_turn_id("chat#t3") == ("chat", 3)
    assert split_turn_id("a#t1#t12") == ("a#t1", 12)
    for plain in ("chat", "chat#t", "chat#t0", "chat#t01", "#t2", "chat#tx"):
        assert split_turn_id(plain) is None, plain
    with pytest.raises(ValueError):
        turn_case_id("chat", 0)


# --- the importer ----------------------------------------------------------------------------------------------------


def test_sharegpt_replay_keeps_every_user_turn_and_drops_the_dataset_answers() -> None:
    result = import_workload(DATA / "sharegpt.json", ImportOptions(turns="replay"))
    cases = {c.id: c for c in result.workload.cases}
    assert cases["c1"].messages == (
        {"role": "system", "content": "You answer from the passage."},
        user("Passage: The bridge is painted green every five years. How often is it painted?"),
    )
    assert cases["c1"].turns == ("What colour?",)
    assert cases["c2"].turns is None and cases["c2"].messages == (
        user("Tell me a joke about clocks."),
    )  # one user turn
    assert result.read == result.imported + result.rejected


def test_sharegpt_replay_skips_blank_user_turns_and_rejects_a_late_system_turn(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path,
        "chats.jsonl",
        [
            {
                "id": "a",
                "conversations": [
                    {"from": "human", "value": "one"},
                    {"from": "gpt", "value": "1"},
                    {"from": "human", "value": "  "},
                    {"from": "human", "value": "two"},
                ],
            },
            {
                "id": "b",
                "conversations": [
                    {"from": "human", "value": "one"},
                    {"from": "system", "value": "be rude"},
                    {"from": "human", "value": "two"},
                ],
            },
        ],
    )
    result = import_workload(path, ImportOptions(turns="replay"))
    assert [(c.id, c.turns) for c in result.workload.cases] == [("a", ("two",))]
    assert result.rejections == (
        f"{path}:2: field 'conversations[1]' is a system turn after the first user turn; "
        "turns=replay replays user turns only",
    )


def test_openai_chat_replay_splits_at_the_first_user_message(tmp_path: Path) -> None:
    body = {
        "model": "m",
        "max_tokens": 12,
        "messages": [
            {"role": "developer", "content": "Answer in one word."},
            user("Capital of France?"),
            {"role": "assistant", "content": "Paris."},
            user("And of Italy?"),
            {"role": "assistant", "content": "Rome."},
            user("And of Spain?"),
        ],
    }
    path = write_lines(
        tmp_path, "bodies.jsonl", [{"custom_id": "r1", "method": "POST", "url": "/v1/chat/completions", "body": body}]
    )
    (case,) = import_workload(path, ImportOptions(turns="replay")).workload.cases
    assert case.id == "r1" and case.max_tokens == 12
    assert case.messages == ({"role": "system", "content": "Answer in one word."}, user("Capital of France?"))
    assert case.turns == ("And of Italy?", "And of Spain?")
    (whole,) = import_workload(path).workload.cases  # the default keeps the body as one request
    assert whole.turns is None and len(whole.messages) == 6


def test_imported_replay_cases_round_trip_and_are_detected_as_native(tmp_path: Path) -> None:
    cases = import_workload(DATA / "sharegpt.json", ImportOptions(turns="replay")).workload.cases
    out = write_lines(tmp_path, "again.jsonl", [case_to_dict(c) for c in cases])
    assert detect_format(out) == "specharness"
    assert load_workload(str(out)).cases == cases
    assert import_workload(out).workload.cases == cases


def test_the_length_filter_counts_the_later_turns() -> None:
    short = len("Passage: The bridge is painted green every five years. How often is it painted?")
    system = len("You answer from the passage.")
    opts = ImportOptions(
        turns="replay", max_prompt_chars=short + system
    )  # c1's first turn fits, with turn 2 it does not
    ids = [c.id for c in import_workload(DATA / "sharegpt.json", opts).workload.cases]
    assert "c1" not in ids and "c2" in ids


def test_an_imported_id_with_a_turn_suffix_is_rejected(tmp_path: Path) -> None:
    path = write_lines(tmp_path, "p.jsonl", [{"id": "q#t1", "prompt": "Hi"}, {"id": "q2", "prompt": "Hello"}])
    result = import_workload(path)
    assert result.imported == 1 and "field 'id' 'q#t1' ends in '#t<number>'" in result.rejections[0]


# --- the turn-by-turn sender (a stand-in send, no HTTP) --------------------------------------------------------------


def answer_record(
    case: Case, arm: str, text: str, *, error_kind: str | None = None, finish: str = "stop", seq: int = 0
) -> RequestRecord:
    saw_done = error_kind is None
    return RequestRecord(
        arm=arm,
        block=0,
        workload="w",
        group=case.group,
        case_id=case.id,
        clients=1,
        warmup=False,
        cell="c",
        seq=seq,
        started_unix_s=0.0,
        send_s=0.0,
        chunk_arrival_s=[0.1],
        chunk_tokens=[3],
        ttft_s=0.1,
        e2e_s=0.5,
        completion_tokens=3,
        finish_reason=finish if saw_done else None,
        text=text if saw_done else "",
        error_kind=error_kind,
        saw_done=saw_done,
        verdict=completeness(error_kind=error_kind, saw_done=saw_done, finish_reason=finish if saw_done else None),
        output_digest=hashlib.sha256(text.encode()).hexdigest()[:32],
    )


class StandinSender:
    """A stand-in for the HTTP send: answers each turn at once with a text naming the arm and the turn, logs the
    order of starts and ends, and fails the turns it is told to."""

    def __init__(self, arm: str, fail: set[str] | None = None) -> None:
        self.arm = arm
        self.fail = fail or set()
        self.events: list[tuple[str, str]] = []
        self.sent: list[Case] = []
        self.skipped: list[tuple[Case, int]] = []

    async def send_turn(self, case: Case, turn: int) -> RequestRecord:
        self.events.append(("start", case.id))
        self.sent.append(case)
        await asyncio.sleep(0)  # let other conversations run in between
        self.events.append(("end", case.id))
        failed = case.id in self.fail
        return answer_record(case, self.arm, f"{self.arm} says {turn}", error_kind="timeout" if failed else None)

    def skip_turn(self, case: Case, turn: int) -> None:
        self.skipped.append((case, turn))


def test_each_turn_carries_this_arms_own_answers() -> None:
    case = parse_case({**REPLAY, "check": {"type": "contains", "values": ["3"]}}, "w")
    standin = StandinSender("ngram")
    records = asyncio.run(replay_conversation(case, standin.send_turn, standin.skip_turn))
    assert [r.case_id for r in records] == ["chat#t1", "chat#t2", "chat#t3"]
    first, second, third = standin.sent
    assert first.messages == case.messages
    assert second.messages == (*case.messages, {"role": "assistant", "content": "ngram says 1"}, user("Another one?"))
    assert third.messages == (*second.messages, {"role": "assistant", "content": "ngram says 2"}, user("And a third?"))
    assert all(t.turns is None for t in standin.sent)
    assert first.check is None and second.check is None and third.check == case.check  # the last turn is judged
    # one after the other: each turn starts after the previous one ended
    assert standin.events == [(e, f"chat#t{k}") for k in (1, 2, 3) for e in ("start", "end")]
    assert not standin.skipped


def test_a_case_without_turns_is_sent_once_as_it_is() -> None:
    case = parse_case({"id": "solo", "messages": [user("hi")], "max_tokens": 4}, "w")
    standin = StandinSender("baseline")
    records = asyncio.run(replay_conversation(case, standin.send_turn, standin.skip_turn))
    assert [r.case_id for r in records] == ["solo"] and standin.sent == [case]


def test_a_turn_without_an_answer_ends_the_conversation() -> None:
    case = parse_case({**REPLAY, "turns": ["two", "three", "four"]}, "w")
    standin = StandinSender("ngram", fail={"chat#t2"})
    records = asyncio.run(replay_conversation(case, standin.send_turn, standin.skip_turn))
    assert [r.case_id for r in records] == ["chat#t1", "chat#t2"]
    assert [(c.id, turn) for c, turn in standin.skipped] == [("chat#t3", 3), ("chat#t4", 4)]


def test_a_truncated_answer_is_carried_on() -> None:
    case = parse_case(REPLAY, "w")

    async def send_turn(request: Case, turn: int) -> RequestRecord:
        return answer_record(request, "a", f"cut {turn}", finish="length")

    def skip_turn(request: Case, turn: int) -> None:
        raise AssertionError("nothing is skipped after a truncated answer")

    records = asyncio.run(replay_conversation(case, send_turn, skip_turn))
    assert [r.verdict for r in records] == ["truncated"] * 3


def test_a_skipped_turn_is_a_failed_record_with_its_check_evaluated() -> None:
    case = replace(
        parse_case(REPLAY, "w"), id="chat#t3", turns=None, check=parse_check({"type": "contains", "values": ["x"]}, "w")
    )
    meta = RequestMeta(arm="ngram", block=1, workload="w", clients=2, warmup=False, cell="b1/w/c2/ngram#s0", seq=4)
    r = skipped_record(case, meta)
    assert r.error_kind == SKIPPED_AFTER_FAILURE and r.verdict == "failed" and not r.saw_done
    assert (r.case_id, r.seq, r.block, r.arm) == ("chat#t3", 4, 1, "ngram")
    assert r.correct is False and r.checked and not r.counts_correct
    assert math.isnan(r.e2e_s) and math.isnan(r.ttft_s) and math.isfinite(r.send_s) and r.output_tokens == 0
    assert RequestRecord(**{k: v for k, v in r.to_dict().items() if k not in ("kind", "schema")}) == r


# --- the driver: send_cases with a stand-in send_request and a stand-in engine ---------------------------------------


def standin_context(tmp_path: Path, cases: tuple[Case, ...], progress: list[int]) -> RunContext:
    """A run context whose one engine is a stand-in (no server): only its arm and base URL are read."""
    profile = override(
        get_profile("quick"), workloads=("w",), clients=(2,), requests_per_cell=len(cases), warmups_per_cell=0, blocks=2
    )
    config = RunConfig(profile=profile, out_dir=tmp_path)
    journal = Journal(tmp_path / "journal.jsonl", fsync=False)
    standin_engine = SimpleNamespace(arm=SimpleNamespace(client_slowdown=1.0), base_url="http://standin")
    engines = EngineSet(servers={"ngram": standin_engine})  # type: ignore[dict-item]
    workload = Workload("w", cases, "test")
    return RunContext(
        profile=profile,
        out_dir=config.out_dir,
        sampling=config.sampling,
        request_timeout_s=config.request_timeout_s,
        sequences={"w": workload.cases},
        engines=engines,
        journal=journal,
        segment=0,
        progress=progress.append,
    )


@pytest.mark.parametrize("load", [Load(2), Load(0, "inf")], ids=["closed-loop", "open-loop"])
def test_the_driver_sends_each_conversation_turn_by_turn(
    load: Load, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[tuple[str, str, int]] = []
    bodies: dict[str, list[dict[str, str]]] = {}

    async def standin_send_request(
        client: Any, base_url: str, case: Case, body: dict[str, Any], meta: RequestMeta, sink: Any, **_: Any
    ) -> RequestRecord:
        """A stand-in for the HTTP client: answers at once, fails turn 1 of conversation b."""
        events.append(("start", case.id, meta.seq))
        bodies[case.id] = body["messages"]
        await asyncio.sleep(0.001)
        events.append(("end", case.id, meta.seq))
        failed = case.id == "b#t1"
        record = replace(
            answer_record(
                case, meta.arm, f"{meta.arm}:{case.id}", error_kind="http_error" if failed else None, seq=meta.seq
            ),
            block=meta.block,
            cell=meta.cell,
            scheduled_s=meta.scheduled_s,
            send_lateness_s=meta.send_lateness_s,
        )
        sink(record)
        return record

    monkeypatch.setattr(sending, "send_request", standin_send_request)
    cases = (
        parse_case({"id": "a", "messages": [user("a1")], "turns": ["a2", "a3"], "max_tokens": 8}, "w"),
        parse_case({"id": "b", "messages": [user("b1")], "turns": ["b2"], "max_tokens": 8}, "w"),
        parse_case({"id": "c", "messages": [user("c1")], "max_tokens": 8}, "w"),
    )
    progress: list[int] = []
    ctx = standin_context(tmp_path, cases, progress)
    plan = CellPlan(block=1, workload="w", load=load, arm_order=("baseline", "ngram"))
    sent = asyncio.run(sending.send_cases(ctx, plan, "ngram", list(cases), False, None))  # type: ignore[arg-type]
    records = sent.records
    ctx.journal.close()

    by_id = {r.case_id: r for r in records}
    assert sorted(by_id) == ["a#t1", "a#t2", "a#t3", "b#t1", "b#t2", "c"]
    assert {r.seq for r in records if r.case_id.startswith("a")} == {0} and by_id["c"].seq == 2
    assert {by_id["b#t1"].seq, by_id["b#t2"].seq} == {1}
    assert by_id["b#t2"].error_kind == SKIPPED_AFTER_FAILURE and "b#t2" not in bodies  # never sent
    assert bodies["a#t3"] == [
        user("a1"),
        {"role": "assistant", "content": "ngram:a#t1"},
        user("a2"),
        {"role": "assistant", "content": "ngram:a#t2"},
        user("a3"),
    ]
    for k in (1, 2):  # within a conversation: the next turn starts after the previous one ended
        assert events.index(("end", f"a#t{k}", 0)) < events.index(("start", f"a#t{k + 1}", 0))
    assert progress == [1, 1, 1]  # one per case, as the profile counts requests
    journaled = read_journal(tmp_path / "journal.jsonl").requests
    assert sorted(r.case_id for r in journaled) == sorted(by_id)
    if load.open_loop:  # only turn 1 has a scheduled send
        assert math.isfinite(by_id["a#t1"].scheduled_s) and math.isnan(by_id["a#t2"].scheduled_s)
        assert math.isnan(by_id["a#t3"].send_lateness_s)
    assert bool(sent.delivery) == load.open_loop  # delivery figures come back for an open loop only


# --- the pairing rule for diverging histories ------------------------------------------------------------------------


def rec(
    arm: str, block: int, case_id: str, out: str, *, seq: int = 0, error_kind: str | None = None, e2e_s: float = 1.0
) -> RequestRecord:
    done = error_kind is None
    return RequestRecord(
        arm=arm,
        block=block,
        workload="w",
        group="g",
        case_id=case_id,
        clients=1,
        warmup=False,
        cell=f"b{block}/w/c1/{arm}#s0",
        seq=seq,
        started_unix_s=0.0,
        send_s=0.0,
        chunk_arrival_s=[0.1],
        chunk_tokens=[4],
        ttft_s=0.1,
        e2e_s=e2e_s if done else math.nan,
        completion_tokens=4 if done else None,
        finish_reason="stop" if done else None,
        text=out,
        error_kind=error_kind,
        saw_done=done,
        verdict=completeness(error_kind=error_kind, saw_done=done, finish_reason="stop" if done else None),
        output_digest=hashlib.sha256(out.encode()).hexdigest()[:32] if done else None,
    )


def conversation(
    arm: str, block: int, outputs: list[str], *, seq: int = 0, name: str = "c", failed_from: int | None = None
) -> list[RequestRecord]:
    out = []
    for k, text in enumerate(outputs, start=1):
        kind = None
        if failed_from is not None and k >= failed_from:
            kind = "timeout" if k == failed_from else SKIPPED_AFTER_FAILURE
        out.append(rec(arm, block, f"{name}#t{k}", text, seq=seq, error_kind=kind))
    return out


def classify(a: list[RequestRecord], b: list[RequestRecord], greedy: bool = True) -> tuple[dict[int, list], PairCounts]:
    by_block, counts = classify_pairs(pair_requests(a, b), greedy)
    assert counts.pairs == (
        counts.same_work + counts.unstable + counts.divergent + counts.failed + counts.history_diverged
    )
    return by_block, counts


def test_turns_after_a_diverged_turn_are_not_the_same_work() -> None:
    # block 0: identical throughout; block 1: B answers turn 2 differently, then turn 3 identically (different prompt)
    a = conversation("A", 0, ["x", "y", "z"]) + conversation("A", 1, ["x", "y", "z"])
    b = conversation("B", 0, ["x", "y", "z"]) + conversation("B", 1, ["x", "Y", "z"])
    by_block, counts = classify(a, b)
    assert counts == PairCounts(pairs=6, same_work=2, divergent=1, history_diverged=1, unstable=2, failed=0)
    assert {x.case_id for ps in by_block.values() for x, _ in ps} == {"c#t1"}  # t2 and t3 leave every block
    identical = counts.same_work + counts.unstable
    assert identical == 4  # the quality table's "identical outputs": turn 3 of block 1 is not among them


def test_a_divergence_at_turn_1_makes_every_later_turn_history_diverged() -> None:
    a = conversation("A", 0, ["x", "y", "z"])
    b = conversation("B", 0, ["X", "y", "z"])
    _, counts = classify(a, b)
    assert counts == PairCounts(pairs=3, divergent=1, history_diverged=2)


def test_a_failed_turn_and_its_skipped_turns_count_as_failed() -> None:
    a = conversation("A", 0, ["x", "y", "z"])
    b = conversation("B", 0, ["x", "y", "z"], failed_from=2)
    _, counts = classify(a, b)
    assert counts == PairCounts(pairs=3, same_work=1, failed=2)


def test_histories_are_per_block_and_per_position() -> None:
    # the same conversation twice in block 0 (positions 0 and 1): only position 1 diverges
    a = conversation("A", 0, ["x", "y"], seq=0) + conversation("A", 0, ["x", "y"], seq=1)
    b = conversation("B", 0, ["x", "y"], seq=0) + conversation("B", 0, ["X", "y"], seq=1)
    _, counts = classify(a, b)
    assert counts.history_diverged == 1 and counts.divergent == 1
    assert counts.same_work == 0 and counts.unstable == 2  # c#t1 and c#t2 differ somewhere: left out everywhere


def test_a_missing_earlier_turn_counts_as_a_diverged_history() -> None:
    a = conversation("A", 0, ["x", "y"])
    b = conversation("B", 0, ["x", "y"])
    _, counts = classify(a[1:], b)
    assert counts == PairCounts(pairs=1, history_diverged=1)


def test_sampled_runs_apply_the_same_history_rule() -> None:
    a = conversation("A", 0, ["x", "y", "z"])
    b = conversation("B", 0, ["x", "q", "r"])
    _, counts = classify(a, b, greedy=False)
    assert counts == PairCounts(pairs=3, same_work=2, history_diverged=1)  # turn 2 is compared (same history)


def test_ordinary_cases_are_untouched_and_old_counts_read() -> None:
    a = [rec("A", 0, "p", "x"), rec("A", 0, "q", "y", seq=1)]
    b = [rec("B", 0, "p", "x"), rec("B", 0, "q", "z", seq=1)]
    _, counts = classify(a, b)
    assert counts == PairCounts(pairs=2, same_work=1, divergent=1)
    old = {"pairs": 2, "same_work": 1, "same_work_truncated": 0, "divergent": 1, "unstable": 0, "failed": 0}
    assert PairCounts(**old).history_diverged == 0
