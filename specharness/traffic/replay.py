"""Replay a multi-turn conversation turn by turn, each arm carrying its own answers forward.

:func:`replay_conversation` sends a case's turns one after the other through the sender it is given (no I/O here);
:func:`turn_case` builds one turn's request and :func:`skipped_record` the record of a turn not sent after an
earlier one had no answer (:data:`SKIPPED_AFTER_FAILURE`). Rules: docs/workloads.md#conversations-replayed-turn-by-turn.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

from specharness.records import COMPLETE, TRUNCATED, RequestRecord, completeness
from specharness.traffic.client import RequestMeta
from specharness.traffic.workloads import Case, turn_case_id

__all__ = ["SKIPPED_AFTER_FAILURE", "SendTurn", "SkipTurn", "replay_conversation", "skipped_record", "turn_case"]

SKIPPED_AFTER_FAILURE = "skipped_after_failure"

SendTurn = Callable[[Case, int], Awaitable[RequestRecord]]
"""``send_turn(turn_case, turn)``: send one turn (turns from 1), journal its record and return it."""
SkipTurn = Callable[[Case, int], None]
"""``skip_turn(turn_case, turn)``: journal a turn that is not sent (:func:`skipped_record`)."""


def turn_case(case: Case, turn: int, history: tuple[dict[str, str], ...]) -> Case:
    """The request of turn ``turn`` of a replayed case: its own id, the given chat history, no later turns, and the
    case's check on the last turn only."""
    last = turn == case.turn_count
    return replace(
        case, id=turn_case_id(case.id, turn), messages=history, turns=None, check=case.check if last else None
    )


def _answered(record: RequestRecord) -> bool:
    """The turn ended with an answer the next turn can carry: complete, or cut at max_tokens."""
    return record.error_kind is None and record.verdict in (COMPLETE, TRUNCATED)


async def replay_conversation(case: Case, send_turn: SendTurn, skip_turn: SkipTurn) -> list[RequestRecord]:
    """Send ``case``: once as it is when it has no ``turns``, else turn by turn, each after the previous answer
    ended, with the answers this arm gave as the history. After a turn without an answer the remaining turns go
    to ``skip_turn`` instead. Returns the records of the turns sent."""
    later = case.turns
    if later is None:
        return [await send_turn(case, 1)]
    if case.messages is None:  # refused when the case is parsed; kept for cases built by hand
        raise ValueError(f"case {case.id!r}: a raw-prompt case cannot be replayed turn by turn")
    history = case.messages
    sent: list[RequestRecord] = []
    for turn in range(1, case.turn_count + 1):
        if sent and not _answered(sent[-1]):
            skip_turn(turn_case(case, turn, history), turn)  # history: up to the turn that had no answer
            continue
        if sent:
            history = (
                *history,
                {"role": "assistant", "content": sent[-1].text},
                {"role": "user", "content": later[turn - 2]},
            )
        sent.append(await send_turn(turn_case(case, turn, history), turn))
    return sent


def skipped_record(case: Case, meta: RequestMeta) -> RequestRecord:
    """The record of a turn not sent because an earlier turn of its conversation had no answer: failed, with
    ``error_kind`` :data:`SKIPPED_AFTER_FAILURE`, no times (NaN) and no output. ``send_s`` is the moment it was
    skipped (the one clock reading a send would have taken). A check on it is evaluated on the empty answer, as the
    client does for any failed request."""
    correct: bool | None = None
    detail = "unchecked"
    if case.check is not None:
        result = case.check.evaluate_response("", [])
        correct, detail = result.correct, result.detail
    return RequestRecord(
        arm=meta.arm,
        block=meta.block,
        workload=meta.workload,
        group=case.group,
        case_id=case.id,
        clients=meta.clients,
        warmup=meta.warmup,
        cell=meta.cell,
        seq=meta.seq,
        started_unix_s=time.time(),
        send_s=time.perf_counter(),
        ttft_s=math.nan,
        e2e_s=math.nan,
        error_kind=SKIPPED_AFTER_FAILURE,
        error="an earlier turn of the conversation had no answer; not sent",
        verdict=completeness(error_kind=SKIPPED_AFTER_FAILURE, saw_done=False, finish_reason=None),
        correct=correct,
        check_detail=detail,
        rate=meta.rate,
        scheduled_s=meta.scheduled_s,
        send_lateness_s=meta.send_lateness_s,
    )
