"""``--attach`` parsing, and AttachedEngine against a STAND-IN server (not vLLM): a loopback HTTP server in a thread
that answers /health, /version, /v1/models, /metrics and /server_info the way vLLM shapes them. The engine test
tests/engine/test_attach.py attaches to real vLLM servers."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from specharness._errors import ConfigError, EngineStartTimeout, EngineUnreachable
from specharness.engines.attached import AttachedEngine, check_speculation, parse_attach
from specharness.engines.server import ArmSpec

ARMS = ("baseline", "ngram", "baseline-sync", "baseline-b", "baseline-slow")
NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}
SPEC_METRICS = (
    '# TYPE vllm:spec_decode_num_drafts_total counter\nvllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 0.0\n'
    'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 0.0\n'
)
BASE_METRICS = (
    '# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{engine="0",model_name="m"} 7.0\n'
)


# --- parse_attach ------------------------------------------------------------------------------------------------


def test_pairs_are_parsed_and_urls_normalised() -> None:
    got = parse_attach(" baseline = http://h1:8000/ , ngram=https://h2.example/v1/", ARMS, ("baseline", "ngram"))
    assert got == {"baseline": "http://h1:8000", "ngram": "https://h2.example"}


def test_a_path_prefix_is_kept() -> None:
    assert parse_attach("ngram=http://gw:80/team/ngram/v1", ARMS) == {"ngram": "http://gw:80/team/ngram"}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "--attach is empty"),
        ("   ", "--attach is empty"),
        ("baseline", "'baseline' has no '='"),
        ("=http://h:1", "no arm name"),
        ("baseline=", "--attach baseline= has no URL"),
        ("baseline=localhost:1", "'localhost:1' is not an http(s) URL"),
        ("baseline=ftp://h:1", "'ftp://h:1' is not an http(s) URL"),
        ("baseline=http://:8000", "'http://:8000' is not an http(s) URL with a host"),
        ("baseline=http://h:99999", "'http://h:99999': not a valid URL"),
        ("baseline=http://h:1?x=1", "has a query or fragment"),
        ("baseline=http://h:1,baseline=http://h:2", "gives arm 'baseline' twice"),
        ("turbo=http://h:1", "arm 'turbo' is unknown; use baseline, ngram"),
        ("baseline=http://h:1,ngram=http://h:1/v1", "gives baseline and ngram the same URL http://h:1"),
        ("baseline=http://h:1,,ngram=http://h:2", "has an empty item"),
        ("baseline=http://h:1,", "has an empty item"),
    ],
)
def test_bad_input_is_one_line_naming_the_flag(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_attach(text, ARMS)
    message = str(info.value)
    assert message.startswith("--attach") and "\n" not in message
    assert fragment in message


def test_every_arm_of_the_run_needs_a_url() -> None:
    with pytest.raises(ConfigError, match=r"--attach has no URL for arm 'ngram'; add ngram=URL"):
        parse_attach("baseline=http://h:1", ARMS, required_arms=("baseline", "ngram"))


def test_credentials_in_the_url_are_refused_and_not_echoed() -> None:
    with pytest.raises(ConfigError) as info:
        parse_attach("baseline=http://user:s3cret@h:1", ARMS)
    assert "credentials" in str(info.value) and "s3cret" not in str(info.value)


# --- AttachedEngine against a stand-in server ---------------------------------------------------------------------


@dataclass
class StandInVllmServer:
    """Answers like vLLM's OpenAI server: configurable health code, models, metrics and (dev mode) /server_info."""

    health_code: int = 200
    models: tuple[str, ...] = ("smollm2",)
    metrics: str = BASE_METRICS
    speculative_config: dict[str, Any] | None = None
    serves_server_info: bool = True
    version: str | None = "0.32.0-standin"  # None: /version is not served (not a vLLM server)
    seen_auth: list[str] = field(default_factory=list)
    port: int = 0

    def __post_init__(self) -> None:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                stand_in.seen_auth.append(self.headers.get("Authorization", ""))
                path = self.path.split("?", 1)[0]
                if path == "/health":
                    self._send(stand_in.health_code, "")
                elif path == "/version" and stand_in.version is not None:
                    self._send(200, json.dumps({"version": stand_in.version}), "application/json")
                elif path == "/v1/models":
                    data = [{"id": m, "object": "model"} for m in stand_in.models]
                    self._send(200, json.dumps({"object": "list", "data": data}), "application/json")
                elif path == "/metrics":
                    self._send(200, stand_in.metrics)
                elif path == "/server_info" and stand_in.serves_server_info:
                    config = {
                        "speculative_config": stand_in.speculative_config,
                        "scheduler_config": {
                            "async_scheduling": stand_in.speculative_config is None,
                            "max_num_seqs": 64,
                        },
                    }
                    self._send(200, json.dumps({"vllm_config": config}), "application/json")
                else:
                    self._send(404, '{"detail": "Not Found"}', "application/json")

            def _send(self, code: int, body: str, ctype: str = "text/plain") -> None:
                raw = body.encode()
                self.send_response(code)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


@pytest.fixture
def stand_in() -> Iterator[StandInVllmServer]:
    server = StandInVllmServer()
    try:
        yield server
    finally:
        server.close()


def attached(url: str, tmp_path: Path, arm: str = "baseline", **kwargs: Any) -> AttachedEngine:
    return AttachedEngine(ArmSpec(arm), url, tmp_path / "logs" / f"{arm}.s0.log", **kwargs)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_port_comes_from_the_url(tmp_path: Path) -> None:
    assert attached("http://h", tmp_path).port == 80
    assert attached("https://h/v1", tmp_path).port == 443
    assert attached("http://h:8123/", tmp_path).port == 8123
    assert attached("http://h:8123/", tmp_path).base_url == "http://h:8123"


def test_ready_reads_the_version_and_starts_nothing(stand_in: StandInVllmServer, tmp_path: Path) -> None:
    engine = attached(stand_in.url, tmp_path)
    engine.spawn()
    engine.wait_ready()
    assert engine.version == "0.32.0-standin"
    assert engine.command == [] and engine.process is None and engine.pids() == [] and engine.start_s == 0.0
    note = engine.log_path.read_text()
    assert "attached" in note and stand_in.url in note and "0.32.0-standin" in note
    assert "attached" in engine.log_tail() and stand_in.url in engine.log_tail()


def test_served_model_is_the_first_listed(stand_in: StandInVllmServer, tmp_path: Path) -> None:
    stand_in.models = ("first", "second")
    assert attached(stand_in.url + "/v1", tmp_path).served_model() == "first"


def test_no_model_listed_is_a_config_error(stand_in: StandInVllmServer, tmp_path: Path) -> None:
    stand_in.models = ()
    with pytest.raises(ConfigError, match=r"^--attach baseline=http://127\.0\.0\.1:\d+: /v1/models"):
        attached(stand_in.url, tmp_path).served_model()


def test_stop_leaves_the_engine_running_and_alive_follows_health(tmp_path: Path) -> None:
    server = StandInVllmServer()
    try:
        engine = attached(server.url, tmp_path)
        engine.start()
        assert engine.alive() and engine.exit_status() == "attached: answering"
        engine.stop()
        assert engine.alive()  # still answering: stop() touched nothing
    finally:
        server.close()
    assert not engine.alive()
    assert engine.exit_status() == "attached: not answering /health"
    assert engine.cause().startswith(f"attached: not answering /health at {server.url}")


def test_a_refused_connection_stops_in_seconds_naming_the_url(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    t0 = time.perf_counter()
    with pytest.raises(EngineUnreachable) as info:
        attached(url, tmp_path, start_timeout_s=900).wait_ready()
    assert time.perf_counter() - t0 < 10
    message = str(info.value)
    assert message.startswith(f"--attach baseline={url}: cannot connect (connection refused)") and "\n" not in message


def test_an_answer_that_is_not_vllm_stops_in_seconds(stand_in: StandInVllmServer, tmp_path: Path) -> None:
    stand_in.health_code = 404
    t0 = time.perf_counter()
    with pytest.raises(EngineUnreachable) as info:
        attached(stand_in.url, tmp_path, start_timeout_s=900).wait_ready()
    assert str(info.value).startswith(f"--attach baseline={stand_in.url}: /health answers HTTP 404, which a vLLM")
    stand_in.health_code, stand_in.version = 200, None
    with pytest.raises(EngineUnreachable, match=r"answers /health but /version \(HTTP 404\) gives no vLLM version"):
        attached(stand_in.url, tmp_path, start_timeout_s=900).wait_ready()
    assert time.perf_counter() - t0 < 10


def test_a_server_that_accepts_but_does_not_answer_yet_gets_the_start_timeout(tmp_path: Path) -> None:
    """A stand-in for a vLLM server still loading: its socket listens (vLLM binds it early) but nothing answers."""
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(8)
        url = f"http://127.0.0.1:{listening.getsockname()[1]}"
        with pytest.raises(EngineStartTimeout) as info:
            attached(url, tmp_path, start_timeout_s=0.5).wait_ready()
    message = str(info.value)
    assert message.startswith(f"--attach baseline={url}: /health did not answer 200 within 0 s (last: ReadTimeout)")


def test_unhealthy_answer_is_named_in_the_timeout(stand_in: StandInVllmServer, tmp_path: Path) -> None:
    stand_in.health_code = 503
    with pytest.raises(EngineStartTimeout, match="last: HTTP 503"):
        attached(stand_in.url, tmp_path, start_timeout_s=0.5).wait_ready()


def test_api_key_is_sent(stand_in: StandInVllmServer, tmp_path: Path) -> None:
    engine = attached(stand_in.url, tmp_path, api_key="sk-test")
    engine.start()
    engine.served_model()
    assert stand_in.seen_auth and set(stand_in.seen_auth) == {"Bearer sk-test"}


def test_effective_settings_from_server_info(stand_in: StandInVllmServer, tmp_path: Path) -> None:
    stand_in.speculative_config = NGRAM
    found = attached(stand_in.url, tmp_path, arm="ngram").effective_settings()
    assert found["source"] == "/server_info" and found["attached_url"] == stand_in.url
    assert found["speculative_config"]["method"] == "ngram" and found["async_scheduling"] is False


def test_effective_settings_not_reported(stand_in: StandInVllmServer, tmp_path: Path) -> None:
    stand_in.serves_server_info = False
    assert attached(stand_in.url, tmp_path).effective_settings() == {
        "source": "attached: not reported",
        "attached_url": stand_in.url,
    }


@pytest.mark.parametrize(
    ("serves_info", "spec", "metrics", "expects", "warning"),
    [
        (False, None, BASE_METRICS + SPEC_METRICS, True, None),
        (False, None, BASE_METRICS, False, None),
        (False, None, BASE_METRICS, True, "does not speculate (/metrics has vllm:generation_tokens_total but no"),
        (
            False,
            None,
            BASE_METRICS + SPEC_METRICS,
            False,
            "speculates (/metrics has vllm:spec_decode_num_drafts_total)",
        ),
        (False, None, "# nothing vLLM-like\n", True, None),  # cannot tell
        (True, NGRAM, BASE_METRICS, True, None),  # /server_info wins over /metrics
        (True, None, BASE_METRICS, True, "does not speculate (/server_info)"),
        (True, NGRAM, BASE_METRICS, False, "is no baseline"),
        (True, {"method": "eagle", "num_speculative_tokens": 3}, BASE_METRICS, True, "method 'eagle'"),
    ],
)
def test_speculation_that_contradicts_the_arm_is_warned(
    stand_in: StandInVllmServer,
    tmp_path: Path,
    serves_info: bool,
    spec: dict[str, Any] | None,
    metrics: str,
    expects: bool,
    warning: str | None,
) -> None:
    stand_in.serves_server_info, stand_in.speculative_config, stand_in.metrics = serves_info, spec, metrics
    got = check_speculation(attached(stand_in.url, tmp_path, arm="ngram" if expects else "baseline"), expects)
    if warning is None:
        assert got is None
    else:
        assert got is not None and warning in got and got.startswith("--attach ") and "\n" not in got
