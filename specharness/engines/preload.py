"""Engine servers forked from a preloaded interpreter: a warm start without importing torch and vLLM again.

:func:`spawn_forked` asks a preloader (:func:`specharness.engines.preloader.serve`, started on demand) to fork
``python -m module args`` as a server and returns a :class:`ForkedProcess`; :func:`enabled` says whether a start uses
it. This is the harness's side; the preloader itself is :mod:`specharness.engines.preloader`.
How it works: docs/development.md#the-preloader.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import select
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from specharness.engines import preloader
from specharness.engines.preloader import POLL_S, process_start_time

__all__ = [
    "ENV",
    "ForkedProcess",
    "PreloadUnavailable",
    "enabled",
    "forked",
    "spawn_forked",
]

ENV = "SPECHARNESS_PRELOADED_SERVER"  # "1": fork servers from a preloaded interpreter, "0": never (default: on a GPU)
_UNAVAILABLE: dict[str, str] = {}  # preloaders that failed in this process, with why


class PreloadUnavailable(Exception):
    """No preloader could serve this start (it failed to import the server module, or did not answer); the caller
    starts the server the usual way."""


def enabled(env: Mapping[str, str], *, cpu_build: bool) -> bool:
    """Whether servers are forked from a preloader: ``ENV`` when it is "0" or "1", else on a GPU only (the CPU
    build spawns its engine core, which imports vLLM again anyway, so the gain there is the API server's share)."""
    value = env.get(ENV, "").strip()
    if value in ("0", "1"):
        return value == "1"
    return not cpu_build


def forked(engine_env: Mapping[str, str]) -> bool:
    """Whether a server's journaled environment (``engine_env``) says it was forked from a preloader."""
    return engine_env.get(ENV) == "1"


def _address(python: str, module: str, env: Mapping[str, str], scope: str, owner_pid: int) -> str:
    """The preloader's abstract socket name for this interpreter, module, environment, scope and owner (runs of
    other owners sharing a pool folder get their own: a preloader stops its servers when its owner ends)."""
    key = json.dumps([python, module, sorted(env.items()), scope, owner_pid, process_start_time(owner_pid)])
    return "specharness-preload-" + hashlib.sha256(key.encode()).hexdigest()[:24]


def _connect(name: str) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect("\0" + name)
    except OSError:
        sock.close()
        return None
    return sock


class ForkedProcess:
    """A server forked by a preloader, with the part of :class:`subprocess.Popen` the harness uses: ``pid``,
    :meth:`poll`, :meth:`wait` (``returncode`` as Popen gives it: negative for a signal)."""

    def __init__(self, pid: int, sock: socket.socket, preloader_pid: int, buffered: bytes = b"") -> None:
        self.pid = pid
        self.preloader_pid = preloader_pid
        self.returncode: int | None = None
        self._sock = sock
        self._buffer = buffered  # what came after the pid line (an exit, when the server ended at once)
        self._messages()

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = POLL_S if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(f"forked server {self.pid}", timeout or 0.0)
            self._read(min(left, POLL_S))
        return self.returncode

    def _read(self, timeout: float) -> None:
        readable, _, _ = select.select([self._sock], [], [], timeout)
        if not readable:
            return
        data = self._sock.recv(4096)
        if not data:  # the preloader is gone: its servers got SIGKILL (their death signal)
            self._finish(-signal.SIGKILL)
            return
        self._buffer += data
        self._messages()

    def _messages(self) -> None:
        while b"\n" in self._buffer and self.returncode is None:
            line, self._buffer = self._buffer.split(b"\n", 1)
            message = json.loads(line)
            if "exit" in message:
                self._finish(int(message["exit"]))

    def _finish(self, code: int) -> None:
        self.returncode = code
        with contextlib.suppress(OSError):
            self._sock.close()


def spawn_forked(
    python: str,
    module: str,
    args: Sequence[str],
    env: Mapping[str, str],
    log_path: Path,
    *,
    scope: str,
    owner_pid: int,
    idle_s: float = 300.0,
    ready_timeout_s: float = 900.0,
) -> ForkedProcess:
    """Fork ``python -m module args`` (environment ``env``, output appended to ``log_path``, working folder this
    process's) from the preloader of this interpreter, module, environment and scope, starting that preloader when
    none answers (it imports ``module`` first: the first start pays the import once). Raises
    :class:`PreloadUnavailable` when no preloader can serve it."""
    name = _address(python, module, env, scope, owner_pid)
    if name in _UNAVAILABLE:  # this process saw it fail: every start would pay for the failing import again
        raise PreloadUnavailable(_UNAVAILABLE[name])
    request = json.dumps({"argv": list(args), "env": dict(env), "cwd": os.getcwd(), "log": str(log_path)})
    for _ in range(2):  # a preloader that ends (idle) just as a start connects answers nothing: start another
        try:
            sock = _connect(name) or _start_preloader(
                name, python, module, env, log_path.parent, owner_pid, idle_s, ready_timeout_s
            )
        except PreloadUnavailable as why:
            _UNAVAILABLE[name] = str(why)
            raise
        try:
            sock.sendall(request.encode() + b"\n")
            reply, rest = _read_line(sock, timeout_s=60.0)
        except OSError:
            reply, rest = None, b""
        if reply is not None and "pid" in reply:
            return ForkedProcess(int(str(reply["pid"])), sock, int(str(reply.get("preloader_pid", 0))), rest)
        sock.close()
        if reply is not None:
            raise PreloadUnavailable(f"the preloader did not fork the server: {reply.get('error')}")
    raise PreloadUnavailable("the preloader did not answer the start request")


def _read_line(sock: socket.socket, timeout_s: float) -> tuple[dict[str, object] | None, bytes]:
    """The first JSON line from ``sock`` (None when none comes in time) and the bytes read after it."""
    data = b""
    deadline = time.monotonic() + timeout_s
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([sock], [], [], left)[0]:
            return None, b""
        chunk = sock.recv(4096)
        if not chunk:
            return None, b""
        data += chunk
    first, rest = data.split(b"\n", 1)
    line = json.loads(first)
    return (line if isinstance(line, dict) else None), rest


def _start_preloader(
    name: str,
    python: str,
    module: str,
    env: Mapping[str, str],
    log_dir: Path,
    owner_pid: int,
    idle_s: float,
    ready_timeout_s: float,
) -> socket.socket:
    """Start the preloader ``name`` (one at a time: a lock in the temp folder) and connect to it once it listens."""
    lock_path = Path(tempfile.gettempdir()) / f"{name}.lock"
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        sock = _connect(name)  # another start may have started it meanwhile
        if sock is not None:
            return sock
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"preloader.{name.rsplit('-', 1)[1][:12]}.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [python, str(Path(preloader.__file__).resolve()), "serve", name, module, str(owner_pid), str(idle_s)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(env),
                start_new_session=True,
            )
        deadline = time.monotonic() + ready_timeout_s
        while (sock := _connect(name)) is None:
            if proc.poll() is not None:
                raise PreloadUnavailable(
                    f"the preloader ended (exit code {proc.returncode}) before it listened: {_last_line(log_path)} "
                    f"(log: {log_path})"
                )
            if time.monotonic() > deadline:
                proc.kill()
                raise PreloadUnavailable(
                    f"the preloader did not listen within {ready_timeout_s:.0f} s (log: {log_path})"
                )
            time.sleep(0.1)
        return sock


def _last_line(path: Path) -> str:
    try:
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "(no log)"
    return lines[-1] if lines else "(empty log)"
