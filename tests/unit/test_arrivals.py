"""Open-loop arrivals: schedules (pure, seeded, gamma gaps) and the sender that keeps them.

The sender tests use a fake ``send`` (an ``asyncio.sleep``); they assert on order, on never being early and on the
statistics computed from the recorded times, not on tight wall-clock bounds, so a loaded machine does not fail them.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time

import numpy as np
import pytest
from scipy import stats as sps

from specharness import ConfigError
from specharness.traffic.arrivals import ArrivalSpec, block_seed, parse_rates, schedule
from specharness.traffic.openloop import OpenLoopStats, run_open_loop

# ---- schedules ---------------------------------------------------------------------------------------------------


def test_schedule_is_reproducible_for_a_seed_and_differs_for_another() -> None:
    spec = ArrivalSpec(rate_rps=2.0, seed=7)
    first = schedule(spec, 50)
    assert first == schedule(ArrivalSpec(rate_rps=2.0, seed=7), 50)
    assert first != schedule(ArrivalSpec(rate_rps=2.0, seed=8), 50)
    assert len(first) == 50 and first[0] == 0.0
    assert all(b >= a for a, b in itertools.pairwise(first))
    assert all(type(x) is float for x in first)
    assert schedule(spec, 20) == first[:20]  # a shorter cell sends the same first requests
    assert schedule(spec, 0) == () and schedule(spec, 1) == (0.0,)


def test_same_seed_scales_with_the_rate() -> None:
    """Same seed, same shape: numpy's gamma is scale x standard gamma, so doubling the rate halves every offset."""
    slow, fast = schedule(ArrivalSpec(1.0, seed=3), 30), schedule(ArrivalSpec(2.0, seed=3), 30)
    assert np.allclose(np.array(slow) / 2, fast, rtol=1e-12, atol=0)


@pytest.mark.parametrize("burstiness", [1.0, 0.25, 4.0])
def test_gaps_follow_the_stated_gamma(burstiness: float) -> None:
    """Mean gap 1/rate and CV 1/sqrt(k): tolerances are 5 standard errors for n = 200 000 gaps (k = 0.25: about 5 %
    on the CV), so a wrong mean, shape or scale fails and sampling noise does not."""
    rate, n = 4.0, 200_000
    gaps = np.diff(schedule(ArrivalSpec(rate, burstiness=burstiness, seed=11), n + 1))
    k, cv = burstiness, 1 / math.sqrt(burstiness)
    # standard errors: of the mean, cv/sqrt(n) relative; of the sd, sqrt((2 + excess kurtosis 6/k) / n) / 2 relative
    se_mean = cv / math.sqrt(n)
    se_sd = math.sqrt((2 + 6 / k) / n) / 2
    assert gaps.mean() == pytest.approx(1 / rate, rel=5 * se_mean)
    assert gaps.std(ddof=1) / gaps.mean() == pytest.approx(cv, rel=5 * (se_sd + se_mean))
    scale = 1 / (k * rate)
    assert sps.kstest(gaps, "gamma", args=(k, 0, scale)).pvalue > 1e-3
    # the same test has power: a shape off by 25 % is rejected outright
    assert sps.kstest(gaps, "gamma", args=(k * 1.25, 0, 1 / (k * 1.25 * rate))).pvalue < 1e-6


def test_poisson_and_bursty_cv_are_told_apart() -> None:
    poisson = np.diff(schedule(ArrivalSpec(1.0, seed=5), 20_001))
    bursty = np.diff(schedule(ArrivalSpec(1.0, burstiness=0.25, seed=5), 20_001))
    assert 0.95 < poisson.std() / poisson.mean() < 1.05
    assert 1.8 < bursty.std() / bursty.mean() < 2.2
    assert ArrivalSpec(1.0).gap_cv == 1.0 and ArrivalSpec(1.0, burstiness=0.25).gap_cv == 2.0


def test_rate_inf_sends_everything_at_once() -> None:
    assert schedule(ArrivalSpec(math.inf, burstiness=0.25, seed=3), 5) == (0.0,) * 5
    assert ArrivalSpec(math.inf).mean_gap_s == 0.0


def test_block_seed_is_stable_and_distinct() -> None:
    # a golden value: Python's hash() of a str would change it between processes; changing the derivation would
    # change the schedules of runs already journaled
    assert block_seed(0, 0, "copy", 2.0) == 0x25CD75DE28FA3683
    assert block_seed(3, 1, "free", math.inf) == 0x22A9BB9AAFB31BCA
    seeds = {block_seed(0, b, w, load) for b in range(4) for w in ("copy", "free") for load in (2, 2.0, 0.5, math.inf)}
    assert len(seeds) == 4 * 2 * 4
    assert block_seed(1, 0, "copy", 2.0) != block_seed(0, 0, "copy", 2.0)
    assert all(0 <= s < 2**63 for s in seeds)  # fits a signed 64-bit column
    with pytest.raises(TypeError):
        block_seed(0, True, "copy", 2.0)


# ---- validation: one line, naming the flag -----------------------------------------------------------------------


def test_parse_rates() -> None:
    assert parse_rates("0.5,2,inf") == (0.5, 2.0, math.inf)
    assert parse_rates(" 1 , 3 ") == (1.0, 3.0)


@pytest.mark.parametrize("text", ["", " , ", "a", "0", "-1", "nan", "1,,2", "2,2.0", "1\n2"])
def test_bad_rates_are_one_line_naming_the_flag(text: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_rates(text)
    message = str(err.value)
    assert message.startswith("--rates ") and "\n" not in message


@pytest.mark.parametrize(
    ("kwargs", "flag"),
    [
        ({"rate_rps": 0.0}, "--rates"),
        ({"rate_rps": -2.0}, "--rates"),
        ({"rate_rps": math.nan}, "--rates"),
        ({"rate_rps": 1.0, "burstiness": 0.0}, "--burstiness"),
        ({"rate_rps": 1.0, "burstiness": math.inf}, "--burstiness"),
        ({"rate_rps": 1.0, "burstiness": math.nan}, "--burstiness"),
        ({"rate_rps": 1.0, "max_concurrency": 0}, "--max-concurrency"),
        ({"rate_rps": 1.0, "seed": -1}, "--arrival-seed"),
    ],
)
def test_bad_specs_are_one_line_naming_the_flag(kwargs: dict[str, float], flag: str) -> None:
    with pytest.raises(ConfigError) as err:
        ArrivalSpec(**kwargs)  # type: ignore[arg-type]
    message = str(err.value)
    assert message.startswith(flag + " ") and "\n" not in message


# ---- lateness statistics from recorded times ---------------------------------------------------------------------


def test_stats_are_computed_from_the_recorded_times() -> None:
    scheduled = (0.0, 0.1, 0.2, 0.3)
    actual = (0.001, 0.1, 0.25, 0.304)
    s = OpenLoopStats(scheduled, actual, late_tolerance_s=0.005, min_on_time_fraction=0.75)
    assert s.requests == 4 and s.scheduled_duration_s == 0.3
    assert s.lateness_s == pytest.approx((0.001, 0.0, 0.05, 0.004))
    assert s.on_time_fraction == 0.75 and s.late_requests == 1
    assert s.max_lateness_s == pytest.approx(0.05)
    assert s.p95_lateness_s == pytest.approx(np.percentile([0.001, 0.0, 0.05, 0.004], 95))
    assert s.delivered is True
    assert OpenLoopStats(scheduled, actual, min_on_time_fraction=0.95).delivered is False
    empty = OpenLoopStats((), ())
    assert empty.requests == 0 and math.isnan(empty.on_time_fraction) and math.isnan(empty.p95_lateness_s)
    assert empty.delivered is False
    with pytest.raises(ValueError, match="before its scheduled time"):
        OpenLoopStats((0.0, 0.1), (0.0, 0.09))


# ---- the sender --------------------------------------------------------------------------------------------------


class Recorder:
    """A fake ``send``: sleeps ``hold_s`` and records what it was given and when (event-loop clock)."""

    def __init__(self, hold_s: float) -> None:
        self.hold_s = hold_s
        self.calls: list[tuple[int, str, float, float, float]] = []  # seq, item, scheduled, lateness, clock offset
        self.finished: list[int] = []
        self.cancelled: list[int] = []
        self.in_flight = self.peak = 0
        self.origin = math.nan

    async def __call__(self, seq: int, item: str, scheduled_s: float, lateness_s: float) -> None:
        self.calls.append((seq, item, scheduled_s, lateness_s, asyncio.get_running_loop().time() - self.origin))
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.hold_s)
            self.finished.append(seq)
        except asyncio.CancelledError:
            self.cancelled.append(seq)
            raise
        finally:
            self.in_flight -= 1

    async def run(self, items: list[str], offsets: tuple[float, ...], **kwargs: object) -> OpenLoopStats:
        self.origin = asyncio.get_running_loop().time()
        return await run_open_loop(items, offsets, self, **kwargs)  # type: ignore[arg-type]


def _items(n: int) -> list[str]:
    return [f"case-{i}" for i in range(n)]


def test_sends_in_order_never_early_nothing_dropped() -> None:
    offsets = schedule(ArrivalSpec(rate_rps=40.0, seed=1), 20)  # about 0.5 s
    rec = Recorder(hold_s=0.05)
    t0 = time.perf_counter()
    stats = asyncio.run(rec.run(_items(20), offsets))
    elapsed = time.perf_counter() - t0
    assert [c[0] for c in rec.calls] == list(range(20))  # every request once, in order
    assert [c[1] for c in rec.calls] == _items(20)
    assert sorted(rec.finished) == list(range(20))
    assert [c[2] for c in rec.calls] == list(offsets)
    # never early, by the sender's own clock and by an independent one started before it
    assert all(lateness >= 0 for *_, lateness, _ in rec.calls)
    assert all(clock >= scheduled for _, _, scheduled, _, clock in rec.calls)
    assert elapsed >= offsets[-1] + 0.05
    # the statistics are the recorded times, and what send was told is what the stats say
    assert stats.requests == 20 and stats.scheduled_s == offsets
    assert stats.lateness_s == tuple(a - s for s, a in zip(stats.scheduled_s, stats.actual_s, strict=True))
    assert stats.lateness_s == tuple(c[3] for c in rec.calls)
    assert all(b >= a for a, b in itertools.pairwise(stats.actual_s))
    lateness = np.array(stats.lateness_s)
    assert stats.on_time_fraction == np.mean(lateness <= 0.005)
    assert stats.late_requests == int(np.sum(lateness > 0.005))
    assert stats.max_lateness_s == lateness.max()
    assert stats.p95_lateness_s == pytest.approx(np.percentile(lateness, 95))
    assert stats.delivered == (stats.on_time_fraction >= 0.95)
    assert stats.scheduled_duration_s == offsets[-1]
    assert stats.peak_in_flight == rec.peak >= 1


def test_a_late_wakeup_does_not_delay_the_sends_after_it() -> None:
    """No drift: the loop is blocked for 0.2 s during the first send; sends due later are still sent on their own
    time, not 0.2 s late (a sleep-the-gap loop would carry the delay to the end)."""
    offsets = tuple(0.05 * i for i in range(12))  # 0 .. 0.55 s

    async def blocking(seq: int, item: str, scheduled_s: float, lateness_s: float) -> None:
        if seq == 0:
            time.sleep(0.2)  # blocks the event loop, as a slow synchronous step in the client would

    stats = asyncio.run(run_open_loop(_items(12), offsets, blocking))
    assert stats.lateness_s[1] >= 0.1  # due at 0.05, the loop was busy until 0.2
    assert stats.lateness_s[-1] < 0.1  # due at 0.55: back on schedule
    assert stats.late_requests >= 3


def test_a_concurrency_cap_makes_later_requests_late_and_counts_them() -> None:
    offsets = (0.0, 0.01, 0.02, 0.03, 0.04)
    rec = Recorder(hold_s=0.05)
    stats = asyncio.run(rec.run(_items(5), offsets, max_concurrency=1))
    assert rec.peak == 1 and stats.peak_in_flight == 1
    assert [c[0] for c in rec.calls] == list(range(5)) and sorted(rec.finished) == list(range(5))
    # request k cannot start before k sends of 0.05 s have ended: at least 0.04 k late (1 ms for timer rounding)
    for k in range(1, 5):
        assert stats.lateness_s[k] >= 0.04 * k - 1e-3
    assert stats.late_requests >= 4 and stats.delivered is False
    uncapped = Recorder(hold_s=0.05)
    asyncio.run(uncapped.run(_items(5), offsets))
    assert uncapped.peak > 1  # the same schedule overlaps without the cap


def test_rate_inf_with_a_cap_is_a_fixed_number_in_flight() -> None:
    rec = Recorder(hold_s=0.01)
    stats = asyncio.run(rec.run(_items(6), schedule(ArrivalSpec(math.inf), 6), max_concurrency=2))
    assert rec.peak == 2 and [c[0] for c in rec.calls] == list(range(6)) and stats.requests == 6


def test_cancellation_cancels_in_flight_sends_and_raises() -> None:
    offsets = tuple(0.1 * i for i in range(10))  # 0 .. 0.9 s
    rec = Recorder(hold_s=10.0)

    async def go() -> tuple[int, int]:
        task = asyncio.create_task(rec.run(_items(10), offsets))
        await asyncio.sleep(0.25)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        started = len(rec.calls)
        assert sorted(rec.cancelled) == [c[0] for c in rec.calls]  # every send in flight was cancelled, and ended
        await asyncio.sleep(0.15)  # past the next scheduled send
        return started, len(rec.calls)

    started, later = asyncio.run(go())
    assert 1 <= started < 10 and later == started  # nothing more is sent after the cancel
    assert rec.finished == [] and rec.in_flight == 0


def test_a_failing_send_cancels_the_others_and_propagates() -> None:
    rec = Recorder(hold_s=10.0)

    async def send(seq: int, item: str, scheduled_s: float, lateness_s: float) -> None:
        if seq == 2:
            raise OSError("journal disk full")
        await rec(seq, item, scheduled_s, lateness_s)

    with pytest.raises(OSError, match="disk full"):
        asyncio.run(run_open_loop(_items(5), (0.0, 0.0, 0.01, 0.5, 0.6), send))
    assert sorted(rec.cancelled) == [0, 1] and len(rec.calls) == 2


def test_bad_arguments_raise() -> None:
    async def send(seq: int, item: str, scheduled_s: float, lateness_s: float) -> None:
        return None

    for offsets, kwargs in [
        ((0.0,), {}),
        ((0.0, 0.1, 0.05), {}),
        ((0.0, math.inf, math.inf), {}),
        ((0.0, 0.0, 0.0), {"max_concurrency": 0}),
    ]:
        with pytest.raises(ValueError):
            asyncio.run(run_open_loop(_items(3), offsets, send, **kwargs))  # type: ignore[arg-type]


def test_one_stray_late_send_is_delivered_a_lagging_client_is_not() -> None:
    from specharness.traffic.openloop import delivered

    assert delivered(0, 8, 0.001)
    assert delivered(1, 8, 0.007)  # one wake-up 7 ms late: a stray, the offered load stands
    assert not delivered(1, 8, 0.030)  # one send 30 ms late in a small cell: not a stray
    assert not delivered(2, 8, 0.006)  # two late in eight: the client is falling behind
    assert delivered(2, 40, 0.5)  # 5% of 40 may be late however late
    assert not delivered(0, 0, float("nan"))
