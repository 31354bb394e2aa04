"""A server's process group (each server leads its own session): the child's death signal when the harness dies
(PR_SET_PDEATHSIG), stopping the whole group (SIGTERM, then SIGKILL), and whether any process of it is left."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time

from specharness.engines import preload

__all__ = ["die_with_parent", "group_alive", "stop_group", "wait_group_gone"]


def die_with_parent() -> None:
    """In the child: get SIGKILL when the harness dies, so a killed harness leaves no server behind."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def stop_group(proc: subprocess.Popen[bytes] | preload.ForkedProcess, grace_s: float) -> None:
    """Stop the process group ``proc`` leads: SIGTERM, then SIGKILL after ``grace_s``. Safe to call twice."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def group_alive(pgid: int) -> bool:
    """Whether any process of the process group ``pgid`` is left (a server leads its own group)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_group_gone(pgid: int, timeout_s: float) -> bool:
    """Wait until no process of the group ``pgid`` is left; True when none is left within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while group_alive(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.25)
    return True
