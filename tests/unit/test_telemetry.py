"""--keep-text: what reaches the journal and the manifest under full, hash and none (issue 12)."""

from __future__ import annotations

from pathlib import Path

import pytest

from specharness._errors import ConfigError
from specharness.experiment.journal import Journal, read_journal
from specharness.experiment.telemetry import TextPolicy, run_policy
from specharness.records import RequestRecord

SECRET_PROMPT = "Patient Ines Faro, record 4471-B: repeat the diagnosis."
SECRET_OUTPUT = "Ines Faro, record 4471-B: acute tide-clock syndrome."


def _request(**kw: object) -> RequestRecord:
    base = {
        "arm": "ngram",
        "block": 0,
        "workload": "w",
        "group": "g",
        "case_id": "c",
        "clients": 1,
        "warmup": False,
        "cell": "b0/w/c1/ngram#s0",
        "seq": 0,
        "started_unix_s": 0.0,
        "send_s": 0.0,
        "text": SECRET_OUTPUT,
        "verdict": "complete",
        "correct": True,
        "check_detail": "missing 'Ines Faro'",
        "error": None,
        "tool_calls": [{"name": "f", "arguments": '{"who": "Ines Faro"}'}],
    }
    return RequestRecord(**{**base, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["hash", "none"])
def test_no_text_reaches_the_journal(tmp_path: Path, mode: str) -> None:
    policy = TextPolicy(mode)
    with Journal(tmp_path / "j.jsonl", fsync=False, policy=policy) as journal:
        journal.write(_request())
        journal.write(
            _request(
                check_detail="unchecked",
                correct=None,
                error="HTTP 400: Ines Faro",
                error_kind="http_error",
                http_status=400,
                verdict="failed",
            )
        )
    raw = (tmp_path / "j.jsonl").read_text()
    assert "Ines" not in raw and "4471" not in raw and "tide-clock" not in raw
    first, second = read_journal(tmp_path / "j.jsonl").requests
    assert first.check_detail == "passed" and first.counts_correct  # the verdict survives
    assert second.check_detail == "unchecked" and not second.checked  # "unchecked" keeps its meaning
    assert second.error == "http_error (HTTP 400)"
    assert f":{len(SECRET_OUTPUT)} chars" in first.text


def test_hashes_match_within_a_run_and_not_across_salts() -> None:
    a, b = TextPolicy("hash"), TextPolicy("hash")
    assert a.text(SECRET_OUTPUT) == a.text(SECRET_OUTPUT) != a.text(SECRET_OUTPUT + ".")
    assert a.text(SECRET_OUTPUT) != b.text(SECRET_OUTPUT)  # the salt is per run and never written
    assert TextPolicy("full").request(_request()) == _request()


def test_manifest_cases_keep_ids_and_check_types_only() -> None:
    case = {
        "id": "q1",
        "group": "g",
        "max_tokens": 8,
        "messages": [{"role": "user", "content": SECRET_PROMPT}],
        "check": {"type": "contains", "values": ["Ines Faro"]},
    }
    kept = TextPolicy("hash").case(case)
    assert "Ines" not in str(kept) and kept["id"] == "q1" and kept["check"] == {"type": "contains"}
    assert "prompt" not in kept and "messages" not in kept
    with pytest.raises(ConfigError, match="--keep-text"):
        TextPolicy("partial")


def test_a_runs_policy_keeps_its_salt_for_a_resume_and_refuses_logging_flags(tmp_path: Path) -> None:
    run, cache = tmp_path / "run", tmp_path / "cache"
    first, again = run_policy("hash", run, cache), run_policy("hash", run, cache)
    assert first.salt == again.salt and not list(run.parent.glob("run*"))  # the salt lives in the cache only
    assert run_policy("full", run, cache, [("--enable-log-requests",)]).keeps_text
    with pytest.raises(ConfigError, match="--enable-log-outputs"):
        run_policy("none", run, cache, [(), ("--enable-log-outputs",)])
