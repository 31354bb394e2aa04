"""The quality ASV values, recomputed from committed journals (real CPU and H200 runs; no engine), and the
structured-validity stages tied to the checks' own wording."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from specharness.analysis.structured_validity import structured_validity, validity_stage
from specharness.experiment.rundir import copy_run
from specharness.history.asv.quality_metrics import distribution_metrics, structured_metrics
from specharness.history.asv.quality_suite import STRUCTURED_GRID, structured_report
from specharness.records import RequestRecord
from specharness.reporting.sampled_report import write_sampled_report
from specharness.traffic.checks import CheckResult
from specharness.traffic.structured import bind_check, parse_structured_check, parse_tool_choice, parse_tools

REPORTS = Path(__file__).resolve().parents[2] / "reports"


def unpack(committed: str, into: Path) -> Path:
    """A run folder rebuilt from a committed one (manifest.json + journal.jsonl.xz)."""
    return copy_run(REPORTS / committed, into)


def _expect(metrics: dict[str, float], table: dict[str, tuple[float, float]]) -> None:
    for check, (ngram, baseline) in table.items():
        assert metrics[f"structured/c1/{check}/invalid_fraction_ngram"] == pytest.approx(ngram)
        assert metrics[f"structured/c1/{check}/invalid_fraction_baseline"] == pytest.approx(baseline)
        assert metrics[f"structured/c1/{check}/rejected_fraction_ngram"] == 0.0
        assert metrics[f"structured/c1/{check}/rejected_fraction_baseline"] == 0.0


def test_cpu_structured_run_every_tool_call_is_unusable(tmp_path: Path) -> None:
    """vLLM CPU 0.32.0: 16 tool-call requests per arm, each either not JSON (cut at 256 tokens) or off the function's
    schema; of 16 JSON answers per arm, 4 cut at the cap (not JSON), 10 with a wrong value, 2 right."""
    metrics = structured_metrics(structured_report(unpack("cpu-structured/20261204", tmp_path / "run")))
    _expect(metrics, {"all": (20 / 32, 20 / 32), "json_schema": (4 / 16, 4 / 16), "tool_call": (1.0, 1.0)})
    assert {k.split("/")[2] for k in metrics} == set(STRUCTURED_GRID)


def test_h200_structured_run_only_answers_cut_at_the_cap_are_invalid(tmp_path: Path) -> None:
    """vLLM 0.26.0 on the H200: tool arguments always schema-valid; the invalid quarter is the answers cut at 256."""
    report = structured_report(unpack("gpu-h200-vllm0.26.0/20261204/structured", tmp_path / "run"))
    _expect(structured_metrics(report), {"all": (0.25, 0.25), "json_schema": (0.25, 0.25), "tool_call": (0.25, 0.25)})
    tool = {(r["arm"], r["check"]): r for r in report["structured_validity"]}[("ngram", "tool_call")]
    assert (tool["not_json"], tool["schema_invalid"], tool["wrong_values"], tool["truncated"]) == (4, 0, 12, 6)


def _record(**fields: Any) -> RequestRecord:
    base: dict[str, Any] = {
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
        "verdict": "complete",
        "saw_done": True,
        "finish_reason": "stop",
    }
    return RequestRecord(**{**base, **fields})


def _judged(result: CheckResult, tool_calls: list[dict[str, Any]] | None = None) -> RequestRecord:
    return _record(correct=result.correct, check_detail=result.detail, tool_calls=tool_calls or [])


def test_stages_read_the_wording_of_the_checks_themselves() -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
        "additionalProperties": False,
    }
    answer = parse_structured_check({"type": "json_schema", "schema": schema, "values": {"name": "Mara"}}, "t")
    for text, stage in (
        ("Sure: {}", "not_json"),
        ('{"name": 3}', "schema_invalid"),
        ('{"name": "Bob"}', "wrong_values"),
        ('{"name": "Mara"}', "valid"),
    ):
        assert validity_stage(_judged(answer.evaluate(text)), "json_schema") == stage, text
    tools = parse_tools(
        [
            {"type": "function", "function": {"name": "book", "parameters": schema}},
            {"type": "function", "function": {"name": "cancel"}},
        ],
        "t",
    )
    choice = parse_tool_choice({"type": "function", "function": {"name": "book"}}, tools, "t")
    call = bind_check(
        parse_structured_check({"type": "tool_call", "values": {"name": "Mara"}}, "t"),
        response_format=None,
        tools=tools,
        tool_choice=choice,
        where="t",
    )
    for calls, stage in (
        ([], "no_tool_call"),
        ([{"name": "cancel", "arguments": "{}"}], "no_tool_call"),
        ([{"name": "book", "arguments": '{"name": '}], "not_json"),
        ([{"name": "book", "arguments": '{"who": "Mara"}'}], "schema_invalid"),
        ([{"name": "book", "arguments": '{"name": "Ann"}'}], "wrong_values"),
        ([{"name": "book", "arguments": '{"name": "Mara"}'}], "valid"),
    ):
        assert validity_stage(_judged(call.evaluate_response("", calls), calls), "tool_call") == stage, calls


def test_rejections_failures_and_unkept_details_move_the_right_values() -> None:
    manifest = {
        "workloads": {
            "w": {
                "cases": [
                    {"id": "j", "check": {"type": "json_schema"}},
                    {"id": "t", "check": {"type": "tool_call"}},
                    {"id": "x", "check": {"type": "contains"}},
                ]
            }
        }
    }
    records = [
        _record(case_id="j", error_kind="http_error", http_status=400, verdict="failed", saw_done=False),
        _record(case_id="j", error_kind="timeout", verdict="failed", saw_done=False),
        _record(case_id="j", correct=True, check_detail="passed"),
        _record(case_id="j", correct=False, check_detail="not JSON (Expecting value at char 0)"),
        _record(case_id="t", correct=False, check_detail="failed"),  # --keep-text hash: no tool call came back
        _record(case_id="x", correct=False, check_detail="missing 'y'"),  # not a structured case
    ]
    rows = {v.check: v for v in structured_validity(records, manifest)}
    assert sorted(rows) == ["json_schema", "tool_call"]
    j = rows["json_schema"]
    assert (j.requests, j.rejected, j.failed, j.valid, j.not_json, j.invalid) == (4, 1, 1, 1, 1, 1)
    metrics = structured_metrics({"structured_validity": [v.to_dict() for v in rows.values()]})
    assert metrics["w/c1/json_schema/rejected_fraction_ngram"] == pytest.approx(0.5)
    assert metrics["w/c1/json_schema/invalid_fraction_ngram"] == pytest.approx(0.25)
    assert metrics["w/c1/tool_call/invalid_fraction_ngram"] == 1.0  # no tool calls: known even without details
    hashed = _record(case_id="j", correct=False, check_detail="failed")
    rows = structured_validity([*records, hashed], manifest)
    unknown = structured_metrics({"structured_validity": [v.to_dict() for v in rows]})
    assert math.isnan(unknown["w/c1/json_schema/invalid_fraction_ngram"])  # a stage not kept: no number, not a low one
    assert math.isnan(unknown["w/c1/all/invalid_fraction_ngram"])
    assert "w/c1/json_schema/invalid_fraction_baseline" not in metrics  # an arm that sent none: absent (ASV n/a)


def test_check_type_is_read_off_the_record_when_the_manifest_keeps_only_ids() -> None:
    manifest = {"workloads": {"w": {"cases": ["j", "t"]}}}  # specharness sampled keeps case ids only
    records = [
        _record(case_id="j", correct=False, check_detail="schema: (root): [] is not of type 'object'"),
        _record(case_id="t", correct=False, check_detail="no tool call"),
        _record(case_id="u", correct=True, check_detail="all present"),
    ]
    rows = {v.check: v for v in structured_validity(records, manifest)}
    assert rows["json_schema"].schema_invalid == 1 and rows["tool_call"].no_tool_call == 1 and len(rows) == 2


def test_cpu_sampled_run_distribution_values(tmp_path: Path) -> None:
    """vLLM CPU 0.32.0, copy and free, 5 repetitions, tested over (case, repetition) cells: ngram differs from the
    baseline in length and pass rate on copy, not on free (length p = 0.03 > α/3); the A/A pair is not flagged (its
    copy pass rate p = 0.012 with independent samples, 0.049 over cells); the positive control is caught on both."""
    metrics = distribution_metrics(write_sampled_report(unpack("cpu-sampled/20261204", tmp_path / "run")))
    assert metrics["copy/statistics_differing"] == 2.0 and metrics["free/statistics_differing"] == 0.0
    assert metrics["copy/statistics_differing_aa"] == 0.0 and metrics["free/statistics_differing_aa"] == 0.0
    assert metrics["copy/control_missed"] == 0.0 and metrics["free/control_missed"] == 0.0
    assert metrics["copy/detectable_length_difference_tokens"] == pytest.approx(2.71, abs=0.01)
    assert metrics["free/detectable_length_difference_tokens"] == pytest.approx(0.971, abs=0.001)


def test_a_missed_control_and_a_comparison_that_did_not_happen() -> None:
    def overall(verdict: str, differs_on: list[str], mde: float | None = 3.0) -> dict[str, Any]:
        return {"overall": {"verdict": verdict, "differs_on": differs_on, "length": {"mde": mde}}}

    sampled = {
        "workloads": {
            "copy": {
                "ngram": overall("not compared", [], None),
                "baseline-aa": overall("no difference detected", []),
                "baseline-t": overall("no difference detected", []),
            }
        }
    }
    metrics = distribution_metrics(sampled)
    assert math.isnan(metrics["copy/statistics_differing"])  # nothing compared: n/a, never a reassuring 0
    assert math.isnan(metrics["copy/detectable_length_difference_tokens"])
    assert metrics["copy/statistics_differing_aa"] == 0.0 and metrics["copy/control_missed"] == 1.0


def test_every_track_method_reads_a_key_the_metrics_produce(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ASV classes against the values of the committed CPU runs: every (method, parameter) finds its number, so a
    renamed key cannot turn a series into n/a unnoticed; a failed release reads as failed, not as a value."""
    import inspect

    from benchmarks.bench_quality import SampledDistribution, StructuredOutput
    from benchmarks.common import ReleaseFailed
    from specharness.history.asv.quality_suite import STRUCTURED_PREFIX

    monkeypatch.setenv("SPECHARNESS_ASV_NOTES", str(tmp_path / "notes"))
    structured = structured_metrics(structured_report(unpack("cpu-structured/20261204", tmp_path / "s")))
    sampled = distribution_metrics(write_sampled_report(unpack("cpu-sampled/20261204", tmp_path / "d")))
    caches = {
        StructuredOutput: {"metrics": structured, "prefix": STRUCTURED_PREFIX, "run_dir": "s"},
        SampledDistribution: {"metrics": sampled, "run_dir": "d"},
    }
    for cls, cache in caches.items():
        bench = cls()
        tracks = [f for name, f in inspect.getmembers(cls, inspect.isfunction) if name.startswith("track_")]
        assert len(tracks) == 4 and all(getattr(f, "unit", "") for f in tracks)
        for track in tracks:
            for param in cls.params[0]:
                assert math.isfinite(track(bench, cache, param)), (track.__name__, param)
        with pytest.raises(ReleaseFailed):
            tracks[0](bench, {**cache, "failed": "failed: ngram server ended"}, cls.params[0][0])
    assert StructuredOutput().track_invalid_fraction_ngram(caches[StructuredOutput], "tool_call") == 1.0


def test_the_quick_designs_are_those_of_the_committed_cpu_runs() -> None:
    """So the committed runs' values above are what the quick ASV benchmarks record for vLLM CPU 0.32.0."""
    import json
    from dataclasses import asdict

    from specharness.history.asv.quality_suite import TOOL_PARSER_ARGS, sampled_design, structured_profile

    committed = json.loads((REPORTS / "cpu-structured/20261204/manifest.json").read_text())["config"]
    quick = json.loads(json.dumps(structured_profile("quick").to_dict()))  # tuples as the manifest's lists
    for name in ("workloads", "clients", "blocks", "requests_per_cell", "warmups_per_cell", "max_tokens_cap", "arms"):
        assert quick[name] == committed["profile"][name], name
    assert tuple(committed["extra_engine_args"]) == TOOL_PARSER_ARGS
    design = json.loads((REPORTS / "cpu-sampled/20261204/manifest.json").read_text())["design"]
    light = asdict(sampled_design("quick"))
    assert {**design, "workloads": ["copy"], "repetitions": 2} == {**light, "workloads": list(light["workloads"])}
    assert sampled_design("quick").requests() == 512
