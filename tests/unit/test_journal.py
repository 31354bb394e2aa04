import math
from pathlib import Path

import orjson
import pytest

from specharness import JournalError
from specharness.experiment.journal import Journal, read_journal
from specharness.records import SCHEMA_VERSION, CellRecord, RequestRecord


def request(**kw: object) -> RequestRecord:
    base = dict(arm="ngram", block=0, workload="copy", group="g", case_id="c1", clients=1, warmup=False,
                cell="b0/copy/c1/ngram#s0", seq=0, started_unix_s=1.0, send_s=2.0)  # fmt: skip
    base.update(kw)
    return RequestRecord(**base)  # type: ignore[arg-type]


def test_round_trip_keeps_every_field_and_nan(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    rec = request(chunk_arrival_s=[0.1, 0.2], chunk_tokens=[1, 3], ttft_s=0.1, e2e_s=0.3, completion_tokens=4,
                  text="héllo", verdict="complete", correct=True)  # fmt: skip
    failed = request(seq=1, error_kind="timeout", error="slow")
    with Journal(path) as journal:
        journal.write(rec)
        journal.write(failed)
        journal.write(CellRecord(arm="ngram", block=0, workload="copy", clients=1, cell="x", wall_s=1.5, requests=2))
        journal.write({"kind": "segment", "schema": SCHEMA_VERSION, "segment": 0})
    contents = read_journal(path)
    assert contents.requests[0] == rec
    assert math.isnan(contents.requests[1].ttft_s) and contents.requests[1].error_kind == "timeout"
    assert contents.cells[0].wall_s == 1.5 and contents.events[0]["segment"] == 0


def test_each_write_is_on_disk_before_close(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    journal = Journal(path)
    journal.write(request())
    assert len(path.read_bytes().splitlines()) == 1  # flushed without closing
    journal.close()


def test_torn_last_line_is_reported_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with Journal(path) as journal:
        journal.write(request())
    with open(path, "ab") as handle:
        handle.write(b'{"kind": "request", "sche')
    contents = read_journal(path)
    assert len(contents.requests) == 1 and contents.torn_lines == [2]


def test_damage_in_the_middle_and_schema_mismatch_raise(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    good = orjson.dumps(request().to_dict())
    path.write_bytes(good + b"\n#garbage\n" + good + b"\n")
    with pytest.raises(JournalError, match=":2: not a JSON object"):
        read_journal(path)
    path.write_bytes(orjson.dumps({**request().to_dict(), "schema": 99}) + b"\n")
    with pytest.raises(JournalError, match="schema 99"):
        read_journal(path)
    with pytest.raises(JournalError, match="not found"):
        read_journal(tmp_path / "none.jsonl")


def test_tpot_and_useful() -> None:
    rec = request(ttft_s=0.1, e2e_s=1.1, completion_tokens=11, verdict="complete", correct=True)
    assert rec.tpot_s == pytest.approx(0.1)
    assert rec.useful
    assert math.isnan(request(ttft_s=0.1, e2e_s=0.2, completion_tokens=1).tpot_s)
    assert not request(verdict="truncated", correct=True).useful
    assert request(chunk_arrival_s=[0.1, 0.15, 0.4]).inter_chunk_s == pytest.approx([0.05, 0.25])
