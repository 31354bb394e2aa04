"""``--attach``: the harness drives two real vLLM CPU servers it did not start, and stops neither.

The test starts the servers itself (the default model, the quick profile's arms, both spawned before either is
waited for), under a served name the harness would never choose: requests only succeed if the run asked /v1/models.
The session's tiny run (test_paired_run.py) is launched in the background with this module (conftest's
``LAUNCHED_WITH``), its engines bound to the spare core, so its starts overlap these servers' starts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from specharness.engines.attached import AttachedEngine, check_speculation
from specharness.engines.model import resolve_model
from specharness.engines.server import EngineServer, EngineSettings
from specharness.experiment.design import build_arms, get_profile

from .conftest import ENGINE_BATCH, TEST_DTYPE, cli, journal_lines

pytestmark = pytest.mark.engine

SERVED_NAME = "attached-smollm2"
ATTACH_RUN = [
    "--workloads",
    "copy",
    "--clients",
    "1",
    "--blocks",
    "2",
    "--requests",
    "2",
    "--warmups",
    "1",
    "--max-tokens-cap",
    "32",
    "--no-progress",
]
ARMS = ("baseline", "ngram")


@pytest.fixture(scope="module")
def own_engines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, EngineServer]]:
    """A baseline and an ngram server started by the test, not by the harness; stopped here, in ``finally``."""
    logs = tmp_path_factory.mktemp("own-engines")
    settings = EngineSettings(
        model_path=str(resolve_model("default").serve_path),
        served_model_name=SERVED_NAME,
        dtype=TEST_DTYPE,
        extra_args=ENGINE_BATCH,
    )
    specs = {arm.name: arm for arm in build_arms(get_profile("quick"))}
    servers = {name: EngineServer(settings, specs[name], logs / f"{name}.log") for name in ARMS}
    try:
        for server in servers.values():  # both starts overlap (about 2 minutes each on 2 CPU cores)
            server.spawn()
        for server in servers.values():
            server.wait_ready()
        yield servers
    finally:
        for server in servers.values():
            server.stop()


def attach_arg(urls: dict[str, str]) -> str:
    return ",".join(f"{arm}={url}" for arm, url in urls.items())


def test_bad_attach_is_one_line_and_starts_nothing(tmp_path: Path) -> None:
    out = tmp_path / "bad"
    result = cli("run", "--attach", "baseline=localhost:1", *ATTACH_RUN, "--out", str(out), timeout_s=120)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("specharness: error:")]
    assert len(lines) == 1 and "--attach" in lines[0] and "localhost:1" in lines[0], result.stderr
    assert not (out / "journal.jsonl").exists()


@pytest.fixture(scope="module")
def attached_run(own_engines: dict[str, EngineServer], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run on both servers with the default text policy (full): checked below, and the full-text side of the
    --keep-text comparison."""
    out = tmp_path_factory.mktemp("attached") / "run"
    result = cli(
        "run", "--attach", attach_arg({arm: own_engines[arm].base_url for arm in ARMS}), *ATTACH_RUN, "--out", str(out)
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def test_attached_run_stops_neither_engine(own_engines: dict[str, EngineServer], attached_run: Path) -> None:
    urls = {arm: own_engines[arm].base_url for arm in ARMS}
    out = attached_run

    # the harness stopped nothing: both servers are the same processes, still answering
    for arm, server in own_engines.items():
        assert server.alive(), f"{arm} server process ended ({server.exit_status()})"
        assert httpx.get(f"{server.base_url}/health", timeout=10).status_code == 200

    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["attached"] == urls

    lines = journal_lines(out)
    assert not [x for x in lines if x.get("kind") == "engine_spawned"]  # nothing was started
    engines = {x["arm"]: x for x in lines if x.get("kind") == "engine"}
    assert set(engines) == set(ARMS)
    for arm, record in engines.items():
        assert record["command"] == [] and record["pid"] == -1
        assert record["vllm_version"] == own_engines[arm].version
        assert record["effective_settings"]["attached_url"] == urls[arm]
        assert record["effective_settings"]["source"] == "/server_info"  # loopback servers run in vLLM dev mode
        note = (out / record["log_path"]).read_text()
        assert "attached" in note and urls[arm] in note
    assert engines["ngram"]["effective_settings"]["speculative_config"]["method"] == "ngram"
    assert engines["baseline"]["effective_settings"]["speculative_config"] is None

    requests = [x for x in lines if x.get("kind") == "request"]
    for arm in ARMS:
        measured = [r for r in requests if r["arm"] == arm and not r["warmup"]]
        assert len(measured) == 2 * 2, arm  # 2 blocks x 2 requests at 1 client
        assert all(r["error_kind"] is None and r["completion_tokens"] for r in measured), arm
        assert any(r["arm"] == arm and r["warmup"] for r in requests), arm

    # counters came from each arm's own URL: only ngram drafts, and each engine's token count is its arm's journal's
    cells = [x for x in lines if x.get("kind") == "cell"]
    assert len(cells) == 2 * 2 and all(c["valid"] for c in cells)
    for cell in cells:
        counters = cell["counters"]
        assert counters["generation_tokens"] == counters["journal_completion_tokens"] > 0, cell["cell"]
        if cell["arm"] == "ngram":
            assert counters["drafts"] > 0, cell["cell"]
        else:
            assert counters["drafts"] == 0 and counters["draft_tokens"] == 0, cell["cell"]


def test_attached_engine_reads_the_real_server(own_engines: dict[str, EngineServer], tmp_path: Path) -> None:
    engines = {
        arm: AttachedEngine(own_engines[arm].arm, own_engines[arm].base_url + "/v1", tmp_path / f"{arm}.log")
        for arm in ARMS
    }
    for arm, engine in engines.items():
        engine.start()
        assert engine.version == own_engines[arm].version and engine.served_model() == SERVED_NAME
        assert engine.alive() and engine.exit_status() == "attached: answering"
    assert check_speculation(engines["baseline"], expects_speculation=False) is None
    assert check_speculation(engines["ngram"], expects_speculation=True) is None
    # the arms' URLs swapped: both contradictions are named
    assert "does not speculate" in (check_speculation(engines["baseline"], expects_speculation=True) or "")
    assert "is no baseline" in (check_speculation(engines["ngram"], expects_speculation=False) or "")
    for engine in engines.values():
        engine.stop()
    assert all(server.alive() for server in own_engines.values())


def _texts(run_dir: Path) -> set[str]:
    """Every prompt and output text of a full-text run that is long enough to be unmistakable."""
    found: set[str] = set()
    manifest = orjson.loads((run_dir / "manifest.json").read_bytes())
    for saved in manifest["workloads"].values():
        for case in saved["cases"]:
            for m in case.get("messages") or []:
                found.add(str(m["content"])[:40])
            if case.get("prompt"):
                found.add(str(case["prompt"])[:40])
    for line in journal_lines(run_dir):
        if line.get("kind") == "request" and len(line.get("text", "")) >= 12:
            found.add(line["text"][:40])
    return {t for t in found if len(t) >= 12}


def test_keep_text_hash_leaks_no_prompt_or_output(
    own_engines: dict[str, EngineServer], attached_run: Path, tmp_path: Path
) -> None:
    """--keep-text hash (issue 12): no prompt or output reaches the journal, manifest, report or logs, while the
    checks still run on the full text (the same greedy answers are judged the same as in the full-text run)."""
    urls = {name: server.base_url for name, server in own_engines.items()}
    full, hashed = attached_run, tmp_path / "hashed"
    result = cli("run", "--attach", attach_arg(urls), *ATTACH_RUN, "--keep-text", "hash", "--out", str(hashed))
    assert result.returncode == 0, result.stderr[-3000:]
    assert orjson.loads((full / "manifest.json").read_bytes())["config"]["keep_text"] == "full"
    secrets = _texts(full)
    assert len(secrets) >= 3, "the full run kept prompts and outputs to look for"
    files = [p for p in hashed.rglob("*") if p.is_file() and p.suffix in (".jsonl", ".json", ".md", ".log")]
    files += [server.log_path for server in own_engines.values()]
    for path in files:
        text = path.read_text(errors="replace")
        leaked = [s for s in secrets if s in text]
        assert not leaked, f"{path.name} holds text the policy must drop: {leaked[:2]}"
    manifest = orjson.loads((hashed / "manifest.json").read_bytes())
    assert manifest["config"]["keep_text"] == "hash"
    counts, pairs = {}, {}
    for policy, out in (("full", full), ("hash", hashed)):
        rows = [line for line in journal_lines(out) if line.get("kind") == "request" and not line["warmup"]]
        counts[policy] = sorted((r["arm"], r["block"], r["case_id"], r["correct"]) for r in rows)
        report = orjson.loads((out / "report.json").read_bytes())
        pairs[policy] = [c["pair_counts"] for c in report["comparisons"]]
    assert counts["full"] == counts["hash"], "the checks ran on the full text under both policies"
    assert pairs["full"] == pairs["hash"], "identity between arms is still computed (keyed digests)"
    assert all(line.get("first_token_id") is None for line in journal_lines(hashed) if line.get("kind") == "request")
