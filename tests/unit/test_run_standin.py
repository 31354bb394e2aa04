"""The run recipe end to end against STAND-IN engines (not vLLM): two tiny loopback HTTP servers in threads that
answer /health, /version, /v1/models, /metrics and streamed chat completions, driven through ``--attach`` (so nothing
is started). Checks what the split driver must keep: the run folder's lifecycle, typed events, one cell per arm and
block, counters from /metrics, a resume that skips done cells, and a refused mis-set URL. Engine tests use real vLLM."""

from __future__ import annotations

import itertools
import json
import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from specharness import ConfigError, EngineDied
from specharness.analysis.analyse import analyse
from specharness.experiment.config import RunConfig
from specharness.experiment.design import get_profile, override
from specharness.experiment.driver import run_experiment
from specharness.experiment.rundir import load_manifest, read_run_journal
from specharness.records import AttachWarningEvent, EngineSpawnedEvent, SegmentEndEvent, SegmentEvent
from specharness.traffic.client import Sampling

TOKENS = 3  # tokens in every stand-in answer


class StandInEngine(ThreadingHTTPServer):
    """A stand-in vLLM server: answers every chat request with the same short streamed text; ``speculates`` adds the
    spec-decode counters to /metrics, as vLLM does only when a speculative config is set."""

    def __init__(self, speculates: bool) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.speculates = speculates
        self.generated = 0
        self.lock = threading.Lock()
        self.metrics_fail_after: int | None = None  # answered chat requests after which /metrics answers HTTP 500

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def metrics(self) -> str:
        lines = [f"vllm:generation_tokens_total {self.generated}"]
        if self.speculates:
            lines += [
                f"vllm:spec_decode_num_drafts_total {self.generated}",
                "vllm:spec_decode_num_draft_tokens_total 0",
            ]
        return "\n".join(lines) + "\n"


class _Handler(BaseHTTPRequestHandler):
    server: StandInEngine

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _reply(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        replies = {
            "/health": b"",
            "/version": b'{"version": "standin-0"}',
            "/v1/models": b'{"data": [{"id": "standin-model"}]}',
            "/metrics": self.server.metrics().encode(),
        }
        broken = self.server.metrics_fail_after
        if path == "/metrics" and broken is not None and self.server.generated >= broken * TOKENS:
            self._reply(500, b'{"error": "the stand-in stopped answering"}')
        elif path in replies:
            self._reply(200, replies[path], "text/plain" if path == "/metrics" else "application/json")
        else:
            self._reply(404, b'{"error": "not served by the stand-in"}')

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        with self.server.lock:
            self.server.generated += TOKENS
        chunk = {
            "choices": [
                {"index": 0, "delta": {"content": "copy this"}, "token_ids": [1, 2, 3], "finish_reason": "stop"}
            ]
        }
        usage = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": TOKENS}}
        events = [json.dumps(chunk).encode(), json.dumps(usage).encode(), b"[DONE]"]
        self._reply(200, b"".join(b"data: " + e + b"\n\n" for e in events), "text/event-stream")


@pytest.fixture
def engines() -> Iterator[dict[str, StandInEngine]]:
    servers = {"baseline": StandInEngine(speculates=False), "ngram": StandInEngine(speculates=True)}
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers.values()]
    for thread in threads:
        thread.start()
    yield servers
    for server in servers.values():
        server.shutdown()
        server.server_close()


def config_for(out: Path, attach: dict[str, str]) -> RunConfig:
    profile = override(
        get_profile("quick"),
        workloads=("copy",),
        clients=(1,),
        blocks=2,
        requests_per_cell=2,
        warmups_per_cell=1,
        equivalence_margin=0.1,
    )
    sampling = Sampling(max_tokens_cap=8)
    return RunConfig(profile=profile, out_dir=out, attach=attach, fsync=False, start_timeout_s=5.0, sampling=sampling)


def test_a_run_flows_through_the_recipe_and_resumes(tmp_path: Path, engines: dict[str, StandInEngine]) -> None:
    out = tmp_path / "run"
    attach = {arm: server.url for arm, server in engines.items()}
    finished: list[Path] = []
    assert run_experiment(config_for(out, attach), on_finish=finished.append) == out
    assert finished == [out]

    contents = read_run_journal(out)
    assert sorted((c.block, c.arm) for c in contents.cells) == [
        (0, "baseline"),
        (0, "ngram"),
        (1, "baseline"),
        (1, "ngram"),
    ]
    assert all(c.valid and c.requests == 2 for c in contents.cells)
    ngram = [c for c in contents.cells if c.arm == "ngram"]
    assert all(c.counters["generation_tokens"] == c.counters["journal_completion_tokens"] == 2 * TOKENS for c in ngram)
    measured = [r for r in contents.requests if not r.warmup]
    assert len(measured) == 8 and all(r.verdict == "complete" for r in measured)
    assert len([r for r in contents.requests if r.warmup]) == 4  # one warmup round of one client per cell
    assert [type(e) for e in contents.events] == [SegmentEvent, SegmentEndEvent]
    assert contents.events_of(SegmentEndEvent)[0].status == "complete"
    assert not contents.events_of(EngineSpawnedEvent)  # attached: nothing was started
    assert {e.arm for e in contents.engines} == {"baseline", "ngram"}

    manifest = load_manifest(out)
    assert manifest.status == "complete" and manifest.model["name"] == "standin-model"
    assert manifest.attached == attach and [s["status"] for s in manifest.segments] == ["complete"]

    resumed = RunConfig.from_manifest(out, manifest.config, None)
    run_experiment(resumed, resume=True)  # every cell is done: the second segment measures nothing
    again = read_run_journal(out)
    assert len(again.cells) == 4 and len(again.requests) == len(contents.requests)
    segment = again.events_of(SegmentEvent)[1]
    assert segment.segment == 1 and segment.resume and len(segment.skipped_cells) == 4
    assert [s["status"] for s in load_manifest(out).segments] == ["complete", "complete"]


def test_a_swapped_url_is_refused_before_anything_is_measured(
    tmp_path: Path, engines: dict[str, StandInEngine]
) -> None:
    out = tmp_path / "run"
    swapped = {"baseline": engines["ngram"].url, "ngram": engines["baseline"].url}
    with pytest.raises(ConfigError, match="--attach baseline="):
        run_experiment(config_for(out, swapped))
    contents = read_run_journal(out)
    assert not contents.requests and not contents.cells
    assert contents.events_of(AttachWarningEvent)[0].arm == "baseline"
    assert contents.events_of(SegmentEndEvent)[0].status == "failed"
    assert load_manifest(out).status == "failed"


def test_interleaved_cells_take_turns_round_by_round(tmp_path: Path, engines: dict[str, StandInEngine]) -> None:
    """--interleave: each arm's warmup in the block's order, then the measured cases one round (one request per
    client) at a time, the block's order and its reverse in turn; each arm's cell is still one record with its own
    cases numbered 0..n-1, so the analysis pairs them as before, and no steady-throughput window is claimed."""
    out = tmp_path / "run"
    attach = {arm: server.url for arm, server in engines.items()}
    config = config_for(out, attach)
    config = RunConfig(
        profile=override(config.profile, requests_per_cell=3, interleave=True, settle_s=0.05),
        out_dir=out,
        attach=attach,
        fsync=False,
        start_timeout_s=5.0,
        sampling=config.sampling,
    )
    run_experiment(config)
    contents = read_run_journal(out)
    assert sorted((c.block, c.arm, c.requests) for c in contents.cells) == [
        (0, "baseline", 3),
        (0, "ngram", 3),
        (1, "baseline", 3),
        (1, "ngram", 3),
    ]
    sent = sorted(contents.requests, key=lambda r: r.send_s)
    block0 = [(r.arm, r.warmup, r.seq) for r in sent if r.block == 0]
    # block 0 runs AB: warmups A then B, then rounds AB, BA, AB
    assert block0 == [
        ("baseline", True, 0),
        ("ngram", True, 0),
        ("baseline", False, 0),
        ("ngram", False, 0),
        ("ngram", False, 1),
        ("baseline", False, 1),
        ("baseline", False, 2),
        ("ngram", False, 2),
    ]
    ends = [(r.arm, r.send_s, r.send_s + r.e2e_s) for r in sent if r.block == 0]
    gaps = [b[1] - a[2] for a, b in itertools.pairwise(ends) if a[0] != b[0]]
    assert len(gaps) == 5 and min(gaps) >= 0.05  # every switch waits for the engine before it to be quiet
    block1 = [r.arm for r in sent if r.block == 1 and not r.warmup]
    assert block1 == ["ngram", "baseline", "baseline", "ngram", "ngram", "baseline"]  # BA: rounds BA, AB, BA
    ngram = [c for c in contents.cells if c.arm == "ngram"]
    assert all(c.counters["generation_tokens"] == c.counters["journal_completion_tokens"] == 3 * TOKENS for c in ngram)
    manifest = load_manifest(out)
    assert manifest.config["profile"]["interleave"] is True
    assert "take turns round by round" in manifest.config["profile"]["order_plan"]

    analysis = analyse(out, json.loads((out / "manifest.json").read_text()))
    assert analysis.rules.interleaved
    assert all(math.isnan(s.steady_output_tok_s) for s in analysis.summaries.values())
    (comparison,) = analysis.comparisons
    assert comparison.pair_counts.pairs == 6 and math.isnan(comparison.throughput.estimate)


def test_an_engine_that_stops_answering_in_an_interleaved_cell_is_named(
    tmp_path: Path, engines: dict[str, StandInEngine]
) -> None:
    """The ngram stand-in's /metrics stops answering once its warmup is done: the run stops with a dead cell naming
    ngram (not a traceback), block 0 keeps no valid cell of either arm (a resume measures both again), and the
    requests already sent stay in the journal."""
    out = tmp_path / "run"
    attach = {arm: server.url for arm, server in engines.items()}
    config = config_for(out, attach)
    config = RunConfig(
        profile=override(config.profile, requests_per_cell=3, interleave=True),
        out_dir=out,
        attach=attach,
        fsync=False,
        start_timeout_s=5.0,
        sampling=config.sampling,
    )
    engines["ngram"].metrics_fail_after = 1  # after its one warmup request
    with pytest.raises(EngineDied, match="ngram engine stopped answering"):
        run_experiment(config)
    contents = read_run_journal(out)
    (dead,) = contents.cells
    assert dead.arm == "ngram" and not dead.valid and "stopped answering" in dead.invalid_reason
    assert [(r.arm, r.warmup) for r in sorted(contents.requests, key=lambda r: r.send_s)] == [
        ("baseline", True),
        ("ngram", True),
    ]
