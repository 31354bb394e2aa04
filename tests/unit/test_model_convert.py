"""GGUF conversion: the real default GGUF through the real converter (torch + transformers), in a child process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from specharness._errors import ModelError
from specharness.engines.model import convert_gguf, default_gguf_path, sha256_file


def test_conversion_leaves_the_harness_environment_as_it_was(tmp_path: Path) -> None:
    """Importing torch sets KMP_* and TORCHINDUCTOR_CACHE_DIR in the importing process; the engine pool keys engines
    by such variables, so a conversion in the harness made the first run of a fresh cache look like another engine.
    Checked in a fresh interpreter: in this one another test may have imported torch already."""
    out = tmp_path / "model"
    check = (
        "import os, sys; from pathlib import Path\n"
        "from specharness.engines.model import convert_gguf, default_gguf_path\n"
        "before = dict(os.environ)\n"
        f"convert_gguf(default_gguf_path(), Path({str(out)!r}))\n"
        "changed = sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k))\n"
        "print('changed:', changed, 'torch imported:', 'torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("changed: [] torch imported: False"), done.stdout
    assert (out / "config.json").is_file()
    assert list(out.glob("*.safetensors"))
    assert (out / "SOURCE_SHA256").read_text().strip() == sha256_file(default_gguf_path())


def test_a_file_that_is_no_gguf_fails_with_one_line_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_text("not a gguf\n")
    out = tmp_path / "model"
    with pytest.raises(ModelError) as caught:
        convert_gguf(bad, out)
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    assert str(bad) in message
    assert not out.exists()
    assert not list(tmp_path.glob("model.*"))  # no half-written staging folder left behind


def test_a_converter_that_is_killed_is_named_with_the_signal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A child the kernel kills (out of memory) prints nothing of its own: the message says so instead of quoting a
    progress bar. The stand-in interpreter (unit test only) kills itself with SIGKILL."""
    killer = tmp_path / "python"
    killer.write_text("#!/bin/sh\necho 'Converting ...:  40%|####' >&2\nkill -9 $$\n")
    killer.chmod(0o755)
    monkeypatch.setattr("specharness.engines.model.sys.executable", str(killer))
    with pytest.raises(ModelError) as caught:
        convert_gguf(tmp_path / "x.gguf", tmp_path / "model")
    assert "killed by signal 9" in str(caught.value) and "x.gguf" in str(caught.value)
    assert "40%" not in str(caught.value)


def test_an_uncaught_converter_error_is_named_and_relative_paths_reach_the_child(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stand-in interpreter (unit test only) records its arguments, then fails as an uncaught exception does."""
    argv = tmp_path / "argv"
    failing = tmp_path / "python"
    failing.write_text(
        f'#!/bin/sh\necho "$@" > {argv}\n'
        "echo 'Traceback (most recent call last):' >&2\n"
        "echo \"PermissionError: [Errno 13] Permission denied: '/cache/models'\" >&2\nexit 1\n"
    )
    failing.chmod(0o755)
    monkeypatch.setattr("specharness.engines.model.sys.executable", str(failing))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelError) as caught:
        convert_gguf(Path("x.gguf"), Path("cache/models/model"))
    message = str(caught.value)
    assert "exited with 1: PermissionError: [Errno 13] Permission denied" in message and "\n" not in message
    assert argv.read_text().split()[-2:] == [str(tmp_path / "x.gguf"), str(tmp_path / "cache/models/model")]
