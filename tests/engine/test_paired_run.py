"""What must hold after a real paired run on the CPU engine (baseline vs ngram, the default model)."""

from __future__ import annotations

import itertools
import math
import os
import time
from pathlib import Path

import orjson
import pytest

from specharness.analysis.verdict import QUALITY_VERDICTS, SPEED_VERDICTS
from specharness.engines.preload import ENV as PRELOAD_ENV
from specharness.experiment.journal import read_journal
from specharness.experiment.quiet import ENGINE_SETTLE_S

from .conftest import ENGINE_BATCH, MAX_MODEL_LEN, TEST_API_KEY, TEST_DTYPE, assert_no_engine_left, cli, journal_lines

pytestmark = pytest.mark.engine


def report(run_dir: Path) -> dict:
    return orjson.loads((run_dir / "report.json").read_bytes())


def wait_gone(pid: int, limit_s: float = 10.0) -> bool:
    """Whether process ``pid`` is gone (or a zombie) within ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except (ProcessLookupError, OSError):
            return True
        time.sleep(0.2)
    return False


def test_every_request_is_journaled(tiny_run: Path) -> None:
    contents = read_journal(tiny_run / "journal.jsonl")
    # 2 blocks x 2 workloads (copy, overlong) x 2 client counts x 2 arms = 16 cells; 3 measured each, and one warmup
    # round: one request per client (1 at 1 client, 2 at 2 clients), on prompts never measured.
    assert len(contents.cells) == 16 and all(c.valid for c in contents.cells)
    assert sum(1 for r in contents.requests if not r.warmup) == 16 * 3
    assert sum(1 for r in contents.requests if r.warmup) == 8 * 1 + 8 * 2
    copy = [r for r in contents.requests if r.workload == "copy"]
    assert len(copy) == 4 * (3 + 1) + 4 * (3 + 2) and all(r.error_kind is None and r.saw_done for r in copy)
    measured_ids = {r.case_id for r in copy if not r.warmup}
    assert not measured_ids & {r.case_id for r in copy if r.warmup}
    for block in (0, 1):  # every block sends the same cases in the same order
        assert [
            r.case_id for r in copy if not r.warmup and r.block == block and r.arm == "ngram" and r.clients == 1
        ] == [r.case_id for r in copy if not r.warmup and r.block == 0 and r.arm == "baseline" and r.clients == 1]
    assert all(r.output_digest for r in copy)
    assert {e.arm for e in contents.engines} == {"baseline", "ngram"}
    assert all(e.vllm_version not in ("", "unknown") and e.start_s > 0 for e in contents.engines)


def test_prompt_past_the_model_length_is_an_http_error_with_no_goodput(tiny_run: Path) -> None:
    contents = read_journal(tiny_run / "journal.jsonl")
    overlong = [r for r in contents.requests if r.workload == "overlong"]
    assert len(overlong) == 4 * (3 + 1) + 4 * (3 + 2)  # none dropped
    # its one case is measured, so its warmup rounds used neutral prompts (never measured), which the server answers
    assert {r.case_id.split("-")[0] for r in overlong if r.warmup} == {"warmup"}
    assert all(r.error_kind is None for r in overlong if r.warmup)
    for r in (r for r in overlong if not r.warmup):
        assert r.error_kind == "http_error" and r.http_status == 400, (r.error_kind, r.http_status, r.error)
        assert str(MAX_MODEL_LEN) in r.error and r.verdict == "failed" and not r.useful
    arms = [a for a in report(tiny_run)["summaries"] if a["workload"] == "overlong"]
    assert len(arms) == 4
    for a in arms:
        assert a["failed"] == a["requests"] == 6 and a["error_kinds"] == {"http_error": 6}
        assert a["goodput_tok_s"] == 0 and a["goodput_requests_s"] == 0
    # both arms failed every request: no same work to time, and no right answer in the baseline to keep
    comps = [c for c in report(tiny_run)["comparisons"] if c["workload"] == "overlong"]
    assert {c["speed"]["verdict"] for c in comps} == {"not comparable"}
    assert {c["quality"]["verdict"] for c in comps} == {"not assessable"}


def test_api_key_reaches_the_server_and_no_file(tiny_run: Path) -> None:
    r = report(tiny_run)
    assert r["manifest"]["config"]["api_key"] == "set"
    # the copy requests succeeded, so vLLM accepted the key; now make sure it was written nowhere
    leaked = [p for p in tiny_run.rglob("*") if p.is_file() and TEST_API_KEY.encode() in p.read_bytes()]
    assert not leaked, leaked


def test_ngram_drafts_and_baseline_does_not(tiny_run: Path) -> None:
    cells = read_journal(tiny_run / "journal.jsonl").cells
    for cell in cells:
        if cell.workload == "overlong":  # refused prompts: nothing decoded, so nothing drafted in either arm
            assert cell.counters["drafts"] == 0 and cell.counters["generation_tokens"] == 0
        elif cell.arm == "ngram":
            assert cell.counters["drafts"] > 0 and cell.counters["accepted_tokens"] > 0
            assert len(cell.accepted_per_position) == 4
        else:
            assert cell.counters["drafts"] == 0 and cell.counters["draft_tokens"] == 0


def test_counters_reconcile_with_the_journal(tiny_run: Path) -> None:
    rows = report(tiny_run)["reconciliation"]
    assert len(rows) == 16
    for row in rows:
        produced = 0 if "/overlong/" in row["cell"] else 1  # refused prompts generate nothing
        assert row["engine_generation_tokens"] == row["journal_completion_tokens"] >= produced, row
        if row["cell"].endswith("/ngram") and produced:
            # per-request spec-decode metrics (vLLM >= 0.32) add up to the engine's counters
            assert row["journal_spec_draft_tokens"] == row["engine_draft_tokens"], row
            assert row["journal_spec_accepted_tokens"] == row["engine_accepted_tokens"], row
        assert row["ok"], row


def test_tokens_per_chunk_sum_to_usage(tiny_run: Path) -> None:
    requests = [r for r in read_journal(tiny_run / "journal.jsonl").requests if r.workload == "copy"]
    for r in requests:
        assert sum(r.chunk_tokens) == r.completion_tokens, r.case_id
    # speculation delivers several tokens in one chunk at least sometimes
    assert any(max(r.chunk_tokens) > 1 for r in requests if r.arm == "ngram")


def test_pairs_split_into_same_work_and_the_rest_with_both_verdicts(tiny_run: Path) -> None:
    comps = [c for c in report(tiny_run)["comparisons"] if c["workload"] == "copy"]
    assert len(comps) == 2
    for c in comps:
        n = c["pair_counts"]
        assert n["pairs"] == 2 * 3  # 2 blocks x 3 paired requests
        assert n["same_work"] + n["divergent"] + n["unstable"] + n["failed"] == n["pairs"]
        assert c["speed"]["verdict"] in SPEED_VERDICTS and c["quality"]["verdict"] in QUALITY_VERDICTS
        s = c["speedup"]
        if n["same_work"]:
            assert math.isfinite(s["estimate"]) and s["blocks"] == 2 and s["low"] <= s["estimate"] <= s["high"]


def test_manifest_records_model_engines_and_settings(tiny_run: Path) -> None:
    r = report(tiny_run)
    m = r["manifest"]
    assert m["status"] == "complete" and len(m["model"]["sha256"]) == 64
    assert m["model"]["origin"] == "embedded-default"
    engines = {e["arm"]: e for e in r["engines"]}
    assert "--speculative-config" in engines["ngram"]["command"]
    assert "--speculative-config" not in engines["baseline"]["command"]
    assert engines["ngram"]["async_scheduling"] is False  # vLLM turns it off for ngram
    # prefix caching is off by default for paired measurement, and the engine confirms it
    assert all("--no-enable-prefix-caching" in e["command"] for e in engines.values())
    assert all(e["effective_settings"].get("enable_prefix_caching") is False for e in engines.values())
    # the engine options the tests declare (conftest) are the manifest's and the running engines' own settings
    assert m["config"]["dtype"] == TEST_DTYPE
    for engine in engines.values():
        found = engine["effective_settings"]
        assert found["source"] == "/server_info" and str(found["dtype"]).endswith(TEST_DTYPE), found
        assert found["max_num_batched_tokens"] == int(ENGINE_BATCH[1]), found
    assert m["config"]["profile"]["equivalence_margin"] > 0 and m["config"]["profile"]["band_source"]
    assert m["harness_version"] and m["block_orders"]["0"] == ["baseline", "ngram"]
    assert (tiny_run / "logs" / "ngram.s0.log").is_file()
    # every phase of each start is read from the real engine's log (a vLLM whose log lines moved leaves NaN here)
    for engine in engines.values():
        phases = engine["start_phases_s"]
        assert all(v is not None and math.isfinite(v) and v >= 0 for v in phases.values()), phases
        parts = sum(v for k, v in phases.items() if k != "total_s")
        assert phases["total_s"] > 0 and abs(phases["total_s"] - parts) <= 1.0, phases
        assert engine["first_request_s"] is not None and 0 < engine["first_request_s"] < 60
    assert all(
        (tiny_run / "plots" / f).is_file() for f in ("tpot_cdf.png", "speedup.png", "acceptance_by_position.png")
    )


def test_each_arm_waits_for_the_engine_before_it_to_be_quiet(tiny_run: Path) -> None:
    """On the CPU build the run decides a settle time once (manifest, rules), and every cell of an arm that follows
    another arm's starts its first request at least that long after the other cell's last request ended."""
    settle = report(tiny_run)["manifest"]["config"]["profile"]["settle_s"]
    assert settle == ENGINE_SETTLE_S
    assert f"quiet {settle:g} s" in (tiny_run / "report.md").read_text()
    cells: dict[tuple[int, str, int, str], list[float]] = {}
    for r in journal_lines(tiny_run):
        if r["kind"] == "request":
            start, end = r["started_unix_s"], r["started_unix_s"] + (r["e2e_s"] or 0.0)
            span = cells.setdefault((r["block"], r["workload"], r["clients"], r["arm"]), [start, end])
            span[0], span[1] = min(span[0], start), max(span[1], end)
    ordered = sorted(cells.items(), key=lambda kv: kv[1][0])
    gaps = [b[1][0] - a[1][1] for a, b in itertools.pairwise(ordered) if a[0][3] != b[0][3]]
    assert gaps and min(gaps) >= settle - 0.05, gaps


def test_report_rebuilds_from_the_journal_alone(tiny_run: Path) -> None:
    before = report(tiny_run)
    (tiny_run / "report.json").unlink()
    (tiny_run / "report.md").unlink()
    result = cli("report", str(tiny_run))
    assert result.returncode == 0, result.stderr
    after = report(tiny_run)
    assert after["comparisons"] == before["comparisons"] and "## Decision" in (tiny_run / "report.md").read_text()


def test_both_servers_were_forked_from_one_preloader(tiny_run: Path) -> None:
    engines = report(tiny_run)["engines"]
    assert [e["engine_env"].get(PRELOAD_ENV) for e in engines] == ["1", "1"]
    logs = list((tiny_run / "logs").glob("preloader.*.log"))
    assert len(logs) == 1, logs
    imported = [line for line in logs[0].read_text().splitlines() if "imported vllm.entrypoints" in line]
    assert len(imported) == 1  # one import of vLLM's server module for both servers
    assert "forked from a preloaded interpreter" in (tiny_run / "report.md").read_text()


def test_no_engine_outlives_the_run(tiny_run: Path) -> None:
    assert_no_engine_left(tiny_run)
    log = next((tiny_run / "logs").glob("preloader.*.log")).read_text()
    preloader = int(log.split("preloader ", 1)[1].split(":", 1)[0])
    assert wait_gone(preloader), f"the preloader {preloader} outlived the run"
