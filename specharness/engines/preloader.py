"""The preloader: imports an engine's server module once, then forks a server for each start request that
:func:`specharness.engines.preload.spawn_forked` sends. It runs by path in the engine's interpreter, so this file
imports nothing outside the standard library; the helper processes' logger and the process check live here for the
same reason (the engine pool's keeper uses them). How it works: docs/development.md#the-preloader.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import select
import signal
import socket
import struct
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["POLL_S", "helper_log", "main", "process_start_time", "serve"]

POLL_S = 0.5  # seconds between looks, here and in the harness's ForkedProcess
_REQUEST_LIMIT = 1 << 22  # bytes of one start request (argv and environment)
_LOG = logging.getLogger("specharness.preloader")  # lines to the preloader's log (its stdout), set up by serve()


def helper_log(name: str) -> logging.Logger:
    """The logger of a helper process beside the harness (``specharness.<name>``: the preloader, an engine's keeper):
    its lines to stdout, the helper's log file, as they are written and unprefixed (they name the process
    themselves). Here because this file imports only the standard library."""
    log = logging.getLogger(f"specharness.{name}")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
    return log


def process_start_time(pid: int) -> str | None:
    """A live process's start time (clock ticks since boot, from /proc): tells a live process from a reused pid;
    None for a process that has ended (gone, or a zombie)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if len(fields) < 20 or fields[0] in ("Z", "X") else fields[19]


def _kill_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _env_changes(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, str | None]:
    """What an import did to the environment: each variable it set (its value) or removed (None)."""
    changes: dict[str, str | None] = {k: v for k, v in after.items() if before.get(k) != v}
    changes.update({k: None for k in before if k not in after})
    return changes


def serve(name: str, module: str, owner_pid: int, idle_s: float) -> int:
    """Import ``module``, then fork a server for each start request until the owner is gone or no server has run
    for ``idle_s``; returns the exit code."""
    me = os.getpid()
    helper_log("preloader")  # _LOG's console: this process's stdout
    owner_started = process_start_time(owner_pid)
    before = dict(os.environ)
    t0 = time.monotonic()
    __import__(module)
    imported_env = _env_changes(before, os.environ)  # vLLM sets some at import (env_override): each server gets them
    libc = ctypes.CDLL("libc.so.6", use_errno=True)  # loaded before any fork: a forked child opens no library
    threads = len(os.listdir("/proc/self/task"))  # native ones (thread pools) too: Python warns at each fork
    _LOG.info(
        f"preloader {me}: imported {module} in {time.monotonic() - t0:.1f} s; {threads} threads; environment set by "
        f"the import: {', '.join(sorted(imported_env)) or 'none'}"
    )
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + name)
    listener.listen(16)
    servers: dict[int, socket.socket | None] = {}  # server pid -> its start's connection (None once closed)
    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    last_server = time.monotonic()
    why = ""
    while not why:
        conns = [conn for conn in servers.values() if conn is not None]
        readable, _, _ = select.select([listener, *conns], [], [], POLL_S)
        for sock in readable:
            if sock is listener:
                new, _ = listener.accept()
                _, uid, _ = struct.unpack("3i", new.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
                if uid != os.getuid():  # only this user's processes may start a server as this user
                    new.close()
                    continue
                pid = _fork_one(new, listener, conns, module, imported_env, libc)
                if pid is not None:
                    servers[pid] = new
                continue
            with contextlib.suppress(OSError):
                if sock.recv(1):
                    continue
            for pid, start in list(servers.items()):  # the start's process is gone: stop its server
                if start is sock:
                    _kill_group(pid, signal.SIGKILL)
                    servers[pid] = None
                    sock.close()
        last_server = _reap(servers) or last_server
        if servers:
            last_server = time.monotonic()
        if stopping:
            why = "signal"
        elif owner_started is None or process_start_time(owner_pid) != owner_started:
            why = f"owner {owner_pid} is gone"
        elif time.monotonic() - last_server > idle_s:
            why = f"no server for {idle_s:.0f} s"
    listener.close()
    for pid in servers:
        _kill_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + 20.0
    while servers and time.monotonic() < deadline:
        time.sleep(0.2)
        _reap(servers)
    for pid in servers:
        _kill_group(pid, signal.SIGKILL)
    _LOG.info(f"preloader {me}: {why}; ended")
    return 0


def _reap(servers: dict[int, socket.socket | None]) -> float | None:
    """Collect ended servers and tell each one's start its exit status; the time of the last one, if any ended."""
    ended = None
    while servers:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        conn = servers.pop(pid, None)
        ended = time.monotonic()
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
            conn.close()
    return ended


def _fork_one(
    conn: socket.socket,
    listener: socket.socket,
    others: Sequence[socket.socket],
    module: str,
    imported_env: Mapping[str, str | None],
    libc: ctypes.CDLL,
) -> int | None:
    """Read one start request from ``conn`` and fork its server (``python -m module``); the server's pid (tracked
    until reaped, even when its start went away before the answer: its connection then reads as closed and the
    server is stopped), or None for a bad request. ``others``: the connections of other starts, closed in the
    child."""
    conn.settimeout(10.0)
    data = b""
    try:
        while b"\n" not in data and len(data) < _REQUEST_LIMIT:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        request = json.loads(data.split(b"\n", 1)[0])
        argv, env, cwd, log = request["argv"], request["env"], request["cwd"], request["log"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps({"error": f"bad start request: {error}"}).encode() + b"\n")
        conn.close()
        return None
    conn.settimeout(None)
    sys.stdout.flush()
    sys.stderr.flush()
    session_r, session_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the server
        os.close(session_r)
        child_env = {**env, **{k: v for k, v in imported_env.items() if v is not None}}
        for key in (k for k, v in imported_env.items() if v is None):
            child_env.pop(key, None)
        _become_server([listener, conn, *others], session_w, libc, module, argv, child_env, cwd, log)
    os.close(session_w)
    ready = select.select([session_r], [], [], 30.0)[0]  # its own session exists before its pid is told
    os.close(session_r)
    if not ready:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    try:
        conn.sendall(json.dumps({"pid": pid, "preloader_pid": os.getpid()}).encode() + b"\n")
    except OSError as error:  # the start went away: its server must not run on
        _LOG.info(f"preloader {os.getpid()}: the start of server {pid} went away before its answer ({error})")
        _kill_group(pid, signal.SIGKILL)
    return pid


def _become_server(
    sockets: Sequence[socket.socket],
    session_w: int,
    libc: ctypes.CDLL,
    module: str,
    argv: list[str],
    env: dict[str, str],
    cwd: str,
    log: str,
) -> None:
    """In the forked child: become ``python -m module argv`` in its own session, never returning (exit handlers and
    non-daemon threads are run and joined as at the end of ``python -m``)."""
    code = 1
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as python -m has it
        parent = os.getppid()
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the preloader
        if os.getppid() != parent:  # it died before the death signal was set
            os._exit(1)
        os.setsid()
        os.write(session_w, b"s")
        os.close(session_w)
        for sock in sockets:
            sock.close()
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        sys.argv = [module, *argv]  # run_module puts the module's file first, as python -m does
        if sys.path:
            sys.path[0] = cwd  # python -m's first path entry: the folder it was started in
        import runpy
        import warnings

        # running a module the preloader imported: runpy warns that it is in sys.modules; python -m runs it as
        # __main__ beside any imported copy the same way
        warnings.filterwarnings("ignore", message=".*found in sys.modules.*", category=RuntimeWarning)
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        import atexit
        import threading

        with contextlib.suppress(BaseException):
            getattr(threading, "_shutdown", lambda: None)()  # join non-daemon threads, as interpreter exit does
        with contextlib.suppress(BaseException):
            getattr(atexit, "_run_exitfuncs", lambda: None)()
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 5 or args[0] != "serve":
        print("usage: python preloader.py serve NAME MODULE OWNER_PID IDLE_S", file=sys.stderr)
        return 2
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        sys.path[0] = os.getcwd()  # as python -m has it: this file's folder must not shadow top-level modules
    return serve(args[1], args[2], int(args[3]), float(args[4]))


if __name__ == "__main__":
    sys.exit(main())
