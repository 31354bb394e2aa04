"""One slot's worker: runs pair jobs one at a time as ``specharness run`` subprocesses pinned to the slot, and sends
each run folder back as bytes.

:class:`SlotWorker` is plain Python (Ray makes an actor of it in :mod:`specharness.matrix.fanout`): on its node it
resolves the slot's :class:`~specharness.matrix.pinning.Pinning`, and :meth:`SlotWorker.run` runs a job in a folder
of its own (its files written first), the subprocess bound to the slot's cores and killed with the worker
(``PR_SET_PDEATHSIG``), and returns a :class:`JobOutcome` with the run folder packed (tar.gz).
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specharness.engines.model import cache_dir
from specharness.history.asv.machine import machine_info
from specharness.matrix.pinning import (
    Pinning,
    SlotPlan,
    cpu_cores,
    free_port_block,
    gpu_cores,
    gpu_cpulists,
    host_caches,
    job_env,
    seed_caches,
)
from specharness.matrix.plan import Job, job_words

__all__ = ["RUN_LOG", "JobOutcome", "SlotWorker", "exit_status", "harness_command"]

RUN_LOG = "specharness-run.log"  # the job's stdout and stderr, packed beside its run folder
_STOP_GRACE_S = 60.0  # a timed-out job's harness gets this long after SIGTERM to stop its engines
_PR_SET_PDEATHSIG = 1


def harness_command() -> tuple[str, ...]:
    """``specharness`` as a command of this interpreter."""
    return (sys.executable, "-m", "specharness")


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """One attempt at a job: ``done`` (the run exited 0), ``failed`` (the run's own failure: an engine, bad input, a
    timeout) or ``lost`` (the host's: the worker or its node died, or the run was killed from outside)."""

    job: str
    attempt: int
    status: str
    reason: str
    host: str
    node_ip: str
    machine: str  # the ASV machine series of the host that ran it
    slot: str  # the slot's pinning in words
    cores: tuple[int, ...] = ()
    gpu: str = ""
    first_port: int = 0
    cache_dir: str = ""  # the slot's compile caches ("": the host's)
    started_unix_s: float = 0.0
    ended_unix_s: float = 0.0
    returncode: int | None = None
    output_tail: str = ""
    archive: bytes = b""  # the job folder's run/ and its log, tar.gz

    @property
    def wall_s(self) -> float:
        return self.ended_unix_s - self.started_unix_s


def _pin(cores: Sequence[int]) -> None:
    """In the job's process before exec: bind it (and so its engines) to the slot's cores, and have the kernel send
    it SIGTERM when the worker dies (its harness then stops its engines)."""
    if cores:
        os.sched_setaffinity(0, cores)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def exit_status(returncode: int, tail: str, timed_out: bool, timeout_s: float) -> tuple[str, str]:
    """(status, reason) of a finished run from its exit: the harness's own error line when it printed one."""
    if timed_out:
        return "failed", f"timed out after {timeout_s:.0f} s (job_timeout_s)"
    if returncode == 0:
        return "done", ""
    errors = [line for line in tail.splitlines() if line.startswith("specharness: error:")]
    if returncode < 0:
        name = signal.Signals(-returncode).name
        return "lost", f"specharness run killed by {name} from outside the job (the host's: out of memory?)"
    if errors:
        return "failed", errors[-1].removeprefix("specharness: error:").strip()
    last = next((line for line in reversed(tail.splitlines()) if line.strip()), "")
    return "failed", f"specharness run exited {returncode}" + (f": {last.strip()}" if last else "")


class SlotWorker:
    """The worker of one slot on the node it was placed on (:class:`~specharness.matrix.pinning.SlotPlan`)."""

    def __init__(
        self,
        slot: SlotPlan,
        scratch: str,
        *,
        command: Sequence[str] = (),
        machine: str = "",
        shared_caches: bool = False,
        gpu_ids: Sequence[str] = (),
    ) -> None:
        self.slot = slot
        self.scratch = Path(scratch)
        self.command = tuple(command) or harness_command()
        self.machine = machine or str(machine_info()["machine"])
        allowed = sorted(os.sched_getaffinity(0))
        if slot.gpu:
            gpu = str(gpu_ids[0]) if gpu_ids else ""
            cores = gpu_cores(int(gpu), gpu_cpulists(), allowed) if gpu.isdigit() else tuple(allowed)
        else:
            gpu, cores = "", cpu_cores(allowed, slot.index, slot.cores_per_job)
        caches = "" if shared_caches else str(cache_dir() / "matrix-slots" / str(slot.index))
        if caches:
            seed_caches(Path(caches), host_caches(os.environ, cache_dir()))
        self.pinning = Pinning(cores, gpu, free_port_block(slot.index), caches)

    def describe(self) -> str:
        """The slot's pinning in words (and a check that the worker started)."""
        return f"{socket.gethostname()} {self.pinning.text()}"

    def run(self, job: Job, attempt: int, timeout_s: float) -> JobOutcome:
        """Run ``job`` (attempt ``attempt``) on this slot and return its outcome with the run folder packed."""
        job_dir = self.scratch / f"{job.folder}.{attempt}"
        shutil.rmtree(job_dir, ignore_errors=True)
        job_dir.mkdir(parents=True)
        for name, text in job.files:
            (job_dir / name).write_text(text, encoding="utf-8")
        words = job_words(job, job_dir, self.pinning.first_port)
        env = job_env(os.environ, self.pinning)
        started = time.time()
        timed_out = False
        with open(job_dir / RUN_LOG, "wb") as log:
            proc = subprocess.Popen(
                [*self.command, *words],
                cwd=job_dir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=lambda: _pin(self.pinning.cores),
            )
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=_STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        tail = (job_dir / RUN_LOG).read_text(errors="replace")[-4000:]
        status, reason = exit_status(proc.returncode, tail, timed_out, timeout_s)
        archive = _pack(job_dir)
        shutil.rmtree(job_dir, ignore_errors=True)
        return JobOutcome(
            job=job.key,
            attempt=attempt,
            status=status,
            reason=reason,
            host=socket.gethostname(),
            node_ip=self.slot.node_ip,
            machine=self.machine,
            slot=self.pinning.text(),
            cores=self.pinning.cores,
            gpu=self.pinning.gpu,
            first_port=self.pinning.first_port,
            cache_dir=self.pinning.cache_dir,
            started_unix_s=started,
            ended_unix_s=time.time(),
            returncode=proc.returncode,
            output_tail=tail[-1500:],
            archive=archive,
        )


def _pack(job_dir: Path) -> bytes:
    """The job's run folder (``run/``) and its log as tar.gz bytes."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name in ("run", RUN_LOG):
            if (job_dir / name).exists():
                tar.add(job_dir / name, arcname=name)
    return buffer.getvalue()
