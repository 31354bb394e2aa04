"""Stopping engines: a server that never answered gets the short grace (vLLM ignores SIGTERM through much of its
start, so an interrupted start waited out the whole grace of each engine in turn), and an interrupted start stops
every engine at once. Stand-ins only: no process is started."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from specharness.engines.fleet import stop_together
from specharness.engines.server import ArmSpec, EngineServer, EngineSettings
from specharness.engines.server import process as process_module
from specharness.engines.server.process import STARTING_GRACE_S, STOP_GRACE_S


def test_a_server_still_starting_gets_the_short_grace(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    graces: list[float] = []
    monkeypatch.setattr(process_module, "stop_group", lambda proc, grace_s: graces.append(grace_s))
    server = EngineServer(EngineSettings(model_path="m", served_model_name="m"), ArmSpec("ngram"), tmp_path / "a.log")
    server.stop()  # never spawned: nothing to stop
    server.process = object()  # type: ignore[assignment]  # a stand-in: stop_group is replaced
    server.stop()
    server.version = "0.32.0"  # it answered /health
    server.stop()
    server.stop(grace_s=3.0)
    assert graces == [STARTING_GRACE_S, STOP_GRACE_S, 3.0] and STARTING_GRACE_S < STOP_GRACE_S


class _StopsWhenAllStop:
    """A stand-in whose stop returns only once every other stand-in's stop has begun."""

    def __init__(self, barrier: threading.Barrier) -> None:
        self.barrier = barrier
        self.stopped = False

    def stop(self, grace_s: float | None = None) -> None:
        self.barrier.wait(timeout=10)  # one after another, the first would wait alone and break the barrier
        self.stopped = True


def test_an_interrupted_start_stops_every_engine_at_once() -> None:
    barrier = threading.Barrier(4)
    servers = [_StopsWhenAllStop(barrier) for _ in range(4)]
    stop_together(servers)
    assert all(s.stopped for s in servers)


def test_a_failing_stop_is_raised_after_the_others_stopped() -> None:
    class Failing:
        def stop(self, grace_s: float | None = None) -> None:
            raise OSError("cannot signal")

    other = _StopsWhenAllStop(threading.Barrier(1))
    with pytest.raises(OSError, match="cannot signal"):
        stop_together([Failing(), other])
    assert other.stopped
