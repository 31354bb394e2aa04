"""Servers forked from a preloaded interpreter (specharness.engines.preload), on stand-in modules: a "heavy" module
whose import is recorded, and a "server" module that imports it and, run as ``__main__``, prints what it was given,
then exits or sleeps as its arguments say. Real processes, real sockets, real signals; no vLLM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import psutil
import pytest

from specharness.engines import preload

from .test_pool import pid_alive as alive
from .test_pool import wait_until

HEAVY = textwrap.dedent(
    """
    import os
    with open(os.environ["STANDIN_MARKS"], "a") as marks:
        marks.write(f"imported in {os.getpid()}\\n")
    os.environ["SET_AT_IMPORT"] = "yes"  # as vLLM's env_override does
    """
)
SERVER = textwrap.dedent(
    """
    import atexit, os, sys, time
    import standin_heavy  # noqa: F401
    if __name__ == "__main__":
        print(f"argv={sys.argv[1:]} X={os.environ.get('X')} cwd={os.getcwd()} sid={os.getsid(0) == os.getpid()} "
              f"imported={os.environ.get('SET_AT_IMPORT')}", flush=True)
        atexit.register(lambda: print("atexit ran", flush=True))
        if sys.argv[1] == "exit":
            sys.exit(int(sys.argv[2]))
        time.sleep(float(sys.argv[2]))
    """
)


@pytest.fixture
def standin(tmp_path: Path) -> dict[str, str]:
    """The environment a start passes: stand-in modules on the path, a marks file, and a variable to check."""
    (tmp_path / "standin_heavy.py").write_text(HEAVY)
    (tmp_path / "standin_server.py").write_text(SERVER)
    return dict(os.environ, PYTHONPATH=str(tmp_path), STANDIN_MARKS=str(tmp_path / "marks"), X="seen")


def spawn(env: dict[str, str], log: Path, *args: str, scope: str, owner: int | None = None) -> preload.ForkedProcess:
    return preload.spawn_forked(
        sys.executable, "standin_server", args, env, log, scope=scope, owner_pid=owner or os.getpid(), idle_s=60
    )


def test_enabled_on_a_gpu_by_default_and_as_the_variable_says() -> None:
    assert preload.enabled({}, cpu_build=False)
    assert not preload.enabled({}, cpu_build=True)
    assert preload.enabled({preload.ENV: "1"}, cpu_build=True)
    assert not preload.enabled({preload.ENV: "0"}, cpu_build=False)


def test_starts_share_one_import_and_get_their_own_arguments(standin: dict[str, str], tmp_path: Path) -> None:
    scope = uuid.uuid4().hex
    first = spawn(standin, tmp_path / "a.log", "exit", "3", scope=scope)
    assert first.wait(20) == 3
    second = spawn(dict(standin), tmp_path / "b.log", "exit", "0", scope=scope)
    assert second.wait(20) == 0
    assert first.pid != second.pid and first.preloader_pid == second.preloader_pid
    marks = (tmp_path / "marks").read_text().splitlines()
    assert marks == [f"imported in {first.preloader_pid}"]  # once, in the preloader; neither server imported it
    first_log = (tmp_path / "a.log").read_text()
    assert f"argv=['exit', '3'] X=seen cwd={os.getcwd()} sid=True imported=yes" in first_log
    assert "atexit ran" in first_log  # exit handlers run, as at the end of python -m
    assert "argv=['exit', '0']" in (tmp_path / "b.log").read_text()
    logs = list(tmp_path.glob("preloader.*.log"))
    assert len(logs) == 1 and "imported standin_server" in logs[0].read_text()


def test_another_environment_gets_another_preloader(standin: dict[str, str], tmp_path: Path) -> None:
    scope = uuid.uuid4().hex
    one = spawn(standin, tmp_path / "a.log", "exit", "0", scope=scope)
    other = spawn({**standin, "X": "other"}, tmp_path / "b.log", "exit", "0", scope=scope)
    assert one.wait(20) == 0 and other.wait(20) == 0
    assert one.preloader_pid != other.preloader_pid
    assert "X=other" in (tmp_path / "b.log").read_text()


def test_a_signalled_server_reports_the_signal_and_leads_its_group(standin: dict[str, str], tmp_path: Path) -> None:
    server = spawn(standin, tmp_path / "a.log", "sleep", "60", scope=uuid.uuid4().hex)
    assert server.poll() is None
    os.killpg(server.pid, signal.SIGTERM)  # at once: its session exists before its pid is known
    assert server.wait(20) == -signal.SIGTERM
    with pytest.raises(subprocess.TimeoutExpired):
        spawn(standin, tmp_path / "b.log", "sleep", "60", scope=uuid.uuid4().hex).wait(0.5)


def test_a_server_dies_with_the_process_that_started_it(standin: dict[str, str], tmp_path: Path) -> None:
    """The start's process is killed (SIGKILL: no cleanup); the preloader sees its connection close and stops the
    server, as PR_SET_PDEATHSIG stops a spawned one."""
    code = (
        "import os, sys, time; from pathlib import Path; from specharness.engines import preload\n"
        f"p = preload.spawn_forked(sys.executable, 'standin_server', ['sleep', '60'], dict(os.environ), "
        f"Path({str(tmp_path / 'a.log')!r}), scope={uuid.uuid4().hex!r}, owner_pid={os.getpid()}, idle_s=60)\n"
        "print(p.pid, flush=True); time.sleep(60)\n"
    )
    starter = subprocess.Popen([sys.executable, "-c", code], env=standin, stdout=subprocess.PIPE, text=True)
    assert starter.stdout is not None
    pid = int(starter.stdout.readline())
    assert alive(pid)
    starter.kill()
    starter.wait()
    assert wait_until(lambda: not alive(pid))


def test_the_preloader_ends_with_its_owner_and_stops_its_servers(standin: dict[str, str], tmp_path: Path) -> None:
    owner = subprocess.Popen(["sleep", "60"])
    server = spawn(standin, tmp_path / "a.log", "sleep", "60", scope=uuid.uuid4().hex, owner=owner.pid)
    preloader = server.preloader_pid
    assert alive(preloader) and alive(server.pid)
    owner.kill()
    owner.wait()
    assert wait_until(lambda: not alive(preloader) and not alive(server.pid), limit_s=30)
    assert server.wait(5) == -signal.SIGTERM  # stopped by the preloader, which told the start before it ended
    log = next(tmp_path.glob("preloader.*.log")).read_text()
    assert f"owner {owner.pid} is gone" in log


def test_a_module_that_fails_to_import_is_named(standin: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "standin_heavy.py").write_text("raise ImportError('no such engine here')\n")
    with pytest.raises(preload.PreloadUnavailable, match="ImportError: no such engine here"):
        spawn(standin, tmp_path / "a.log", "exit", "0", scope=uuid.uuid4().hex)


def test_an_exit_that_comes_with_the_pid_is_not_lost() -> None:
    """A server that ends at once: its exit status may arrive in the same read as its pid."""
    ours, theirs = socket.socketpair()
    theirs.sendall(b'{"pid": 7, "preloader_pid": 6}\n{"exit": 3}\n')
    reply, rest = preload._read_line(ours, timeout_s=5)
    assert reply == {"pid": 7, "preloader_pid": 6}
    assert preload.ForkedProcess(7, ours, 6, rest).poll() == 3
    theirs.close()


def test_a_start_that_goes_away_before_its_answer_leaves_the_other_servers_alone(
    standin: dict[str, str], tmp_path: Path
) -> None:
    scope = uuid.uuid4().hex
    kept = spawn(standin, tmp_path / "a.log", "sleep", "60", scope=scope)
    name = preload._address(sys.executable, "standin_server", standin, scope, os.getpid())
    for _ in range(3):
        gone = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        gone.connect("\0" + name)
        request = {"argv": ["sleep", "60"], "env": standin, "cwd": os.getcwd(), "log": str(tmp_path / "b.log")}
        gone.sendall(json.dumps(request).encode() + b"\n")
        gone.close()
    preloader = psutil.Process(kept.preloader_pid)
    # the three servers whose starts went away are stopped and reaped; the preloader and the kept server live on
    assert wait_until(lambda: {c.pid for c in preloader.children() if c.status() != "zombie"} == {kept.pid})
    time.sleep(1.0)
    assert alive(kept.preloader_pid) and kept.poll() is None
    os.killpg(kept.pid, signal.SIGTERM)
    assert kept.wait(20) == -signal.SIGTERM


def test_runs_of_other_owners_get_other_preloaders(standin: dict[str, str], tmp_path: Path) -> None:
    scope = uuid.uuid4().hex
    other_owner = subprocess.Popen(["sleep", "60"])
    try:
        mine = spawn(standin, tmp_path / "a.log", "exit", "0", scope=scope)
        theirs = spawn(standin, tmp_path / "b.log", "exit", "0", scope=scope, owner=other_owner.pid)
        assert mine.wait(20) == 0 and theirs.wait(20) == 0
        assert mine.preloader_pid != theirs.preloader_pid
    finally:
        other_owner.kill()
        other_owner.wait()


def test_servers_die_with_their_preloader(standin: dict[str, str], tmp_path: Path) -> None:
    server = spawn(standin, tmp_path / "a.log", "sleep", "60", scope=uuid.uuid4().hex)
    os.kill(server.preloader_pid, signal.SIGKILL)
    assert server.wait(20) == -signal.SIGKILL  # the connection closed: the start reads the death signal's end
    assert wait_until(lambda: not alive(server.pid))
