import lzma
import math
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from specharness import JournalError
from specharness.experiment.journal import Journal, read_journal
from specharness.experiment.rundir import (
    JOURNAL,
    MANIFEST,
    PACKED_JOURNAL,
    copy_run,
    load_manifest,
    read_manifest,
    read_run_journal,
    write_manifest,
)
from specharness.records import (
    EVENT_KINDS,
    SCHEMA_VERSION,
    AttachWarningEvent,
    CellRecord,
    EngineFailedEvent,
    EngineLaunchEvent,
    EngineSpawnedEvent,
    LookEvent,
    Manifest,
    MismatchEvent,
    OtherEvent,
    PeakProbeEvent,
    RequestRecord,
    SegmentEndEvent,
    SegmentEvent,
    SweepPlanEvent,
)


def request(**kw: object) -> RequestRecord:
    base = dict(
        arm="ngram",
        block=0,
        workload="copy",
        group="g",
        case_id="c1",
        clients=1,
        warmup=False,
        cell="b0/copy/c1/ngram#s0",
        seq=0,
        started_unix_s=1.0,
        send_s=2.0,
    )
    base.update(kw)
    return RequestRecord(**base)  # type: ignore[arg-type]


def test_round_trip_keeps_every_field_and_nan(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    rec = request(
        chunk_arrival_s=[0.1, 0.2],
        chunk_tokens=[1, 3],
        ttft_s=0.1,
        e2e_s=0.3,
        completion_tokens=4,
        text="héllo",
        verdict="complete",
        correct=True,
    )
    failed = request(seq=1, error_kind="timeout", error="slow")
    with Journal(path) as journal:
        journal.write(rec)
        journal.write(failed)
        journal.write(CellRecord(arm="ngram", block=0, workload="copy", clients=1, cell="x", wall_s=1.5, requests=2))
        journal.write(SegmentEvent(segment=0, resume=False, started_unix_s=1.0))
    contents = read_journal(path)
    assert contents.requests[0] == rec
    assert math.isnan(contents.requests[1].ttft_s) and contents.requests[1].error_kind == "timeout"
    assert contents.cells[0].wall_s == 1.5 and contents.events == [SegmentEvent(0, False, 1.0)]


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


# --- typed events: one writer, one reader ----------------------------------------------------------------------------

EVENTS = [
    SegmentEvent(segment=1, resume=True, started_unix_s=10.5, skipped_cells=["b0/copy/c1/ngram"]),
    SegmentEndEvent(segment=1, status="engine-died", ended_unix_s=20.0, error="ngram engine died"),
    EngineSpawnedEvent(arm="ngram", pid=4242, segment=1),
    EngineLaunchEvent(segment=1, report={"mode": "auto", "plan": {"shares": {"ngram": 0.47}}}),
    AttachWarningEvent(arm="ngram", message="no speculation behind this URL"),
    MismatchEvent(cell="b0/copy/c1/ngram", message="counter 10, journal 12"),
    LookEvent(blocks=4, undecided=["copy/c1"]),
    SweepPlanEvent(
        workload="copy",
        reference_arm="baseline",
        peak_rps={"baseline": 2.0, "ngram": 3.0},
        levels=[0.5, 1.0],
        rates=["1", "2", "inf"],
    ),
    PeakProbeEvent(workload="copy", arm="baseline", requests=8, ok=8, wall_s=4.0, peak_rps=2.0),
    EngineFailedEvent(arm="ngram@0.30.0", segment=0, reason="TypeError: Cannot inspect kernel parameters", release="x"),
]


def test_every_event_kind_round_trips_typed(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with Journal(path) as journal:
        for event in EVENTS:
            journal.write(event)
    contents = read_journal(path)
    assert contents.events == EVENTS
    assert {type(e).KIND for e in EVENTS} == set(EVENT_KINDS)  # every kind the journal knows is tested here
    assert contents.events_of(LookEvent) == [e for e in EVENTS if isinstance(e, LookEvent)]
    assert contents.events_of(SegmentEvent) == [EVENTS[0]]
    first = orjson.loads(path.read_bytes().splitlines()[0])
    assert first == {
        "kind": "segment",
        "schema": SCHEMA_VERSION,
        "segment": 1,
        "resume": True,
        "started_unix_s": 10.5,
        "skipped_cells": ["b0/copy/c1/ngram"],
    }


OLD_LINES = [  # as schemas 1-3 wrote them (kind, schema, then the event's fields), read from committed journals
    {"kind": "segment", "schema": 1, "segment": 0, "resume": False, "started_unix_s": 1.0, "skipped_cells": []},
    {"kind": "engine_spawned", "schema": 2, "arm": "baseline", "pid": 7, "segment": 0},
    {
        "kind": "peak_probe",
        "schema": 3,
        "workload": "copy",
        "arm": "ngram",
        "requests": 4,
        "ok": 0,
        "wall_s": 1.0,
        "peak_rps": None,
    },
    {"kind": "segment_end", "schema": 3, "segment": 0, "status": "complete", "ended_unix_s": 2.0, "error": ""},
    {"kind": "some_future_note", "schema": 3, "text": "kept"},
]


@pytest.mark.parametrize("schema", [1, 2, 3])
def test_old_schemas_read_as_typed_events(tmp_path: Path, schema: int) -> None:
    path = tmp_path / "old.jsonl"
    path.write_bytes(b"".join(orjson.dumps({**line, "schema": schema}) + b"\n" for line in OLD_LINES))
    events = read_journal(path).events
    assert events[0] == SegmentEvent(segment=0, resume=False, started_unix_s=1.0, skipped_cells=[])
    assert events[1] == EngineSpawnedEvent(arm="baseline", pid=7, segment=0)
    assert isinstance(events[2], PeakProbeEvent) and math.isnan(events[2].peak_rps)  # JSON null is NaN again
    assert events[3] == SegmentEndEvent(segment=0, status="complete", ended_unix_s=2.0, error="")
    assert events[4] == OtherEvent(kind="some_future_note", fields={"text": "kept"})


def test_an_event_missing_a_field_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(orjson.dumps({"kind": "look", "schema": 3}) + b"\n")
    with pytest.raises(JournalError, match=r"j.jsonl:1: look record is missing a field"):
        read_journal(path)


def test_a_packed_run_folder_reads_like_an_unpacked_one(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with Journal(run / JOURNAL) as journal:
        journal.write(request())
        journal.write(EVENTS[0])
    write_manifest(run, Manifest(config={"profile": {}}, status="complete"))
    packed = tmp_path / "packed"
    packed.mkdir()
    (packed / MANIFEST).write_bytes((run / MANIFEST).read_bytes())
    (packed / PACKED_JOURNAL).write_bytes(lzma.compress((run / JOURNAL).read_bytes()))
    assert read_run_journal(packed).events == read_run_journal(run).events == [EVENTS[0]]
    assert read_run_journal(packed).requests == [request()]
    copy = copy_run(packed, tmp_path / "copy")
    assert (copy / JOURNAL).read_bytes() == (run / JOURNAL).read_bytes() and load_manifest(copy).status == "complete"


def test_manifest_round_trips_and_leaves_unset_parts_out(tmp_path: Path) -> None:
    paired = Manifest(
        config={"profile": {"arms": ["baseline", "ngram"]}},
        harness_commit="abc",
        harness_version="1",
        hardware={"cpu": "x"},
        model={"name": "m"},
        workloads={},
        started_unix_s=1.0,
        segments=[{"segment": 0, "started_unix_s": 1.0, "resume": False}],
        block_orders={"0": ["baseline", "ngram"]},
    )
    write_manifest(tmp_path, paired)
    raw = read_manifest(tmp_path)
    assert load_manifest(tmp_path) == paired
    assert not {"kind", "design", "streams", "attached", "synthetic", "ended_unix_s"} & set(raw)
    assert raw["schema"] == SCHEMA_VERSION and raw["harness"] == "specharness"
    sampled = replace(paired, kind="sampled", design={"samples": 2}, streams={"ngram": "ngram"}, block_orders=None)
    write_manifest(tmp_path, sampled)
    assert read_manifest(tmp_path)["kind"] == "sampled" and load_manifest(tmp_path) == sampled


def test_a_manifest_of_an_old_schema_reads_typed() -> None:
    old = {
        "config": {"profile": {}},
        "hardware": {},
        "harness": "specharness",
        "harness_commit": "c",
        "model": {},
        "schema": 1,
        "segments": [{"segment": 0, "started_unix_s": 1.0, "resume": False, "status": "complete"}],
        "started_unix_s": 1.0,
        "ended_unix_s": 2.0,
        "status": "complete",
        "workloads": {},
    }
    manifest = Manifest.from_dict(old)
    assert manifest.schema == 1 and manifest.harness_version == "" and manifest.block_orders is None
    assert manifest.to_dict() == old
