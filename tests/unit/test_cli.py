"""Bad input through the real CLI (``python -m specharness``): one clear line on stderr, exit 2, no traceback.

None of these cases starts an engine: every check happens before a server would be launched.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "specharness", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


@pytest.fixture
def hf_dir(tmp_path: Path) -> Path:
    """A directory that looks like a HF model to the resolver (config.json only); no engine is started with it."""
    d = tmp_path / "tiny-model"
    d.mkdir()
    (d / "config.json").write_text("{}")
    return d


def assert_one_line_error(result: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("specharness: error:")]
    assert len(lines) == 1 and fragment in lines[0], result.stderr


def test_unknown_workload(tmp_path: Path) -> None:
    assert_one_line_error(
        run_cli("run", "--workloads", "copyy", "--out", str(tmp_path / "r"), cwd=tmp_path), "unknown workload 'copyy'"
    )


def test_malformed_jsonl_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "mine.jsonl"
    bad.write_text('{"id": "a", "prompt": "p", "max_tokens": 4}\n{"id": "b", "prompt": \n')
    assert_one_line_error(
        run_cli("run", "--workloads", str(bad), "--out", str(tmp_path / "r"), cwd=tmp_path), f"{bad}:2: not valid JSON"
    )


def test_invalid_speculative_config(tmp_path: Path) -> None:
    r = run_cli(
        "run", "--prompt-lookup-min", "5", "--prompt-lookup-max", "2", "--out", str(tmp_path / "r"), cwd=tmp_path
    )
    assert_one_line_error(r, "prompt_lookup_min=5 > prompt_lookup_max=2")
    r = run_cli("run", "--speculative-config", "{bad", "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert_one_line_error(r, "--speculative-config is not valid JSON")


def test_missing_model(tmp_path: Path) -> None:
    r = run_cli("run", "--model", str(tmp_path / "nope"), "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert_one_line_error(r, "no such file or directory")


def test_port_in_use(tmp_path: Path, hf_dir: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        r = run_cli("run", "--model", str(hf_dir), "--port", str(port), "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert_one_line_error(r, f"--port {port} is in use")


def test_vllm_not_importable(tmp_path: Path, hf_dir: Path) -> None:
    python = Path("/usr/bin/python3")
    if subprocess.run([str(python), "-c", "import vllm"], capture_output=True).returncode == 0:
        pytest.fail("/usr/bin/python3 unexpectedly has vllm; this test needs a Python without it")
    r = run_cli("run", "--model", str(hf_dir), "--python", str(python), "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert_one_line_error(r, "vLLM is not importable")
    # The run folder keeps what it had: manifest and journal exist and a partial report was written.
    assert (tmp_path / "r" / "journal.jsonl").is_file() and "PARTIAL" in (tmp_path / "r" / "report.md").read_text()


def test_report_on_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    assert_one_line_error(run_cli("report", str(tmp_path), cwd=tmp_path), "has no manifest.json")


def test_existing_run_folder_is_not_overwritten(tmp_path: Path) -> None:
    out = tmp_path / "r"
    out.mkdir()
    (out / "journal.jsonl").write_text("")
    assert_one_line_error(run_cli("run", "--out", str(out), cwd=tmp_path), "already holds a run")


def test_bad_option_values(tmp_path: Path) -> None:
    assert_one_line_error(run_cli("run", "--blocks", "0", cwd=tmp_path), "--blocks 0")
    assert_one_line_error(run_cli("run", "--profile", "huge", cwd=tmp_path), "--profile 'huge'")
    assert_one_line_error(run_cli("run", "--api-key-env", "SPECHARNESS_NO_SUCH_VAR", cwd=tmp_path), "--api-key-env")


def test_import_writes_a_workload_the_run_command_reads(tmp_path: Path) -> None:
    from specharness.traffic.workloads import load_workload

    out = tmp_path / "mine.jsonl"
    fixture = Path(__file__).resolve().parents[1] / "data" / "importers" / "sharegpt.json"
    done = run_cli("import", str(fixture), "-o", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (
        "3 imported of 5 read, 2 rejected" in done.stderr and "sharegpt.json[2]: field 'conversations'" in done.stderr
    )
    assert len(load_workload(str(out)).cases) == 3
    missing = run_cli("import", str(tmp_path / "missing.jsonl"), "-o", str(out), cwd=tmp_path)
    assert missing.returncode == 2 and "missing.jsonl" in missing.stderr and "Traceback" not in missing.stderr


def test_every_subcommand_names_its_handler_in_one_place() -> None:
    """The command table is the parser: each subcommand sets its ``cmd_<name>`` handler where it is declared, so a
    new command joins in one place (fails if one is declared without a handler)."""
    import argparse

    from specharness.cli import _parser

    action = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    missing = [name for name, sub in action.choices.items() if not callable(sub.get_default("handler"))]
    assert action.choices and missing == [], missing


def test_run_help_lists_every_profile(tmp_path: Path) -> None:
    """``specharness run --help`` names every profile a run accepts (the release profile included)."""
    from specharness.experiment.design import PROFILES

    result = run_cli("run", "--help", cwd=tmp_path)
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert [p for p in PROFILES if p not in text] == []
