"""Scheduled overrides (RFC 5545 recurrences) and reservations/clamping/scale-down hold."""

from __future__ import annotations

import datetime as dt

import pytest

from gharc.api import schedule
from gharc.controllers.legacy import capacity

UTC = dt.UTC


def t(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=UTC)


# ---- schedules ---------------------------------------------------------------------------


def test_a_one_off_override_is_upcoming_then_active_then_gone() -> None:
    start, end = t("2024-05-01T09:00:00"), t("2024-05-01T17:00:00")
    assert schedule.match_schedule(t("2024-05-01T08:00:00"), start, end) == (
        None,
        schedule.Period(start, end),
    )
    assert schedule.match_schedule(t("2024-05-01T09:00:00"), start, end) == (
        schedule.Period(start, end),
        None,
    )
    assert schedule.match_schedule(t("2024-05-01T17:00:00"), start, end) == (None, None)


def test_a_daily_override_is_active_inside_todays_window_and_upcoming_tomorrow() -> None:
    start, end = t("2024-05-01T09:00:00"), t("2024-05-01T17:00:00")
    active, upcoming = schedule.match_schedule(t("2024-05-10T12:00:00"), start, end, "Daily")
    assert active == schedule.Period(t("2024-05-10T09:00:00"), t("2024-05-10T17:00:00"))
    assert upcoming == schedule.Period(t("2024-05-11T09:00:00"), t("2024-05-11T17:00:00"))


def test_a_weekly_override_outside_its_window_is_only_upcoming() -> None:
    # 2024-05-04 is a Saturday; the weekly window is Saturday 00:00 - Monday 00:00
    start, end = t("2024-05-04T00:00:00"), t("2024-05-06T00:00:00")
    active, upcoming = schedule.match_schedule(t("2024-05-08T12:00:00"), start, end, "Weekly")
    assert active is None
    assert upcoming == schedule.Period(t("2024-05-11T00:00:00"), t("2024-05-13T00:00:00"))


def test_until_time_ends_the_recurrence() -> None:
    start, end = t("2024-05-01T09:00:00"), t("2024-05-01T17:00:00")
    until = t("2024-05-03T09:00:00")
    assert schedule.match_schedule(t("2024-05-04T12:00:00"), start, end, "Daily", until) == (
        None,
        None,
    )


def test_an_override_longer_than_its_frequency_is_an_error() -> None:
    with pytest.raises(schedule.ScheduleError, match="longer"):
        schedule.match_schedule(
            t("2024-05-01T00:00:00"), t("2024-05-01T00:00:00"), t("2024-05-03T00:00:00"), "Daily"
        )
    with pytest.raises(schedule.ScheduleError, match="frequency"):
        schedule.match_schedule(
            t("2024-05-01T00:00:00"), t("2024-05-01T00:00:00"), t("2024-05-01T01:00:00"), "Hourly"
        )


def test_monthly_period_length_uses_go_date_normalisation() -> None:
    # Go: Jan 31 + 1 month = Mar 2 (2024 is a leap year), so the period is 31 days long
    assert schedule._go_date_add(t("2024-01-31T00:00:00"), 0, 1, 0) == t("2024-03-02T00:00:00")


def _override(start: str, end: str, min_replicas: int | None, freq: str = "") -> dict[str, object]:
    o: dict[str, object] = {"startTime": start, "endTime": end}
    if min_replicas is not None:
        o["minReplicas"] = min_replicas
    if freq:
        o["recurrenceRule"] = {"frequency": freq}
    return o


def test_the_first_active_override_wins_and_the_earliest_upcoming_is_reported() -> None:
    now = t("2024-05-01T12:00:00")
    overrides = [
        _override("2024-05-01T10:00:00Z", "2024-05-01T14:00:00Z", 5),
        _override("2024-05-01T11:00:00Z", "2024-05-01T13:00:00Z", 9),
        _override("2024-05-02T10:00:00Z", "2024-05-02T14:00:00Z", 7),
        _override("2024-05-01T15:00:00Z", "2024-05-01T16:00:00Z", 3),
    ]
    m, active, upcoming = schedule.match_overrides(now, overrides)
    assert m == 5
    assert active is not None and active.period.end == t("2024-05-01T14:00:00")
    assert upcoming is not None and upcoming.min_replicas == 3
    # active ends (14:00) before the upcoming one starts (15:00): summary tells the end
    assert schedule.overrides_summary(1, active, upcoming) == (
        "min=1 time=2024-05-01 14:00:00 +0000 UTC"
    )


def test_the_summary_names_the_upcoming_override_when_nothing_is_active() -> None:
    now = t("2024-05-01T08:00:00")
    _, active, upcoming = schedule.match_overrides(
        now, [_override("2024-05-01T10:00:00Z", "2024-05-01T14:00:00Z", 4)]
    )
    assert active is None
    assert schedule.overrides_summary(1, active, upcoming) == (
        "min=4 time=2024-05-01 10:00:00 +0000 UTC"
    )


def test_an_active_override_without_min_replicas_shadows_later_ones() -> None:
    now = t("2024-05-01T12:00:00")
    m, active, _ = schedule.match_overrides(
        now,
        [
            _override("2024-05-01T10:00:00Z", "2024-05-01T14:00:00Z", None),
            _override("2024-05-01T10:00:00Z", "2024-05-01T14:00:00Z", 8),
        ],
    )
    assert active is not None
    assert m is None


# ---- reservations, clamping, hold ----------------------------------------------------------

NOW = t("2024-05-01T12:00:00")


def _res(expires_in: float, replicas: int = 1, effective_ago: float = 0) -> dict[str, object]:
    return {
        "effectiveTime": (NOW - dt.timedelta(seconds=effective_ago)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "expirationTime": (NOW + dt.timedelta(seconds=expires_in)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "replicas": replicas,
    }


def _decide(**kw: object) -> int:
    args: dict[str, object] = {
        "suggested": None,
        "min_replicas": 1,
        "max_replicas": 10,
        "reservations": [],
        "status_desired": None,
        "last_scale_out": None,
        "scale_down_delay": dt.timedelta(minutes=10),
        "now": NOW,
    }
    args.update(kw)
    return capacity.decide_replicas(**args).replicas  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        ({}, 1),
        ({"suggested": 4}, 4),
        ({"reservations": [_res(60), _res(60), _res(-1)]}, 3),  # min 1 + 2 active
        ({"suggested": 4, "reservations": [_res(60)]}, 5),
        ({"suggested": 0, "reservations": [_res(60)]}, 1),  # 0 + 1, at min
        ({"suggested": 20}, 10),  # clamped to max
        ({"suggested": 0, "min_replicas": 2}, 2),
    ],
)
def test_reservations_are_added_to_the_suggestion_and_the_sum_is_clamped(
    kw: dict[str, object], expected: int
) -> None:
    assert _decide(**kw) == expected


def test_scale_down_is_held_inside_the_delay_after_a_scale_out() -> None:
    recent = NOW - dt.timedelta(minutes=5)
    long_ago = NOW - dt.timedelta(minutes=11)
    assert _decide(suggested=2, status_desired=6, last_scale_out=recent) == 6
    assert _decide(suggested=2, status_desired=6, last_scale_out=long_ago) == 2
    assert _decide(suggested=8, status_desired=6, last_scale_out=recent) == 8  # up is never held
    held = capacity.decide_replicas(
        suggested=2,
        min_replicas=1,
        max_replicas=10,
        reservations=[],
        status_desired=6,
        last_scale_out=recent,
        scale_down_delay=dt.timedelta(seconds=30),
        now=NOW,
    )
    assert held.replicas == 2  # a 30 s delay has passed after 5 min


def test_the_effective_time_is_the_newest_over_all_reservations_expired_included() -> None:
    newest = _res(-5, effective_ago=1)
    older = _res(60, effective_ago=100)
    assert capacity.latest_effective_time([older, newest]) == NOW - dt.timedelta(seconds=1)
    assert capacity.latest_effective_time([]) is None
