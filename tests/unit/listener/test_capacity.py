"""Scheduled minimums and the burst buffer (G25, G26): the policy, then the listener with it.

Time is an argument of the policy, and virtual (looptime) in the listener tests, so a
window that opens in 30 s or a decay of 100 s costs nothing.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable

import pytest
from listener_fakes import FakeActions, FakePatcher, config, job, message

from gharc.api.schedule import ScheduleError
from gharc.listener.app import Listener
from gharc.listener.capacity import CapacityPolicy
from gharc.listener.config import ConfigError
from testworld.wait import eventually

UTC = dt.UTC
DAYTIME_BERLIN = {
    "startTime": "2026-01-05T08:00:00",
    "endTime": "2026-01-05T18:00:00",
    "timeZone": "Europe/Berlin",
    "recurrenceRule": {"frequency": "Daily"},
    "minRunners": 5,
}


@pytest.mark.parametrize(
    ("utc", "expected"),
    [
        ("2026-01-12T07:30:00", 5),  # 08:30 CET (winter): inside
        ("2026-01-12T06:30:00", 1),  # 07:30 CET: before
        ("2026-07-13T06:30:00", 5),  # 08:30 CEST (summer): still inside, by wall clock
        ("2026-07-13T16:30:00", 0 + 1),  # 18:30 CEST: after
        ("2026-01-04T07:30:00", 1),  # before the first occurrence
    ],
)
def test_a_window_keeps_its_local_hours_across_daylight_saving(utc: str, expected: int) -> None:
    policy = CapacityPolicy(1, [DAYTIME_BERLIN])
    now = dt.datetime.fromisoformat(utc).replace(tzinfo=UTC)
    assert policy.min_runners(now) == expected


def test_a_fixed_offset_would_drift_by_an_hour_in_summer() -> None:
    fixed = {
        **DAYTIME_BERLIN,
        "timeZone": None,
        "startTime": "2026-01-05T08:00:00+01:00",
        "endTime": "2026-01-05T18:00:00+01:00",
    }
    summer_0830_local = dt.datetime(2026, 7, 13, 6, 30, tzinfo=UTC)
    assert CapacityPolicy(1, [fixed]).min_runners(summer_0830_local) == 1  # why timeZone exists


def test_next_change_is_the_window_boundary() -> None:
    policy = CapacityPolicy(1, [DAYTIME_BERLIN])
    now = dt.datetime(2026, 1, 12, 6, 59, 30, tzinfo=UTC)  # 07:59:30 CET
    assert policy.next_change(now, 0.0) == pytest.approx(30.0)


def test_bad_schedules_are_refused_with_the_reason() -> None:
    with pytest.raises(ScheduleError, match="unknown timeZone"):
        CapacityPolicy(0, [{**DAYTIME_BERLIN, "timeZone": "Mars/Olympus"}])
    with pytest.raises(ConfigError, match=r"scheduled_overrides: .*end after"):
        config(
            scheduled_overrides=[
                {"startTime": "2026-01-05T08:00:00Z", "endTime": "2026-01-05T07:00:00Z"}
            ]
        )


def test_burst_buffer_decays_linearly_after_the_last_arrival() -> None:
    policy = CapacityPolicy(0, burst_runners=4, burst_decay_seconds=100)
    assert policy.extra(0.0) == 0  # no demand yet
    policy.note_demand(10.0)
    assert [policy.extra(10.0 + t) for t in (0, 24.9, 25, 50, 99, 100)] == [4, 4, 3, 2, 1, 0]
    assert policy.next_change(dt.datetime.now(UTC), 20.0) == pytest.approx(15.0)
    assert policy.next_change(dt.datetime.now(UTC), 200.0) is None


@pytest.mark.looptime
async def test_listener_raises_the_floor_when_a_window_opens_without_any_message() -> None:
    api, patcher = FakeActions(poll_seconds=50.0), FakePatcher()
    start = dt.datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
    window = {
        "startTime": "2026-03-02T08:00:30Z",
        "endTime": "2026-03-02T09:00:00Z",
        "minRunners": 3,
    }
    listener = Listener(config(min_runners=0, scheduled_overrides=[window]), api, patcher)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    listener.wall_clock = lambda: start + dt.timedelta(seconds=loop.time() - t0)
    task = asyncio.create_task(listener.run())
    try:
        await eventually(_has(patcher, 3), timeout=120, interval=0.5)
        # At the window's start, not at the end of the 50 s long poll.
        assert 30.0 <= loop.time() - t0 < 35.0
        assert patcher.replicas[0] == (0, 0) and patcher.replicas[-1][1] > 0
    finally:
        listener.request_stop()
        await asyncio.wait_for(task, 30)


@pytest.mark.looptime
async def test_listener_keeps_burst_runners_while_jobs_flow_then_lets_them_go() -> None:
    api, patcher = FakeActions(poll_seconds=50.0), FakePatcher()
    cfg = config(min_runners=0, max_runners=20, burst_runners=2, burst_decay_seconds=60)
    listener = Listener(cfg, api, patcher)
    task = asyncio.create_task(listener.run())
    try:
        await eventually(_has(patcher, 0), timeout=10, interval=0.5)
        api.queue.put_nowait(message(1, [job("JobAvailable", 1)], assigned=1))
        await eventually(_has(patcher, 3), timeout=10, interval=0.5)  # 1 job + 2 extra
        await eventually(_has(patcher, 2, after=3), timeout=60, interval=0.5)
        await eventually(_has(patcher, 1, after=2), timeout=60, interval=0.5)
    finally:
        listener.request_stop()
        await asyncio.wait_for(task, 30)


def _has(
    patcher: FakePatcher, replicas: int, after: int | None = None
) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        seen = [r for r, _ in patcher.replicas]
        if after is not None and after in seen:
            seen = seen[seen.index(after) + 1 :]
        return replicas in seen

    return probe
